"""The rewards of owrl_train: ``judged`` and ``expectations`` on trajectories built by hand."""

from __future__ import annotations

import pytest

from owrl_sdk.config import ConfigError, Settings
from owrl_sdk.types import (CallRecord, Judgement, Observation, Outcome, PolicyInfo, Step, Task, ToolCall,
                            ToolResult, Trajectory, Turn, Verdict)
from owrl_train.rewards import ExpectationReward, JudgedReward, expectations_met


def call(verdict: bool | None, skipped: bool = False) -> CallRecord:
    expect = {"text_visible": "Done"} if verdict is not None else None
    return CallRecord(call=ToolCall(name="click", arguments={"ref": "e1"}, expect=expect),
                      result=None if skipped else ToolResult(),
                      verdict=Verdict(ok=verdict) if verdict is not None else None, skipped=skipped)


def trajectory(calls: list[CallRecord], success: bool | None = False, score: float = 0.0,
               status: str = "fail") -> Trajectory:
    steps = [Step(index=0, observation=Observation(), turn=Turn(calls=[c.call for c in calls]), calls=calls)]
    return Trajectory(task=Task(intent="Click Done.", start_url="about:blank"), policy=PolicyInfo(name="p"),
                      steps=steps, outcome=Outcome(status=status),
                      judgements=[Judgement(judge="j", success=success, score=score)])


def test_the_expectations_score_is_held_less_failed_over_the_calls_that_stated_one():
    # held twice, failed once; a call without one and a skipped one (never ran) do not count
    t = trajectory([call(True), call(True), call(False), call(None), call(True, skipped=True)])
    assert expectations_met(t) == pytest.approx((2 - 1) / 3)
    assert expectations_met(trajectory([call(False), call(None)])) == -1.0
    assert expectations_met(trajectory([call(True)])) == 1.0
    assert expectations_met(trajectory([])) == 0.0
    assert expectations_met(trajectory([call(None), call(None)])) == 0.0


def test_the_expectation_reward_adds_its_weight_times_that_share(tmp_path):
    settings = Settings(runs_dir=str(tmp_path))
    reward = ExpectationReward(settings)
    assert reward.conf.weight == 0.5
    two_of_four = [call(True), call(True), call(False), call(None)]  # score (2 - 1) / 3
    assert reward.reward(trajectory(two_of_four, score=-1.0)) == pytest.approx(-1.0 + 0.5 / 3)
    assert reward.reward(trajectory(two_of_four, success=True, score=1.0)) == pytest.approx(1.0 + 0.5 / 3)
    # what judged leaves untrained stays untrained, whatever the expectations did
    assert reward.reward(trajectory([call(True)], status="infra_error")) is None
    assert reward.reward(trajectory([call(True)], success=None)) is None
    assert JudgedReward(settings).reward(trajectory(two_of_four, score=-1.0)) == -1.0
    # the weight comes from [plugins.expectations]; a bad one is refused by name
    heavy = ExpectationReward(Settings(runs_dir=str(tmp_path), plugins={"expectations": {"weight": 1.5}}))
    assert heavy.reward(trajectory([call(True), call(False), call(False)], score=-1.0)) == pytest.approx(-1.5)
    with pytest.raises(ConfigError, match="weight"):
        ExpectationReward(Settings(runs_dir=str(tmp_path), plugins={"expectations": {"weight": -1}}))


def test_it_is_a_registered_reward(plugins):
    assert plugins.catalogue.get("rewards", "expectations") is ExpectationReward
