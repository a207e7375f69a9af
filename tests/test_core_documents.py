"""Trajectory and flow documents: exact round trips, and errors that name the bad field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from owrl_sdk.formats.documents import Flow, load_flow, load_trajectory, save_trajectory, trajectory_to_json
from owrl_sdk.errors import DocumentError
from owrl_sdk.types import (
    CallRecord, Check, Expectation, Failure, Judgement, Observation, Outcome, PolicyInfo, Step, Tab, Target,
    Task, ToolCall, ToolResult, Trajectory, Turn, Verdict,
)


def sample() -> Trajectory:
    call = ToolCall(name="click", arguments={"point_2d": [500, 120]}, expect=Expectation(url_contains="/results"))
    step = Step(
        index=0,
        observation=Observation(url="http://127.0.0.1:8000/", title="Shop", tabs=[Tab(index=0, url="http://127.0.0.1:8000/", active=True)],
                                aria="- button \"Go\" [ref=e4]", screenshot_file="screenshots/0000.jpg", screenshot=b"jpeg"),
        turn=Turn(thought="click go", calls=[call], raw="<think>click go</think><tool_call>...</tool_call>"),
        calls=[CallRecord(call=call, result=ToolResult(feedback="navigated"),
                          verdict=Verdict(ok=True, checks=[Check(key="url_contains", ok=True)], waited_ms=12.5),
                          duration_ms=40.1)],
        feedback="click: navigated",
        timings={"observe_ms": 30.0},
    )
    return Trajectory(
        task=Task(id="shop-1", intent="find the blue shirt", start_url="http://127.0.0.1:8000/", answer="19.99", answer_match="number"),
        policy=PolicyInfo(name="openwebrl", model="OpenWebRL/OpenWebRL-4B", revision="abc"),
        steps=[step],
        outcome=Outcome(status="fail", failure=Failure(category="task", code="max_steps")),
        judgements=[Judgement(judge="outcome", score=0.0, success=False, reason="max steps")],
        reward=-0.5, warnings=["certificate errors ignored by site adapter x"], metadata={"seed": 3},
    )


def test_trajectory_round_trips_exactly(tmp_path):
    traj = sample()
    path = tmp_path / "trajectory.json"
    save_trajectory(traj, path)
    data = json.loads(path.read_text())
    assert data["schema"] == "owrl.trajectory/1"
    assert "screenshot" not in data["steps"][0]["observation"]  # images live in files
    back = load_trajectory(tmp_path)  # a run folder works too
    assert trajectory_to_json(back) == trajectory_to_json(traj)
    assert back == traj.model_copy(update={"steps": [traj.steps[0].model_copy(update={
        "observation": traj.steps[0].observation.model_copy(update={"screenshot": None})})]})


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["steps"][0]["calls"][0]["call"].pop("name"), r"steps\[0\]\.calls\[0\]\.call\.name: Field required"),
    (lambda d: d["outcome"].update(status="great"), r"outcome\.status: Input should be 'success', 'fail'"),
    (lambda d: d.update(schema="owrl.trajectory/9"), r"schema 'owrl.trajectory/9' is not owrl.trajectory/1"),
    (lambda d: d["task"].update(colour="red"), r"task\.colour: Extra inputs are not permitted"),
])
def test_bad_trajectory_names_the_field(tmp_path, mutate, message):
    data = json.loads(trajectory_to_json(sample()))
    mutate(data)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data))
    with pytest.raises(DocumentError, match=message):
        load_trajectory(path)


def test_unreadable_files(tmp_path):
    with pytest.raises(DocumentError, match="no such file"):
        load_trajectory(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(DocumentError, match=r"not valid JSON \(line 1"):
        load_trajectory(bad)


def test_targets_take_exactly_one_way():
    assert Target(point_2d=[10, 20]).describe() == "point (10, 20)"
    assert Target(selector='role=button[name="Go"]').selector == 'role=button[name="Go"]'
    with pytest.raises(ValueError, match="exactly one of point_2d, ref or selector \\(got ref, selector\\)"):
        Target(ref="e1", selector="text=Go")
    with pytest.raises(ValueError, match="got none"):
        Target()
    with pytest.raises(ValueError, match="within 0..1000"):
        Target(point_2d=[10, 2000])


FLOW = {
    "schema": "owrl.flow/1", "task": "search", "start_url": "http://127.0.0.1:1/",
    "turns": [{"thought": "go", "calls": [{"name": "click", "arguments": {"selector": "role=button[name=\"Go\"]"},
                                           "expect": {"url_contains": "/results"}}]}],
}


def test_flow_json_and_yaml(tmp_path):
    import yaml

    j = tmp_path / "f.json"
    j.write_text(json.dumps(FLOW))
    y = tmp_path / "f.yaml"
    y.write_text(yaml.safe_dump(FLOW))
    assert load_flow(j) == load_flow(y)
    flow = load_flow(j)
    assert flow.turns[0].calls[0].expect.url_contains == "/results"
    assert json.loads(flow.to_json()) == FLOW


def test_bad_flow_names_the_field(tmp_path):
    bad = dict(FLOW, turns=[{"calls": [{"name": "click", "expect": {"url_contain": "x"}}]}])
    p = tmp_path / "f.json"
    p.write_text(json.dumps(bad))
    with pytest.raises(DocumentError, match=r"turns\[0\]\.calls\[0\]\.expect\.url_contain: Extra inputs"):
        load_flow(p)


def test_flow_from_trajectory_replays_what_ran():
    traj = sample()
    traj.steps[0].calls.append(CallRecord(call=ToolCall(name="done"), skipped=True, skip_reason="x"))
    flow = Flow.from_trajectory(traj)
    assert [c.name for c in flow.turns[0].calls] == ["click"]
    assert flow.start_url == traj.task.start_url
    assert flow.output_schema is None
    schema = {"type": "object", "required": ["price"]}
    traj.task.output_schema = schema  # a flow's schema travels with its task: the replay keeps it
    assert Flow.from_trajectory(traj).output_schema == schema


def test_element_visible_shorthand():
    assert Expectation(element_visible="e12").element_visible.ref == "e12"
    assert Expectation(element_visible="text=Go").element_visible.selector == "text=Go"


def test_the_published_schemas_accept_every_example_flow_and_reject_broken_ones(tmp_path):
    """`owrl schema flow` (the file an editor checks a flow against as it is typed) accepts the
    flows owrl ships and refuses what the loader refuses; the shipped copies are current."""
    import glob

    import jsonschema

    from owrl_cli import owrl
    from owrl_sdk import schemas

    out = owrl("schema", "flow", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    flow_schema = json.loads(out.stdout)
    assert flow_schema == schemas.schema("flow") == json.loads(schemas.path("flow").read_text())
    check = jsonschema.Draft202012Validator(flow_schema)
    root = Path(__file__).resolve().parents[1]
    shipped = sorted(glob.glob(str(root / "examples/flows/*.json"))) + [str(root / "tests/batch/find-product.json")]
    for path in shipped:
        assert not list(check.iter_errors(json.loads(Path(path).read_text()))), path
    good = json.loads(Path(shipped[0]).read_text())
    broken = [
        {**good, "turns": "click the button"},
        {**good, "turns": [{"calls": [{"arguments": {"selector": "#go"}}]}]},  # a call without a name
        {**good, "surprise": 1},
    ]
    for flow in broken:
        assert list(check.iter_errors(flow)), flow
        from pydantic import ValidationError

        with pytest.raises(ValidationError):
            Flow.model_validate(flow)  # the loader refuses them too
    task = json.loads(owrl("schema", "task", cwd=tmp_path).stdout)
    assert not list(jsonschema.Draft202012Validator(task).iter_errors({"intent": "Buy a hat", "start_url": "https://x/"}))
