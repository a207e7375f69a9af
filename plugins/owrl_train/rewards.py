"""Rewards: a judged trajectory becomes one scalar, or None when it must not train."""

from __future__ import annotations

from typing import Optional

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
