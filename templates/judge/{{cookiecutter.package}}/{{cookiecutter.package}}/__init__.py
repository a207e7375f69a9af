"""{{ cookiecutter.description }}.

A judge scores a finished trajectory. It is registered as a class; owrl constructs it
with the run's :class:`~owrl_sdk.config.Settings` when a user picks it by name
(``owrl judge RUN --judge {{ cookiecutter.name }}``, ``owrl eval --judge {{ cookiecutter.name }}``) and awaits
``judge(trajectory)``, which returns a :class:`~owrl_sdk.types.Judgement`:

- ``score`` (a float, the reward a trainer may use), ``success`` (True, False, or None when
  the trajectory cannot be labelled, e.g. the task gives nothing to check), ``reason``
  (one line for people) and ``details`` (anything, kept in the trajectory).

This judge reads what to expect from the task's metadata (a task file's ``metadata``):

- ``answer_pattern``: a regular expression the final answer must contain a match of;
- ``answer_keywords``: words or phrases the answer must all contain.

Its options come from ``[plugins.{{ cookiecutter.name }}]`` in owrl.toml:
``case_sensitive`` (default false).
"""

from __future__ import annotations

import re
from typing import Any

from owrl_sdk import hookimpl
from owrl_sdk.api import Judge, Judgement, Trajectory


class AnswerJudge(Judge):
    """Scores the share of the expectations the final answer meets; success when it meets all."""

    name = "{{ cookiecutter.name }}"

    def __init__(self, settings, **options: Any):
        super().__init__(settings, **options)
        conf = {**settings.plugin(self.name), **options}
        self.case_sensitive = bool(conf.get("case_sensitive", False))

    async def judge(self, trajectory: Trajectory) -> Judgement:
        meta = trajectory.task.metadata
        pattern = meta.get("answer_pattern")
        keywords = [str(k) for k in meta.get("answer_keywords", [])]
        if pattern is None and not keywords:
            return Judgement(judge=self.name, score=0.0, success=None,
                             reason="the task has no answer_pattern or answer_keywords")
        outcome = trajectory.outcome
        answer = (outcome.answer or "") if outcome is not None else ""
        if outcome is None or outcome.status != "success" or not answer.strip():
            status = outcome.status if outcome is not None else "unfinished"
            return Judgement(judge=self.name, score=0.0, success=False,
                             reason=f"no final answer (episode {status})", details={"answer": answer})

        flags = 0 if self.case_sensitive else re.IGNORECASE
        checks: dict[str, bool] = {}
        if pattern is not None:
            try:
                checks[f"pattern {pattern}"] = re.search(pattern, answer, flags) is not None
            except re.error as err:
                return Judgement(judge=self.name, score=0.0, success=None,
                                 reason=f"the task's answer_pattern is not a valid regular expression: {err}")
        fold = (lambda s: s) if self.case_sensitive else str.casefold
        for word in keywords:
            checks[f"keyword {word}"] = fold(word) in fold(answer)

        met = [k for k, ok in checks.items() if ok]
        missed = [k for k, ok in checks.items() if not ok]
        score = len(met) / len(checks)
        reason = "the answer meets every expectation" if not missed else "missing: " + ", ".join(missed)
        return Judgement(judge=self.name, score=score, success=not missed, reason=reason,
                         details={"answer": answer, "checks": checks})


@hookimpl
def register_judges(register):
    """Called once when owrl loads its plugins: register the class; owrl constructs it when chosen."""
    register(AnswerJudge)
