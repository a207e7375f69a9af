"""Builtin judges, registered as a default plugin."""

from __future__ import annotations

from owrl_sdk import hookimpl
from owrl_sdk.api import Register

from .outcome import OutcomeJudge
from .rules import BenchmarkJudge, CompositeJudge, RuleJudge


@hookimpl
def register_judges(register: Register) -> None:
    for judge in (OutcomeJudge, RuleJudge, BenchmarkJudge, CompositeJudge):
        register(judge)
