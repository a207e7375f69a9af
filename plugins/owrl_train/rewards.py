"""Rewards: a judged trajectory becomes one scalar, or None when it must not train."""

from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field

from owrl_sdk.components import Reward
from owrl_sdk.types import Trajectory


class JudgedReward(Reward):
    """The last judgement's score, gated as the composite judge gates (its penalty for a
    format failure). None for infrastructure errors and site problems: the site's or the
    machine's faults never become zero-reward signal."""

    name = "judged"

    def reward(self, trajectory: Trajectory) -> Optional[float]:
        outcome = trajectory.outcome
        if outcome is None or outcome.status == "infra_error":
            return None
        if not trajectory.judgements:
            return None
        last = trajectory.judgements[-1]
        if last.success is None:  # site problem, or an unreadable judge verdict
            return None
        return float(last.score)


def expectations_met(trajectory: Trajectory) -> float:
    """Of the calls that ran and stated an expectation, the share that held less the share
    that did not: from -1 (every one wrong) to 1 (every one right); 0 when no call stated
    one. How many calls an episode made, and how many stated nothing, does not weigh: the
    credit is for saying what a call will do and being right."""
    checked = [c.verdict for s in trajectory.steps for c in s.calls
               if not c.skipped and c.result is not None and c.verdict is not None]
    if not checked:
        return 0.0
    return (sum(1 for v in checked if v.ok) - sum(1 for v in checked if not v.ok)) / len(checked)


def with_expectations(value: float, trajectory: Trajectory, weight: float) -> float:
    """``value`` (a reward) plus ``weight`` times :func:`expectations_met`."""
    return value + weight * expectations_met(trajectory) if weight else value


class ExpectationOptions(BaseModel):
    """``[plugins.expectations]``: how much the expectations that held are worth."""

    model_config = ConfigDict(extra="forbid")

    weight: float = Field(0.5, ge=0, description="times the expectations' score (held less failed, over the calls "
                          "that stated one: -1 to 1), added to the judged reward; keep it below half the gap "
                          "between a failure's reward and a success's, so that a failed episode never outscores "
                          "a solved one")


class ExpectationReward(JudgedReward):
    """The judged reward plus ``weight`` times the expectations' score (see
    :func:`expectations_met`): a dense signal where every episode of a group fails alike,
    which gives GRPO nothing to learn from. It favours episodes that state expectations
    that hold: where only some kinds of call come with one (writes, say), a failing
    episode that writes outscores one that only clicks. None where ``judged`` gives None."""

    name = "expectations"
    Options = ExpectationOptions

    def __init__(self, settings: Any, **options: Any):
        super().__init__(settings, **options)
        self.conf: ExpectationOptions = settings.options(self.name, ExpectationOptions, **options)

    def reward(self, trajectory: Trajectory) -> Optional[float]:
        value = super().reward(trajectory)
        if value is None:
            return None
        return with_expectations(value, trajectory, self.conf.weight)


def ungated(trajectory: Trajectory) -> Trajectory:
    """``trajectory`` as its task's own verdict sees it: when the last judgement is a format
    failure (the composite judge's penalty for an unreadable turn) that kept the inner
    judge's verdict (``details.inner``), a copy whose last judgement is that verdict;
    otherwise ``trajectory`` itself. RL trains unreadable turns apart, with an advantage of
    their own, so that one unreadable turn does not make a later success a failure."""
    from owrl_sdk.types import Judgement

    if not trajectory.judgements:
        return trajectory
    last = trajectory.judgements[-1]
    inner = last.details.get("inner") if last.reason == "format failure" else None
    if not isinstance(inner, dict):
        return trajectory
    return trajectory.model_copy(update={"judgements": [*trajectory.judgements[:-1], Judgement(**inner)]})
