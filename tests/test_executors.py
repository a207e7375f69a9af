"""The executors: the same behaviour on ``local`` and ``ray`` (a real local Ray on loopback),
with a real Chromium on pages served on 127.0.0.1; and a third-party executor registered
through ``register_executors`` that ``owrl eval --backend NAME`` uses."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from owrl_baselines import OraclePolicy
from owrl_cli import owrl
from owrl_sdk import hookimpl
from owrl_sdk.scheduling.evaluation import EvalPlan, Evaluation, TaskFileSuite, read_records
from owrl_sdk.scheduling.executors import Executor, WorkItem, Workload, executor_class
from owrl_sdk.contract.plugins import Plugins
from owrl_sdk.episode.runner import EpisodeRecord
from owrl_sdk.types import Task

PAGE = "<html><body><h1>Executors</h1><p>Nothing to do here but answer.</p></body></html>"


class ExplodingOracle(OraclePolicy):
    """The oracle, except on the task ``boom``, where acting raises (the episode is an infra error)."""

    name = "exploding-oracle"

    async def act(self, context):
        if context.task.id == "boom":
            raise RuntimeError("this policy cannot act on boom")
        return await super().act(context)


class CountingFactory:
    """A policy factory that leaves one file per call in ``folder`` (seen across processes)."""

    def __init__(self, folder: Path):
        self.folder = str(folder)

    def __call__(self, settings, plugins):
        (Path(self.folder) / uuid.uuid4().hex).touch()
        return ExplodingOracle(settings)


def answer_task(task_id: str, url: str) -> Task:
    turns = [{"thought": "answer", "calls": [{"name": "done", "arguments": {"response": "ok"}}]}]
    return Task(id=task_id, intent="Answer ok.", start_url=url, answer="ok", answer_match="exact",
                metadata={"oracle_turns": turns})


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    # the test's factory and policy travel by value: the Ray workers cannot import this module
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(address="local", num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(params=["local", "ray"])
def backend(request):
    if request.param == "ray":
        request.getfixturevalue("local_ray")
    return request.param


@pytest.mark.slow
def test_every_item_runs_once_with_one_policy_per_worker_and_failures_contained(
        backend, owrl_page_server, tmp_path, settings):
    base = owrl_page_server({"/a": PAGE, "/b": PAGE, "/boom": PAGE})
    tasks = {t.id: t for t in (answer_task("a", base + "a"), answer_task("b", base + "b"),
                               answer_task("boom", base + "boom"))}
    items = [WorkItem(tasks["a"], 0, "g1"), WorkItem(tasks["a"], 1, "g1"), WorkItem(tasks["boom"], 0, "g2"),
             WorkItem(tasks["b"], 0, "g3")]
    calls = tmp_path / "factory-calls"
    calls.mkdir()
    plugins = Plugins()
    cls = executor_class(plugins, backend)
    assert cls.name == backend
    seen: list = []

    async def go():
        async with cls(settings, plugins, 2) as executor:
            await executor.start(Workload(suite=TaskFileSuite(settings, list(tasks.values())),
                                          policy=CountingFactory(calls), judge="benchmark", out=tmp_path / "out",
                                          with_trajectory=True, record_blocklist=False))
            return await executor.run(items, seen.append)

    results = asyncio.run(go())
    assert sorted(r.item.key for r in results) == sorted(i.key for i in items)  # each item once
    assert [r.item.key for r in seen] == [r.item.key for r in results]  # streamed as they finished
    for r in results:
        assert (r.record.key, r.record.task_id, r.record.episode) == (r.item.key, r.item.task.id, r.item.episode)
        assert r.trajectory is not None and r.trajectory.task.id == r.item.task.id
        assert r.trajectory.task.metadata["episode"] == r.item.episode
    by_key = {r.item.key: r for r in results}
    boom = by_key["boom#0"].record
    assert boom.status == "infra_error" and boom.success is None  # the failing episode ...
    for key in ("a#0", "a#1", "b#0"):  # ... stopped none of the others
        record = by_key[key].record
        assert (record.status, record.success, record.answer) == ("success", True, "ok"), key
        assert (Path(record.run_dir) / "trajectory.json").exists()
    assert len(list(calls.iterdir())) == 2  # the factory once per worker


class InlineExecutor(Executor):
    """A third party's executor: no browser, every episode 'succeeds' at once."""

    name = "inline"
    made: list = []

    async def run(self, items, on_result=None):
        from owrl_sdk.scheduling.executors import WorkResult

        InlineExecutor.made.append(self.workload.policy.name)
        results = []
        for item in items:
            record = EpisodeRecord(key=item.key, task_id=item.task.id, episode=item.episode, status="success",
                                   success=True, score=1.0, steps=0, seconds=0.0, failure=None, answer="inline",
                                   run_dir=None)
            results.append(WorkResult(item, record))
            if on_result is not None:
                on_result(results[-1])
        return results


class InlinePlugin:
    @hookimpl
    def register_executors(self, register):
        register(InlineExecutor)


@pytest.mark.exercises("register_executors")
def test_a_plugin_s_executor_runs_an_evaluation(register_plugin, plugins, settings, tmp_path):
    register_plugin(InlinePlugin(), name="inline-executor")
    assert plugins.catalogue.names("executors") == ["inline", "local", "ray"]
    tasks = [Task(id=f"t{i}", intent="x", start_url="http://127.0.0.1:9/") for i in range(3)]
    plan = EvalPlan(suite=TaskFileSuite(settings, tasks), tasks=tasks, episodes=2, policy="oracle",
                    out=tmp_path / "eval")
    executor = executor_class(plugins, "inline")(settings, plugins, plan.workers)
    summary = asyncio.run(Evaluation(plan, settings, plugins, executor=executor).run())
    assert summary["episodes"] == 6 and summary["success_rate"] == 1.0
    assert InlineExecutor.made == ["oracle"]
    assert sorted(r.key for r in read_records(tmp_path / "eval" / "episodes.jsonl")) == sorted(
        f"t{i}#{n}" for i in range(3) for n in range(2))


def test_owrl_eval_backend_takes_a_plugin_s_executor_and_names_the_known_ones(tmp_path):
    """An installed plugin (an entry point) registers ``inline``; ``--backend inline`` uses it."""
    info = tmp_path / "site" / "owrl_inline-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: owrl-inline\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[owrl]\ninline = owrl_inline_executor\n")
    (tmp_path / "site" / "owrl_inline_executor.py").write_text(textwrap.dedent('''
        from owrl_sdk import hookimpl
        from owrl_sdk.scheduling.executors import Executor, WorkResult
        from owrl_sdk.episode.runner import EpisodeRecord

        class InlineExecutor(Executor):
            name = "inline"

            async def run(self, items, on_result=None):
                out = []
                for item in items:
                    record = EpisodeRecord(key=item.key, task_id=item.task.id, episode=item.episode, status="success",
                                           success=True, score=1.0, steps=0, seconds=0.0, failure=None,
                                           answer="inline", run_dir=None)
                    out.append(WorkResult(item, record))
                    on_result(out[-1])
                return out

        @hookimpl
        def register_executors(register):
            register(InlineExecutor)
    '''))
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"t{i}", "intent": "x", "start_url": "http://127.0.0.1:9/"}) + "\n"
                             for i in range(2)))
    env = {"PYTHONPATH": str(tmp_path / "site")}
    done = owrl("eval", "--suite", str(tasks), "--policy", "oracle", "--backend", "inline", "--out",
                str(tmp_path / "eval"), "--json", env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert summary["episodes"] == 2 and summary["success_rate"] == 1.0
    assert {r.answer for r in read_records(tmp_path / "eval" / "episodes.jsonl")} == {"inline"}
    wrong = owrl("eval", "--suite", str(tasks), "--policy", "oracle", "--backend", "nope", "--out",
                 str(tmp_path / "e2"), env=env, timeout=120)
    assert wrong.returncode == 2
    assert "no executor (backend) named 'nope' (available: inline, local, ray)" in wrong.stderr


def oracle_factory(settings, plugins):
    return ExplodingOracle(settings)


def test_a_stop_from_on_result_drops_the_items_not_started(backend, owrl_page_server, tmp_path, settings):
    """What a batch answers after N identical failures (executors.STOP): no item starts after
    it, on either backend; those already in flight finish."""
    from owrl_sdk.scheduling.executors import STOP

    base = owrl_page_server({"/a": PAGE})
    task = answer_task("a", base + "a")
    items = [WorkItem(task, n, "g") for n in range(8)]
    plugins = Plugins()
    seen: list = []

    def stop_at_first(result):
        seen.append(result)
        return STOP

    async def go():
        async with executor_class(plugins, backend)(settings, plugins, 1) as executor:
            await executor.start(Workload(suite=TaskFileSuite(settings, [task]), policy=oracle_factory,
                                          judge="benchmark", out=tmp_path / "out", record_blocklist=False))
            return await executor.run(items, stop_at_first)

    results = asyncio.run(go())
    assert 1 <= len(results) <= 2, [r.item.key for r in results]  # the first, and one still in flight at most
    assert len(seen) == len(results) and all(r.record.status == "success" for r in results)


# ============================================================================ a local worker lost


BUTTON_PAGE = """<html><body><h1>Lost</h1>
<button onclick="document.querySelector('#out').textContent = 'pressed'">Press</button>
<p id="out">not yet</p></body></html>"""


def press_task(task_id: str, url: str) -> Task:
    turns = [{"thought": "press", "calls": [{"name": "click", "arguments": {"selector": "button"},
                                             "expect": {"text_visible": "pressed"}}]},
             {"thought": "answer", "calls": [{"name": "done", "arguments": {"response": "ok"}}]}]
    return Task(id=task_id, intent="Press, then answer ok.", start_url=url, answer="ok", answer_match="exact",
                metadata={"oracle_turns": turns})


class BrowserKiller(OraclePolicy):
    """The oracle, except that before its first call ever it SIGKILLs the browser it runs in."""

    name = "browser-killer"
    hosts: list = []
    killed: list = []

    async def act(self, context):
        if not BrowserKiller.killed:
            import os
            import signal

            BrowserKiller.killed.append(BrowserKiller.hosts[0].pid)
            os.kill(BrowserKiller.hosts[0].pid, signal.SIGKILL)
        return await super().act(context)


class KillerPlugin:
    @hookimpl
    def register_policies(self, register):
        register(BrowserKiller)


@pytest.mark.parametrize("attempts", [3, 1])
def test_a_local_worker_whose_browser_is_killed_runs_its_episode_again(
        attempts, register_plugin, plugins, settings, owrl_page_server, tmp_path):
    """The local backend does what the Ray backend does for a lost actor: the episode whose
    browser died under it runs again once the browser is back, and summary.json counts the
    lost worker and the retry. With one attempt, the episode stays an infra_error."""
    from owrl_sdk.scheduling.executors import LocalExecutor

    register_plugin(KillerPlugin(), name="browser-killer")
    base = owrl_page_server({"/p": BUTTON_PAGE, "/q": BUTTON_PAGE})
    tasks = [press_task("p", base + "p"), press_task("q", base + "q")]
    plan = EvalPlan(suite=TaskFileSuite(settings, tasks), tasks=tasks, policy="browser-killer", judge="benchmark",
                    out=tmp_path / "eval", record_blocklist=False)
    executor = LocalExecutor(settings, plugins, 1, max_attempts=attempts)
    BrowserKiller.killed.clear()

    async def go():
        evaluation = Evaluation(plan, settings, plugins, executor=executor)
        original = executor.start

        async def start(workload):
            await original(workload)
            BrowserKiller.hosts[:] = executor.hosts  # the policy reaches the worker's browser

        executor.start = start
        return await evaluation.run()

    summary = asyncio.run(go())
    assert len(BrowserKiller.killed) == 1
    records = {r.key: r for r in read_records(tmp_path / "eval" / "episodes.jsonl")}
    assert sorted(records) == ["p#0", "q#0"]  # each episode recorded once, whatever its attempts
    assert summary["backend"] == "local" and summary["workers_lost"] == 1
    if attempts == 3:
        assert summary["episodes_retried"] == 1
        assert all((r.status, r.success) == ("success", True) for r in records.values()), records
        assert summary["infra_errors"] == 0 and summary["success_rate"] == 1.0
    else:
        assert summary["episodes_retried"] == 0
        assert (records["p#0"].status, records["p#0"].failure) == ("infra_error", "infra.browser_crash")
        assert records["q#0"].status == "success"  # the next episode ran on the relaunched browser
