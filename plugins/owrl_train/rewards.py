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
    """The share of the calls that ran whose stated expectation held (0 when none ran). A
    call without an expectation earns nothing: the credit is for saying what a call will do
    and being right."""
    ran = [c for s in trajectory.steps for c in s.calls if not c.skipped and c.result is not None]
    if not ran:
        return 0.0
    return sum(1 for c in ran if c.verdict is not None and c.verdict.ok) / len(ran)


class ExpectationOptions(BaseModel):
    """``[plugins.expectations]``: how much the expectations that held are worth."""

    model_config = ConfigDict(extra="forbid")

    weight: float = Field(0.5, ge=0, description="times the share of calls whose expectation held, added to the "
                          "judged reward; keep it below the gap between a failure's reward and a success's, so "
                          "that a failed episode never outscores a solved one")


class ExpectationReward(JudgedReward):
    """The judged reward plus ``weight`` times the share of calls whose expectation held: a
    dense signal where every episode of a group fails alike, which gives GRPO nothing to
    learn from (see :func:`expectations_met`). None where ``judged`` gives None."""

    name = "expectations"
    Options = ExpectationOptions

    def __init__(self, settings: Any, **options: Any):
        super().__init__(settings, **options)
        self.conf: ExpectationOptions = settings.options(self.name, ExpectationOptions, **options)

    def reward(self, trajectory: Trajectory) -> Optional[float]:
        value = super().reward(trajectory)
        if value is None:
            return None
        return value + self.conf.weight * expectations_met(trajectory)
