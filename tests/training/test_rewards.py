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


def openwebrl_case(raw: str | None, status: str = "success", success: bool | None = True,
                   failure: str | None = None) -> Trajectory:
    from owrl_sdk.types import Failure

    category, _, code = (failure or "").partition(".")
    steps = [Step(index=0, observation=Observation(), turn=Turn(raw=raw))]
    return Trajectory(task=Task(intent="Find it.", start_url="about:blank"), policy=PolicyInfo(name="p"),
                      steps=steps, outcome=Outcome(status=status, failure=Failure(category=category, code=code)
                                                   if failure else None),
                      judgements=[Judgement(judge="j", success=success, score=1.0 if success else 0.0)])


def test_the_openwebrl_reward_gates_as_the_official_one(tmp_path):
    """-1 for a format abort, 0 for a last answer without </think> or a readable call (or an
    episode that did not end with done), else the judge's 1 or 0, no label counting 0."""
    from owrl_train.rewards import OpenWebRLReward

    reward = OpenWebRLReward(Settings(runs_dir=str(tmp_path)))
    good = '<think>found it</think>\n<tool_call>\n{"name": "done", "arguments": {"response": "12"}}\n</tool_call>'
    assert reward.reward(openwebrl_case(good)) == 1.0
    assert reward.reward(openwebrl_case(good, success=False)) == 0.0
    assert reward.reward(openwebrl_case(good, success=None)) == 0.0  # no label: 0, trained on
    no_close = good.replace("</think>", "")
    assert reward.reward(openwebrl_case(no_close)) == 0.0  # the judge's success does not count
    bad_block = good + '\n<tool_call>\n{"name": "click", oops}\n</tool_call>'
    assert reward.reward(openwebrl_case(bad_block)) == 0.0
    assert reward.reward(openwebrl_case("<think>hmm</think> I am done.")) == 0.0
    assert reward.reward(openwebrl_case(good, status="fail", failure="task.max_steps")) == 0.0  # not completed
    aborted = openwebrl_case("no calls", status="aborted", success=False, failure="policy.unparseable")
    assert reward.reward(aborted) == -1.0
    # the official check reads only JSON-object blocks, and counts those with a name as calls
    assert reward.reward(openwebrl_case('<think>x</think><tool_call>{"arguments": {}}</tool_call>')) == 0.0
    assert reward.reward(openwebrl_case("<think>x</think><tool_call>{}</tool_call>")) == 0.0
    assert reward.reward(openwebrl_case(good + "\n<tool_call>then done</tool_call>")) == 1.0  # plain text: not read
    assert reward.reward(openwebrl_case(good + '\n<tool_call>["done"]</tool_call>')) == 1.0  # a list: not read
    assert reward.reward(openwebrl_case(good + "<|im_end|>\n")) == 1.0  # the end-of-turn mark aside
    assert reward.reward(openwebrl_case(good, status="infra_error", failure="infra.browser_crashed")) is None
    # the judged reward, for contrast, leaves an unlabelled verdict untrained
    assert JudgedReward(Settings(runs_dir=str(tmp_path))).reward(openwebrl_case(good, success=None)) is None
