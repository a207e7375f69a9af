"""Every door prepares its run with the same function, RunRequest.task: a flow from
`owrl run --flow`, a batch row, a server job and `Agent.prepare_flow`, and a task from
`owrl run --task`, `Agent.run` and a server task job. Each door is tested once here, without
a browser: the function is watched, and the task it made is checked."""

from __future__ import annotations

import json
from typing import Any

import pytest

from owrl_sdk.flows.runrequest import RunRequest

FLOW: dict[str, Any] = {
    "schema": "owrl.flow/1", "task": "find {{input:q}}", "start_url": "http://127.0.0.1:9/search?q={{input:q}}",
    "inputs": {"q": {"type": "string"}, "n": {"type": "integer", "default": 2}},
    "turns": [{"calls": [{"name": "write", "arguments": {"selector": "#q", "message": "{{input:q}}"}}]},
              {"calls": [{"name": "done", "arguments": {"response": "{{input:n}}"}}]}],
}


class Prepared(Exception):
    """Stops a door once its task is prepared (no browser is needed to see it)."""


class Made(list):
    """The tasks RunRequest.task made, in order; after ``stop()``, the door stops right after."""

    stopping = False

    def stop(self) -> None:
        self.stopping = True


@pytest.fixture
def prepared(monkeypatch):
    made = Made()
    original = RunRequest.task

    def watched(self, *args, **kwargs):
        task = original(self, *args, **kwargs)
        made.append(task)
        if made.stopping:
            raise Prepared
        return task

    monkeypatch.setattr(RunRequest, "task", watched)
    return made


def check(task: Any, q: str = "a b") -> None:
    """What every door's task holds: the values filled into its text and URL, the flow as
    given with its values beside it (the player fills them in once), the output schema."""
    assert task.intent == f"find {q}"
    assert task.start_url == "http://127.0.0.1:9/search?q=" + q.replace(" ", "%20")
    assert task.metadata["flow"]["turns"][0]["calls"][0]["arguments"]["message"] == "{{input:q}}"
    assert task.metadata["flow_inputs"] == {"q": q, "n": 2} == task.metadata["inputs"]


def test_agent_prepare_flow(prepared):
    from owrl_sdk import Agent

    task = Agent().prepare_flow(FLOW, {"q": "a b"})
    assert len(prepared) == 1 and prepared[0] is task
    check(task)


def test_a_batch_row(prepared, tmp_path):
    from owrl_sdk.flows.batch import Batch
    from owrl_sdk.config import Settings
    from owrl_sdk.formats.documents import Flow

    batch = Batch(Flow.model_validate(FLOW), [{"q": "a b"}, {"q": "c"}], out=tmp_path / "b",
                  settings=Settings(runs_dir=str(tmp_path)))
    tasks = [batch.prepare(row) for row in batch.rows]
    assert prepared == tasks and len(tasks) == 2
    check(tasks[0])
    check(tasks[1], "c")
    assert tasks[0].metadata["flow"] is tasks[1].metadata["flow"]  # one flow for every row
    assert [t.id for t in tasks] == ["row-1", "row-2"] and tasks[1].metadata["batch_row"] == 2


def test_owrl_run_with_a_flow(prepared, tmp_path):
    from click.testing import CliRunner

    from owrl_sdk.commands.run import run_command

    prepared.stop()
    flow = tmp_path / "f.json"
    flow.write_text(json.dumps(FLOW))
    result = CliRunner().invoke(run_command, ["--flow", str(flow), "--input", "q=a b", "--out", str(tmp_path / "r")])
    assert isinstance(result.exception, Prepared), result.output
    assert len(prepared) == 1
    check(prepared[0])


def test_a_server_job(prepared, tmp_path):
    from owrl_sdk.config import Settings
    from owrl_sdk.contract.plugins import Plugins
    from owrl_sdk.server.jobs import JobStore
    from owrl_sdk.server.runner import JobRunner

    runner = JobRunner(JobStore(tmp_path / "jobs.sqlite3"), tmp_path, Settings(), Plugins())
    # the spec as POST /v1/jobs/flow queues it: the shown text and URL filled in, the request as given
    spec = {"task": "find a b", "start_url": "http://127.0.0.1:9/search?q=a%20b", "policy": "scripted",
            "max_steps": 4, "allowed_domains": ["127.0.0.1"], "inputs": {"q": "a b", "n": 2},
            "request": {"url": FLOW["start_url"], "task": FLOW["task"]}, "flow": FLOW}
    task = runner.job_task("job1", spec)
    assert prepared == [task]
    check(task)
    assert task.allowed_domains == ["127.0.0.1"] and task.max_steps == 4 and task.metadata["serve_job"] == "job1"


def test_a_value_that_holds_a_placeholder_is_filled_in_once():
    """A value is data: "{{input:n}}" typed as q is written as that text, in the task, the URL
    and the calls the player makes, and never filled in a second time."""
    import asyncio

    from owrl_sdk import Agent
    from owrl_sdk.config import Settings
    from owrl_sdk.flows.flowplayer import ScriptedPolicy
    from owrl_sdk.contract.memory import Context
    from owrl_sdk.types import Observation

    task = Agent().prepare_flow(FLOW, {"q": "{{input:n}}", "n": 7})
    assert task.intent == "find {{input:n}}" and task.start_url.endswith("?q=%7B%7Binput%3An%7D%7D")
    from owrl_sdk.formats.documents import Flow

    player = ScriptedPolicy(Settings(), flow=Flow.model_validate(FLOW))
    turn = asyncio.run(player.act(Context(task=task, observation=Observation(url=task.start_url), tools=[])))
    assert turn.calls[0].arguments["message"] == "{{input:n}}"


# ------------------------------------------------------------------ a task, no flow


def check_plain(task: Any) -> None:
    """What every door makes of the task text "find {{input:q}}" at the bare host
    127.0.0.1:9/search with q = "a b": the address rules (a bare host gets https://), the value
    filled into the text (a task's text is the request's), the values recorded."""
    assert task.start_url == "https://127.0.0.1:9/search"
    assert task.metadata.get("inputs", {}) in ({}, {"q": "a b"})


def test_owrl_run_with_a_task(prepared, tmp_path):
    from click.testing import CliRunner

    from owrl_sdk.commands.run import run_command

    prepared.stop()
    result = CliRunner().invoke(run_command, ["--task", "find {{input:q}}", "--url", "127.0.0.1:9/search",
                                              "--input", "q=a b", "--out", str(tmp_path / "r")])
    assert isinstance(result.exception, Prepared), result.output
    assert "note: no scheme given: using https://127.0.0.1:9/search" in result.output
    (task,) = prepared
    check_plain(task)
    assert task.intent == "find a b" and task.metadata["inputs"] == {"q": "a b"}


def test_agent_run_with_a_task(prepared):
    from owrl_sdk import Agent

    task = Agent().make_task("find a b", "127.0.0.1:9/search")
    assert prepared == [task]
    check_plain(task)
    assert task.intent == "find a b"
    from owrl_sdk.errors import UsageError

    with pytest.raises(UsageError, match="is not a valid address"):
        Agent().make_task("find", "https://")  # the same rules refuse what cannot be an address


def test_a_server_task_job(prepared, tmp_path):
    from owrl_sdk.config import Settings
    from owrl_sdk.contract.plugins import Plugins
    from owrl_sdk.server.jobs import JobStore
    from owrl_sdk.server.runner import JobRunner

    runner = JobRunner(JobStore(tmp_path / "jobs.sqlite3"), tmp_path, Settings(), Plugins())
    task = runner.job_task("job2", {"task": "find a b", "start_url": "https://127.0.0.1:9/search", "policy": "openwebrl",
                                    "max_steps": 4, "allowed_domains": ["127.0.0.1"]})
    assert prepared == [task]
    check_plain(task)
    assert task.metadata["serve_job"] == "job2" and task.max_steps == 4
