"""Builtin judges, registered as a default plugin."""

from __future__ import annotations

from owrl_sdk import hookimpl

from .outcome import OutcomeJudge
from .rules import BenchmarkJudge, CompositeJudge, RuleJudge


@hookimpl
def register_judges(register):
    for judge in (OutcomeJudge, RuleJudge, BenchmarkJudge, CompositeJudge):
        register(judge)
