"""Rewards: a judged trajectory becomes one scalar, or None when it must not train."""

from __future__ import annotations

import json
import re
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field

from owrl_sdk.api import Judgement, Reward, Trajectory


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


#: A block the official check reads: a JSON object (from ``{`` to the ``}`` the closing tag
#: follows) between the tags. Any other block (plain text, a list) is not looked at.
_FORMAT_BLOCK = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)
_END = "<|im_end|>"


def official_format_ok(text: Optional[str]) -> bool:
    """The official RL reward's format check of one answer (``browser_env`` mode, its
    ``ToolParser(parser_type="regex")``): the answer (an end-of-turn mark at its end aside)
    closes its reasoning (``</think>``) and holds at least one call: a block that is a JSON
    object with a ``name`` key (tool names are not checked). A block that is not JSON makes
    the whole answer fail; a block that is no object (plain text, a list) and an object
    without ``name`` are not calls, and do not fail it. An answer that is not a model's (a
    flow's) passes."""
    if text is None:
        return True
    body = text.strip()
    if body.endswith(_END):
        body = body[: -len(_END)].rstrip()
    if "</think>" not in body:
        return False
    calls = 0
    for block in _FORMAT_BLOCK.findall(body):
        try:
            data = json.loads(block)
        except json.JSONDecodeError:
            return False
        if isinstance(data, dict) and "name" in data:
            calls += 1
    return calls > 0


class OpenWebRLReward(Reward):
    """The reward the released OpenWebRL models were trained with, gated as the official one:

    - -1: the episode was aborted for unreadable answers in a row (``policy.unparseable``,
      the official ``format_error_failed``);
    - 0: the last answer fails the format check (:func:`official_format_ok`), or the episode
      did not end with ``done`` (the official judge scores only completed episodes);
    - else the judge's verdict: 1 if it said success, 0 otherwise, and 0 when it gave no
      label (an unreadable verdict).

    None only for infrastructure errors, which are never trained on. Unlike ``judged`` it
    trains on site problems and unlabelled verdicts as failures, as the official one does."""

    name = "openwebrl"

    def reward(self, trajectory: Trajectory) -> Optional[float]:
        outcome = trajectory.outcome
        if outcome is None or outcome.status == "infra_error":
            return None
        if outcome.failure is not None and outcome.failure.kind == "policy.unparseable":
            return -1.0
        last = trajectory.steps[-1].turn.raw if trajectory.steps else None
        if not trajectory.steps or not official_format_ok(last) or outcome.status != "success":
            return 0.0
        verdict = trajectory.judgements[-1] if trajectory.judgements else None
        return 1.0 if verdict is not None and verdict.success else 0.0


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
    if not trajectory.judgements:
        return trajectory
    last = trajectory.judgements[-1]
    inner = last.details.get("inner") if last.reason == "format failure" else None
    if not isinstance(inner, dict):
        return trajectory
    return trajectory.model_copy(update={"judgements": [*trajectory.judgements[:-1], Judgement(**inner)]})
