"""Rule and benchmark judges, and the composite that gates like OpenWebRL."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Optional

from pydantic import BaseModel, ConfigDict, Field

from owrl_sdk.api import ConfigError, Judge, Judgement, match_answer, Trajectory

if TYPE_CHECKING:  # pragma: no cover
    from owrl_sdk.api import Settings

#: Text that marks the site, not the policy, as the problem (a block page, a captcha, an error).
SITE_PROBLEMS = (
    ("captcha", re.compile(r"captcha|are you a robot|verify you are human|unusual traffic", re.I)),
    ("blocked", re.compile(r"access denied|forbidden|you have been blocked|request blocked", re.I)),
    ("error_page", re.compile(r"^(404|500|502|503)\b|not found|internal server error|bad gateway|service unavailable", re.I)),
)


def site_problem(trajectory: Trajectory) -> Optional[str]:
    """The kind of site problem the last page shows, judged from its title and first lines."""
    if not trajectory.steps:
        return None
    obs = trajectory.steps[-1].observation
    head = " ".join([obs.title, *(obs.aria or "").splitlines()[:6]])
    for kind, pattern in SITE_PROBLEMS:
        if pattern.search(obs.title) or (kind != "error_page" and pattern.search(head)):
            return kind
    return None


class RuleJudge(Judge):
    """Checks form, not substance: readable output, ``done`` called, an answer when one is due.

    ``details.format_ok`` is False when any turn was unreadable; a blocked, captcha or error
    page is reported in ``details.site_problem`` and gets no success label (it is not the
    policy's failure)."""

    name = "rule"

    async def judge(self, trajectory: Trajectory) -> Judgement:
        parse_errors = sum(1 for s in trajectory.steps if s.turn.parse_error)
        outcome = trajectory.outcome
        done = outcome is not None and outcome.status == "success"
        wants_answer = trajectory.task.answer is not None
        answered = bool(outcome and outcome.answer and outcome.answer.strip())
        problem = site_problem(trajectory)
        details: dict[str, Any] = {
            "format_ok": parse_errors == 0, "parse_errors": parse_errors, "done": done,
            "answer_present": answered, "site_problem": problem,
        }
        if problem:
            return Judgement(judge=self.name, score=0.0, success=None, reason=f"site problem: {problem}", details=details)
        ok = parse_errors == 0 and done and (answered or not wants_answer)
        reasons = [r for r, bad in (("unreadable turns", parse_errors), ("done not called", not done),
                                    ("no answer given", wants_answer and not answered)) if bad]
        return Judgement(judge=self.name, score=1.0 if ok else 0.0, success=ok,
                         reason="; ".join(reasons) or "well-formed episode", details=details)


class BenchmarkJudge(Judge):
    """The suite's own check (MiniWoB's reward, the demo shop's state) or the answer match."""

    name = "benchmark"

    async def judge(self, trajectory: Trajectory) -> Judgement:
        check = trajectory.metadata.get("suite_check")
        if check is not None:
            return Judgement(judge=self.name, score=float(check["score"]), success=bool(check["success"]),
                             reason=check.get("reason", ""), details=check.get("details", {}))
        task = trajectory.task
        if task.answer is not None:
            given = trajectory.outcome.answer if trajectory.outcome else None
            ok = match_answer(task.answer, given, task.answer_match)
            return Judgement(judge=self.name, score=float(ok), success=ok,
                             reason=f"answer {'matches' if ok else 'does not match'} ({task.answer_match})",
                             details={"expected": task.answer, "given": given})
        return Judgement(judge=self.name, score=0.0, success=None, reason="the task has no check and no answer")


class CompositeOptions(BaseModel):
    """``[plugins.composite]``: the composite judge's options."""

    model_config = ConfigDict(extra="forbid")

    inner: str = Field("benchmark", description="the judge that decides once the rule judge passed the format")
    penalty: float = Field(0.0, description="score of a format failure")
    judge_format_failures: bool = Field(True, description="on a format failure, still ask the inner judge and keep "
                                        "its verdict in details.inner (the score stays the penalty): a trainer that "
                                        "trains unreadable turns on their own reads the episode's outcome there; "
                                        "false saves the inner judge's call")


class CompositeJudge(Judge):
    """Gates like OpenWebRL: a format failure scores the penalty, otherwise the inner judge decides.

    Options (``[plugins.composite]``): ``inner`` (default ``benchmark``), ``penalty`` (default 0.0),
    ``judge_format_failures`` (default true: a format failure's judgement keeps the inner
    judge's verdict in ``details.inner``, which RL reads to train unreadable turns apart).
    """

    name = "composite"
    Options = CompositeOptions

    def __init__(self, settings: "Settings", inner: Optional[Judge] = None, catalogue: Any = None, **options: Any):
        super().__init__(settings, **options)
        conf: CompositeOptions = settings.options(self.name, CompositeOptions, **options)
        self.penalty = conf.penalty
        self.judge_format_failures = conf.judge_format_failures
        self.inner = inner or BenchmarkJudge(settings)
        if inner is None and conf.inner != "benchmark":  # another plugin's judge, from the catalogue handed over
            if catalogue is None:
                raise ConfigError(f"the composite judge's inner judge '{conf.inner}' is another plugin's: build "
                                  "the composite through the catalogue (catalogue.build('judges', 'composite', "
                                  "settings)) or pass inner=")
            self.inner = catalogue.build("judges", conf.inner, settings)
        self.rule = RuleJudge(settings)

    async def judge(self, trajectory: Trajectory) -> Judgement:
        rule = await self.rule.judge(trajectory)
        if rule.details.get("site_problem"):
            return rule.model_copy(update={"judge": self.name})
        if not rule.details["format_ok"]:
            details: dict[str, Any] = {"rule": rule.model_dump()}
            if self.judge_format_failures:
                details["inner"] = (await self.inner.judge(trajectory)).model_dump()
            return Judgement(judge=self.name, score=self.penalty, success=False, reason="format failure",
                             details=details)
        inner = await self.inner.judge(trajectory)
        return Judgement(judge=self.name, score=inner.score, success=inner.success, reason=inner.reason,
                         details={"rule": rule.model_dump(), "inner": inner.model_dump()})
