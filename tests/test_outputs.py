"""Outputs: ``extract``, ``save_as`` and ``done``'s structured output checked against an
``output_schema``, on a real Chromium (the embedded demo shop, pages served on 127.0.0.1),
and inputs filled in by ``owrl run --input`` end to end."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest

from owrl_cli import owrl
from owrl_sdk.formats.documents import load_flow, load_trajectory
from owrl_sdk.contract.memory import Context
from owrl_sdk.formats.outputs import check_output, check_schema
from owrl_sdk.contract.policy import Policy
from owrl_sdk.types import PolicyInfo, ToolCall, Turn

ROOT = Path(__file__).resolve().parents[1]
FLOW = ROOT / "examples" / "flows" / "order-history.json"
PASSWORD = {"OWRL_SECRET_SHOP_PASSWORD": "demo1234"}


def run_json(*args: str, cwd: Path, env: dict[str, str] = PASSWORD) -> tuple[int, dict[str, Any], str]:
    out = owrl("run", *args, "--json", "--out", "runs", cwd=cwd, env=env)
    return out.returncode, (json.loads(out.stdout) if out.stdout.strip() else {}), out.stderr


# ---------------------------------------------------------------------------- schema checks


def test_a_schema_mismatch_names_every_path_that_failed():
    schema = json.loads(FLOW.read_text())["output_schema"]
    good = {"orders": [{"Order": "DS-204817", "Date": "2025-05-03", "Total": "$89.00", "Status": "Delivered"}],
            "status": "Delivered"}
    assert check_output(schema, good) is None
    bad = copy.deepcopy(good)
    bad["orders"][0]["Total"] = 89
    del bad["orders"][0]["Order"]
    del bad["status"]
    message = check_output(schema, bad)
    assert message is not None and message.startswith("the output does not match the output_schema: ")
    assert "(the output): 'status' is a required property" in message
    assert "orders[0]: 'Order' is a required property" in message
    assert "orders[0].Total: 89 is not of type 'string'" in message
    with pytest.raises(ValueError, match="not a valid JSON schema"):
        check_schema({"type": "thing"})


# ---------------------------------------------------------------------------- the demo shop's order history


def test_extract_reads_the_order_history_into_output_that_validates(tmp_path):
    code, result, err = run_json("--flow", str(FLOW), cwd=tmp_path)
    assert code == 0, err
    assert result["outcome"]["status"] == "success"
    orders = result["outputs"]["orders"]
    assert [o["Order"] for o in orders] == ["DS-204817", "DS-198342"]
    assert orders[1] == {"Order": "DS-198342", "Date": "2025-03-14",
                         "Items": "Wool Beanie (One size, Grey) × 2; Canvas Tote Bag (One size, Black) × 1",
                         "Total": "$63.00", "Status": "Delivered"}
    assert result["outputs"]["status"] == "Delivered"
    assert check_output(load_flow(FLOW).output_schema, result["outputs"]) is None
    assert result["inputs"] == {"email": "demo@shop.test", "order": "DS-204817"}
    run = Path(result["run_dir"])
    on_disk = json.loads((run / "result.json").read_text())
    assert on_disk["outputs"] == result["outputs"] and on_disk["inputs"] == result["inputs"]
    traj = load_trajectory(run)
    assert traj.inputs == result["inputs"] and traj.outcome.outputs == result["outputs"]
    assert traj.task.intent == "Log in to the demo shop as demo@shop.test and read the order history."
    assert traj.task.output_schema == load_flow(FLOW).output_schema
    # the password was a secret: typed, never written
    assert "demo1234" not in (run / "trajectory.json").read_text() + (run / "result.json").read_text()


def test_a_schema_invalid_output_fails_the_flow_with_the_path(tmp_path):
    data = json.loads(FLOW.read_text())
    data["output_schema"]["properties"]["orders"]["items"]["properties"]["Total"] = {"type": "number"}
    flow = tmp_path / "strict.json"
    flow.write_text(json.dumps(data))
    code, result, err = run_json("--flow", str(flow), cwd=tmp_path)
    assert code == 1, err
    failure = result["outcome"]["failure"]
    assert failure["category"] == "policy"
    assert "done: the output does not match the output_schema: orders[0].Total: '$89.00' is not of type 'number'" \
        in failure["detail"]
    assert "orders[1].Total" in failure["detail"]
    # what was saved before done is still handed back
    assert [o["Order"] for o in result["outputs"]["orders"]] == ["DS-204817", "DS-198342"]


@pytest.mark.slow
def test_inputs_change_what_the_flow_reads(tmp_path):
    code, result, err = run_json("--flow", str(FLOW), "--input", "order=DS-198342", cwd=tmp_path)
    assert code == 0, err
    assert result["inputs"]["order"] == "DS-198342" and result["outputs"]["status"] == "Delivered"
    # an impossible input: the row of that order is not there, and the flow says where it stopped
    code, result, err = run_json("--flow", str(FLOW), "--input", "order=DS-000000", "--max-steps", "5",
                                 cwd=tmp_path)
    assert code == 1 and result["outcome"]["failure"] is not None


def test_input_problems_are_one_error_before_any_browser(tmp_path):
    started = time.monotonic()
    out = owrl("run", "--flow", str(FLOW), "--input", "mail=x@y.z", "--input", "order=",
               "--input", "email={{secret:SHOP_PASSWORD}}", cwd=tmp_path)
    assert out.returncode == 2
    assert "2 input problems" in out.stderr
    assert "unknown input 'mail' (inputs: email, order)" in out.stderr
    assert "input 'email' holds a {{secret:...}} placeholder" in out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "runs").exists()
    out = owrl("run", "--flow", str(FLOW), "--input", "order", cwd=tmp_path)
    assert out.returncode == 2 and "write it as NAME=VALUE" in out.stderr
    out = owrl("run", "--task", "find {{input:q}}", "--url", "http://127.0.0.1:9/", cwd=tmp_path)
    assert out.returncode == 2 and "{{input:q}} is used but has no value" in out.stderr
    assert time.monotonic() - started < 60


# ---------------------------------------------------------------------------- pages on 127.0.0.1

ECHO = """<title>Echo</title><h1 id="h">Hello</h1>
<p id="q"></p><script>document.getElementById('q').textContent = new URLSearchParams(location.search).get('q');</script>
<div role="grid" aria-label="Stock">
  <div role="row"><span role="columnheader">SKU</span><span role="columnheader">Left</span></div>
  <div role="row"><span role="gridcell">A-1</span><span role="gridcell">3</span></div>
  <div role="row"><span role="gridcell">B-2</span><span role="gridcell">0</span></div>
</div>
<a id="more" href="/more?page=2">More</a>
<input id="name" value="Ada">"""


def test_an_input_with_spaces_and_ampersands_lands_whole_in_the_url(tmp_path, owrl_page_server):
    base = owrl_page_server({"/echo": ECHO})
    flow = {
        "task": "echo {{input:q}}",
        "start_url": base + "echo?q={{input:q}}&x=1",
        "inputs": {"q": {"description": "the text to echo"}},
        "turns": [{"calls": [
            {"name": "extract", "arguments": {"selector": "#q"}, "save_as": "echoed",
             "expect": {"text_visible": "{{input:q}}", "url_contains": "q={{input:q}}&x=1"}},
            {"name": "extract", "arguments": {"selector": "role=grid", "what": "records"}, "save_as": "stock"},
            {"name": "extract", "arguments": {"selector": "#more", "what": "attribute", "attribute": "href"},
             "save_as": "next"},
            {"name": "extract", "arguments": {"selector": "#name", "what": "value", "name": "who"}},
            {"name": "done", "arguments": {"response": "echoed", "output": {"count": 2}}},
        ]}],
    }
    path = tmp_path / "echo.json"
    path.write_text(json.dumps(flow))
    value = "tea & cake = {{secret:SHOP_PASSWORD}}?#1"
    code, result, err = run_json("--flow", str(path), "--input", f"q={value}", cwd=tmp_path, env={})
    assert code == 2 and "inputs are not secrets" in err
    value = "tea & cake = 100%?#1 / {{input:q}}"
    code, result, err = run_json("--flow", str(path), "--input", f"q={value}", cwd=tmp_path, env={})
    assert code == 0, err
    assert result["outputs"] == {"echoed": value, "stock": [{"SKU": "A-1", "Left": "3"}, {"SKU": "B-2", "Left": "0"}],
                                 "next": "/more?page=2", "who": "Ada", "count": 2}
    assert result["inputs"] == {"q": value}


@pytest.mark.slow
def test_extract_explains_what_it_cannot_read(owrl_page_server, owrl_run_flow):
    base = owrl_page_server({"/": ECHO})
    traj = owrl_run_flow([{"calls": [
        {"name": "extract", "arguments": {"selector": "#h", "what": "table"}},
    ]}], base)
    error = traj.steps[0].calls[0].result.error
    assert "is not a table and holds none" in error
    traj = owrl_run_flow([{"calls": [
        {"name": "extract", "arguments": {"selector": "#h", "what": "attribute", "attribute": "data-x"}},
    ]}], base)
    assert "has no attribute 'data-x'" in traj.steps[0].calls[0].result.error
    traj = owrl_run_flow([{"calls": [{"name": "extract", "arguments": {"selector": "#h", "what": "value"}}]}], base)
    assert "is not a form field" in traj.steps[0].calls[0].result.error


def test_a_flow_played_through_the_python_api_keeps_its_schema(owrl_page_server, owrl_run_flow):
    base = owrl_page_server({"/": ECHO})
    flow = {"output_schema": {"type": "object", "required": ["title"],
                              "properties": {"title": {"type": "string", "const": "Hello"}}},
            "turns": [{"calls": [{"name": "extract", "arguments": {"selector": "#h"}, "save_as": "title"},
                                 {"name": "done", "arguments": {"output": {"title": "Goodbye"}}}]}]}
    traj = owrl_run_flow(flow, base)
    assert traj.outcome.status == "fail"
    assert "title: 'Hello' was expected" in traj.outcome.failure.detail
    assert traj.outcome.outputs == {"title": "Hello"}  # done did not run: its output is not handed back


class SecondTry(Policy):
    """A policy that reads the feedback: a first ``done`` whose output is wrong, then a right one."""

    name = "second-try"

    def info(self) -> PolicyInfo:
        return PolicyInfo(name=self.name)

    async def act(self, context: Context) -> Turn:
        if not context.history:
            return Turn(calls=[ToolCall(name="extract", arguments={"selector": "#h", "name": "title"}),
                               ToolCall(name="done", arguments={"output": {"count": "two"}})])
        feedback = context.history[-1].feedback
        assert "count: 'two' is not of type 'integer'" in feedback
        return Turn(calls=[ToolCall(name="done", arguments={"response": "ok", "output": {"count": 2}})])


def test_a_failed_check_is_feedback_a_policy_acts_on(owrl_page_server, tmp_path):
    from owrl_sdk import Agent
    from owrl_sdk.config import Settings
    from owrl_sdk.types import Task

    base = owrl_page_server({"/": ECHO})
    task = Task(intent="count", start_url=base, output_schema={
        "type": "object", "required": ["title", "count"],
        "properties": {"title": {"type": "string"}, "count": {"type": "integer"}}})
    with Agent(SecondTry(Settings()), settings=Settings(runs_dir=str(tmp_path))) as agent:
        traj = agent.run_sync(task)
    assert traj.outcome.status == "success", traj.outcome
    assert traj.outcome.outputs == {"title": "Hello", "count": 2}
    first = traj.steps[0].calls[1].result
    assert not first.ok and first.error_kind == "policy.bad_arguments"
