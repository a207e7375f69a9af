"""`owrl run` end to end: a real Chromium on the embedded demo shop, run folders on disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from owrl_sdk.formats.documents import Flow, load_flow, load_trajectory

from owrl_cli import owrl

ROOT = Path(__file__).resolve().parents[2]
FLOW = ROOT / "examples" / "flows" / "add-oxford-shirts.json"



def test_flow_with_expectations_runs_to_success(tmp_path):
    out = owrl("run", "--flow", str(FLOW), "--json", "--out", "runs", "--trace", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["outcome"] == {"status": "success", "answer": "Added 2 blue Classic Oxford Shirts in M.", "failure": None}
    run = Path(tmp_path / result["run_dir"]) if not Path(result["run_dir"]).is_absolute() else Path(result["run_dir"])
    traj = load_trajectory(run)
    assert len(traj.steps) == result["steps"] == 5
    assert all(c.verdict.ok for s in traj.steps for c in s.calls if c.verdict)
    shots = sorted(p.name for p in (run / "screenshots").iterdir())
    assert shots == [f"{i:04d}.jpg" for i in range(5)]
    assert traj.steps[0].observation.screenshot_file == "screenshots/0000.jpg"
    assert traj.steps[0].observation.aria and "[ref=" in traj.steps[0].observation.aria
    assert json.loads((run / "result.json").read_text())["status"] == "success"
    assert (run / "trace.zip").stat().st_size > 1000


def test_failed_expectation_exits_1_with_skipped_calls(tmp_path):
    flow = load_flow(FLOW)
    turn = flow.turns[3]  # choose the variant, then add to cart
    turn.calls[0].expect = turn.calls[0].expect or type(turn.calls[-1].expect)()
    turn.calls[0].expect.text_visible = "This text is not on the page"
    bad = tmp_path / "bad.json"
    bad.write_text(flow.to_json())
    out = owrl("run", "--flow", str(bad), "--json", "--out", "runs", cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    result = json.loads(out.stdout)
    assert result["outcome"]["status"] == "fail" and result["outcome"]["failure"]["category"] == "policy"
    traj = load_trajectory(result["run_dir"])
    records = traj.steps[3].calls
    assert records[0].verdict is not None and not records[0].verdict.ok
    assert records[0].verdict.checks[0].key == "text_visible"
    assert [r.skipped for r in records] == [False, True, True, True]
    # the flow stopped: its last step holds the final page and the reason, and no call ran blind
    assert len(traj.steps) == 5 and traj.steps[4].calls == []
    assert "flow stopped: click: expectation failed: text_visible" in traj.steps[4].turn.end


@pytest.mark.slow
def test_replay_of_a_recorded_run(tmp_path):
    first = json.loads(owrl("run", "--flow", str(FLOW), "--json", "--out", "runs", cwd=tmp_path).stdout)
    out = owrl("run", "--replay", first["run_dir"], "--json", "--out", "runs", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    again = json.loads(out.stdout)
    assert again["outcome"]["status"] == "success" and again["steps"] == first["steps"]
    assert again["run_dir"] != first["run_dir"]


def test_live_view_shows_steps_and_outcome(tmp_path):
    out = owrl("run", "--flow", str(FLOW), "--out", "runs", cwd=tmp_path)
    assert out.returncode == 0
    text = out.stdout
    assert "step 1/30" in text and "expect ✓" in text and "success · answer: Added 2 blue" in text
    assert "run folder:" in text


def test_agent_api_sync(tmp_path):
    from owrl_sdk import Agent
    from owrl_sdk.config import Settings

    flow = load_flow(FLOW)
    with Agent(policy="scripted", flow=flow, settings=Settings(runs_dir=str(tmp_path))) as agent:
        traj = agent.run_sync(flow.task, flow.start_url)
    assert traj.outcome.status == "success"
    assert Path(traj.metadata["run_dir"]).parent == tmp_path


@pytest.mark.slow
async def test_healing_hands_over_when_the_flow_breaks(tmp_path, settings):
    from owrl_sdk.flows.flowplayer import HealingPolicy, next_flow_version
    from owrl_sdk import Agent
    from owrl_sdk.contract.policy import Policy
    from owrl_sdk.types import Turn

    flow = load_flow(FLOW)
    flow.turns[2].calls[0].arguments["selector"] = 'role=link[name="Oxford Shirt Deluxe"]'  # the site changed
    path = tmp_path / "flow.json"
    path.write_text(flow.to_json())
    rest = load_flow(FLOW).turns[2:]

    class Fixer(Policy):
        name = "fixer"

        async def act(self, context):
            done = len(context.history) - healing.healed_at
            planned = rest[done]
            return Turn(thought="repair: " + planned.thought, calls=[c.model_copy(deep=True) for c in planned.calls])

    healing = HealingPolicy(settings, flow=path, healer=Fixer(settings))
    async with Agent(healing, settings=settings.with_overrides(runs_dir=str(tmp_path / "runs"))) as agent:
        traj = await agent.run(flow.task, flow.start_url)
    assert traj.outcome.status == "success"
    assert healing.healed_at == 3 and traj.policy.name == "scripted+fixer"
    repaired = Flow.from_trajectory(traj)
    assert next_flow_version(path).name == "flow.v2.json"
    assert any(c.arguments.get("selector") == 'role=link[name="Classic Oxford Shirt"]'
               for t in repaired.turns for c in t.calls)
    # the broken call is not in the repaired flow, and the repaired flow plays through on its own
    assert not any(c.arguments.get("selector") == 'role=link[name="Oxford Shirt Deluxe"]'
                   for t in repaired.turns for c in t.calls)
    async with Agent("scripted", flow=repaired,
                     settings=settings.with_overrides(runs_dir=str(tmp_path / "replay"))) as agent:
        again = await agent.run(flow.task, flow.start_url)
    assert again.outcome.status == "success", again.outcome
