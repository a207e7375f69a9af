"""The ``weighted`` and ``summary`` memories: histories that fit a small context.

Both keep the last few steps whole and send the latest K screenshots as ``default`` does.

- ``weighted`` scores every older step (its outcome, its relevance to the task, its recency)
  and keeps the heaviest that fit a budget (steps or characters), in chronological order;
  ``Context.notes`` says how many steps were left out.
- ``summary`` compresses every older step to one line (the call, what it changed, whether
  it met its expectation) in ``Context.notes``.

``Context.extras["memory"]`` says what each kept (``kept``: step indices, ``left_out``,
``weights`` for ``weighted``; ``summarised`` for ``summary``).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from owrl_sdk.api import CallRecord, Context, Observation, Step, Task

from .history import FullHistoryMemory, MemoryOptions

_WORD = re.compile(r"[a-z0-9]+")
#: Words too common in tasks and feedback to say anything about relevance.
_STOPWORDS = frozenset(
    "the and for with that this from into onto then than your you are was were has have had not "
    "but all any can its it's our out page now who what when where which will would there their "
    "them they been being also only just each more most some such very a an of to in on at by "
    "is be as or if it".split())


class _SharedOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    screenshots: Optional[int] = Field(None, ge=0, description="as default's (unset: [plugins.default]'s)")
    reasoning: Optional[Literal["full", "action-only"]] = Field(
        None, description="as default's (unset: [plugins.default]'s)")
    keep_last: int = Field(3, ge=1, description="the latest steps always kept whole")


class WeightedOptions(_SharedOptions):
    """``[plugins.weighted]``: the ``weighted`` memory's options."""

    budget: int = Field(12, ge=1, description="how much history is kept: steps, or characters (budget_unit)")
    budget_unit: Literal["steps", "chars"] = Field(
        "steps", description="steps counts kept steps; chars counts each step's text (thought, calls, feedback)")
    failed: float = Field(3.0, ge=0, description="weight of a step with a failed expectation or a call error")
    met: float = Field(2.0, ge=0, description="weight of a step whose expectations were all met")
    changed: float = Field(1.0, ge=0, description="weight of a step that changed the page (no expectation)")
    unchanged: float = Field(0.0, ge=0, description="weight of a step that changed nothing")
    relevance: float = Field(6.0, ge=0, description="times the share of the task's words in the step's calls and feedback")
    recency: float = Field(1.0, ge=0, description="times 0.5 ** (age / half_life)")
    half_life: float = Field(5.0, gt=0, description="steps after which the recency term halves")


class SummaryOptions(_SharedOptions):
    """``[plugins.summary]``: the ``summary`` memory's options."""

    line_chars: int = Field(200, ge=40, description="longest line of an older step")
    max_lines: int = Field(60, ge=1, description="most lines of older steps; the oldest beyond are counted, not shown")


# ---------------------------------------------------------------------------- reading a step


def words(text: str) -> set[str]:
    """The lower-case words of ``text`` that can carry meaning (three letters or more, no stopwords)."""
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in _STOPWORDS}


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def call_outcome(record: CallRecord) -> str:
    """What one call did, in a few words: whether its expectation held (first: it is short and
    decides), then its error, ``no visible change`` or the first line of what changed."""
    if record.skipped:
        return f"not run ({record.skip_reason or 'skipped'})"
    result = record.result
    if result is None:
        return "no result"
    if not result.ok:
        kind = f" [{result.error_kind}]" if result.error_kind else ""
        text = f"error{kind}: {result.error or ''}"
    elif result.changed is False:
        text = "no visible change"
    else:
        text = result.feedback.splitlines()[0] if result.feedback.strip() else "ok"
    if record.verdict is not None:
        text = record.verdict.describe() + "; " + text
    return text


def step_line(step: Step, limit: int = 200) -> str:
    """One line for a step (``summary``'s): each call and its outcome, cut at ``limit``
    characters; with several calls, each call's arguments are cut first (to ``limit`` / 4),
    so that what the calls did stays."""
    head = f"step {step.index}: "
    if step.turn.parse_error:
        return _clip(f"{head}the answer could not be read ({step.turn.parse_error})", limit)
    if not step.calls:
        return _clip(f"{head}no call", limit)
    arguments = limit if len(step.calls) == 1 else max(limit // 4, 24)
    parts = [f"{_clip(r.call.describe(), arguments)} -> {call_outcome(r)}" for r in step.calls]
    return _clip(head + " | ".join(parts), limit)


def step_text(step: Step) -> str:
    """The text a step adds to a prompt: thought, calls, every call's feedback and verdict."""
    lines = [step.turn.thought] if step.turn.thought else []
    if step.turn.parse_error:
        lines.append(step.turn.parse_error)
    for record in step.calls:
        lines.append(record.call.describe())
        if record.call.expect is not None:
            lines.append(json.dumps(record.call.expect.model_dump(exclude_none=True), ensure_ascii=False))
        result = record.result
        if result is not None:
            lines.append(result.feedback if result.ok else (result.error or ""))
        if record.verdict is not None:
            lines.append(record.verdict.describe())
    return "\n".join(lines)


def outcome_kind(step: Step) -> str:
    """``failed`` (a failed expectation, a call error, an unreadable answer), ``met`` (every
    expectation met), ``changed`` (the page changed) or ``unchanged``."""
    if step.turn.parse_error:
        return "failed"
    ran = [r for r in step.calls if not r.skipped and r.result is not None]
    if any(not r.result.ok for r in ran if r.result is not None) or any(
            r.verdict is not None and not r.verdict.ok for r in ran):
        return "failed"
    if any(r.verdict is not None for r in ran):
        return "met"
    if any(r.result is not None and r.result.changed is not False for r in ran):
        return "changed"
    return "unchanged"


def relevance(task_words: set[str], step: Step) -> float:
    """The share of the task's words found in the step's calls and feedback (0 to 1)."""
    if not task_words:
        return 0.0
    return len(task_words & words(step_text(step))) / len(task_words)


# ---------------------------------------------------------------------------- the strategies


class _RecentMemory(FullHistoryMemory):
    """``default``'s screenshots and reasoning; the last ``keep_last`` steps kept whole."""

    reads_changes = True  # it weighs and summarises steps by what each call changed

    own: _SharedOptions

    def read_options(self, settings: Any, options: dict[str, Any]) -> MemoryOptions:
        self.own = settings.options(self.name, self.Options, **options)
        self.keep_last: int = self.own.keep_last
        shared = {k: v for k, v in self.own.model_dump(include={"screenshots", "reasoning"}).items() if v is not None}
        conf: MemoryOptions = settings.options(FullHistoryMemory.name, MemoryOptions, **shared)
        return conf

    def _with(self, ctx: Context, kept: list[Step]) -> Context:
        """``ctx`` (default's full context) with only ``kept`` of its history, reasoning applied."""
        wanted = {s.index for s in kept}
        ctx.history = [s for s in ctx.history if s.index in wanted]
        return ctx


class WeightedMemory(_RecentMemory):
    """The heaviest past steps within a budget, always with the last few, in order."""

    name = "weighted"
    Options = WeightedOptions
    own: WeightedOptions

    def __init__(self, settings: Any, **options: Any):
        super().__init__(settings, **options)
        self.task_words: set[str] = set()

    def reset(self, task: Task) -> None:
        super().reset(task)
        self.task_words = words(task.intent)

    def weight(self, step: Step, newest: int) -> float:
        """The step's weight: outcome + relevance to the task + recency (``newest``: the latest index)."""
        o = self.own
        outcome = {"failed": o.failed, "met": o.met, "changed": o.changed, "unchanged": o.unchanged}[outcome_kind(step)]
        age = max(newest - step.index, 0)
        return outcome + o.relevance * relevance(self.task_words, step) + o.recency * math.pow(0.5, age / o.half_life)

    def _cost(self, step: Step) -> int:
        return 1 if self.own.budget_unit == "steps" else len(step_text(step))

    def select(self, steps: list[Step]) -> tuple[list[Step], dict[int, float]]:
        """The steps kept (chronological) and every older step's weight."""
        last = steps[-self.keep_last:]
        older = steps[: -self.keep_last] if len(steps) > self.keep_last else []
        left = self.own.budget - sum(self._cost(s) for s in last)
        newest = steps[-1].index if steps else 0
        weights = {s.index: self.weight(s, newest) for s in older}
        chosen: set[int] = set()
        # heaviest first; of equal weight, the newer
        for step in sorted(older, key=lambda s: (-weights[s.index], -s.index)):
            cost = self._cost(step)
            if cost <= left:
                chosen.add(step.index)
                left -= cost
        kept = [s for s in older if s.index in chosen] + last
        return kept, weights

    def context(self, task: Task, observation: Observation, tools: Any) -> Context:
        ctx = super().context(task, observation, tools)
        if not self.task_words:
            self.task_words = words(task.intent)
        kept, weights = self.select(self.steps)
        left_out = [s.index for s in self.steps if s.index not in {k.index for k in kept}]
        self._with(ctx, kept)
        if left_out:
            ctx.notes = (f"{len(left_out)} of the {len(self.steps)} earlier steps are left out "
                         f"(steps {_ranges(left_out)}); the steps shown are the most useful and the latest.")
        ctx.extras["memory"] = {"strategy": self.name, "kept": [s.index for s in kept],
                                "left_out": len(left_out), "weights": {str(k): round(v, 3) for k, v in weights.items()}}
        return ctx


class SummaryMemory(_RecentMemory):
    """Older steps as one line each; the last few whole."""

    name = "summary"
    Options = SummaryOptions
    own: SummaryOptions

    def context(self, task: Task, observation: Observation, tools: Any) -> Context:
        ctx = super().context(task, observation, tools)
        last = self.steps[-self.keep_last:]
        older = self.steps[: -self.keep_last] if len(self.steps) > self.keep_last else []
        self._with(ctx, last)
        if older:
            shown = older[-self.own.max_lines:]
            lines = [step_line(s, self.own.line_chars) for s in shown]
            hidden = len(older) - len(shown)
            head = f"Earlier steps, one line each ({hidden} older steps not shown):" if hidden else \
                "Earlier steps, one line each:"
            ctx.notes = "\n".join([head, *lines])
        ctx.extras["memory"] = {"strategy": self.name, "kept": [s.index for s in last],
                                "summarised": [s.index for s in older]}
        return ctx


def _ranges(indices: list[int]) -> str:
    """``[1, 2, 3, 7]`` -> ``1-3, 7``."""
    out: list[str] = []
    start = prev = indices[0]
    for i in indices[1:] + [None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    return ", ".join(out)
