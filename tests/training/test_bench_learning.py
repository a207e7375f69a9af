"""The pieces of bench/bench_learning.py that decide its figures: the demonstrating oracle
on real MiniWoB++ pages in Chromium, the paired test between stages, and the reward."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

pytest.importorskip("miniwob")

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import bench_learning  # noqa: E402
from miniwob_ref_oracle import RefOracle, nodes  # noqa: E402

FAMILIES = bench_learning.SFT_FAMILIES + bench_learning.HELDOUT_FAMILIES


def test_the_oracle_solves_every_family_and_grounds_each_call(tmp_path, plugins):
    from owrl_sdk.config import Settings
    from owrl_train.rl import BrowserRollouts

    settings = Settings(runs_dir=str(tmp_path / "runs"), plugins={"miniwob": {"time_limit": 120}})
    suite = plugins.catalogue.get("task_suites", "miniwob")(settings)
    tasks = {t.id: t for t in suite.tasks() if t.id in FAMILIES}
    assert sorted(tasks) == sorted(FAMILIES)
    rollouts = BrowserRollouts(suite, settings, plugins, workers=2)
    items = [(f"{f}#{s}", tasks[f], s) for f in FAMILIES for s in (3, 11)]

    async def go():
        try:
            return await rollouts.collect(RefOracle(settings), items, 1, tmp_path / "out")
        finally:
            await rollouts.close()

    done = asyncio.run(go())
    assert len(done) == len(items)
    for traj in done:
        assert traj.judgements and traj.judgements[-1].success, (traj.task.id, traj.outcome)
        assert traj.metadata["suite_check"]["details"]["done"]
        turn = traj.steps[0].turn
        lines = turn.thought.splitlines()
        assert len(lines) == len(turn.calls) >= 1
        by_ref = {n.ref: n for n in nodes(traj.steps[0].observation.aria)}
        for line, call in zip(lines, turn.calls):
            node = by_ref[call.arguments["ref"]]
            # the thought names the target as the tree does, ending with the ref the call uses
            assert line.startswith(node.role) and line.endswith(f"[ref={node.ref}]")
            assert f'"{node.name}"' in line if node.name else '"' not in line
    # the label in the utterance is what the thought names
    for traj in (t for t in done if t.task.id in ("click-button", "unicode-test")):
        label = traj.task.intent.split('"')[1]
        assert f'button "{label}"' in traj.steps[0].turn.thought


def test_mcnemar_counts_only_changed_pairs():
    before = {"a#0": False, "a#1": True, "b#0": False, "b#1": True, "c#0": True}
    after = {"a#0": True, "a#1": True, "b#0": True, "b#1": False, "x#9": True}
    m = bench_learning.mcnemar(before, after)
    assert (m["pairs"], m["gained"], m["lost"]) == (4, 2, 1)
    assert m["p_value"] == pytest.approx(1.0)  # 2 against 1 is no evidence
    strong = bench_learning.mcnemar({str(i): False for i in range(12)}, {str(i): True for i in range(12)})
    assert strong["gained"] == 12 and strong["p_value"] == pytest.approx(2 / 2 ** 12)
    assert bench_learning.mcnemar({}, {})["p_value"] == 1.0


def test_an_episode_unfinished_at_the_horizon_scores_as_a_time_out(settings):
    from owrl_sdk.types import Judgement, Outcome, PolicyInfo, Task, Trajectory

    reward = bench_learning.MiniWoBReward(settings)

    def traj(done: bool, success: bool, raw: float, status: str = "success") -> Trajectory:
        return Trajectory(task=Task(id="click-test", intent="Click the button.", start_url="about:blank"),
                          policy=PolicyInfo(name="owrl-text"),
                          outcome=Outcome(status=status),
                          judgements=[Judgement(judge="composite", success=success, score=raw)],
                          metadata={"suite_check": {"details": {"done": done, "raw_reward": raw}}})

    solved = reward.reward(traj(True, True, 0.8))
    assert solved is not None and solved > 0
    assert reward.reward(traj(True, False, -1.0)) == pytest.approx(-1.0)
    assert reward.reward(traj(False, False, 0.0)) == -1.0  # clicked something inert: a time-out in MiniWoB
    assert reward.reward(traj(True, True, 0.8, status="infra_error")) is None  # never trained on
