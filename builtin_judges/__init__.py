"""Builtin judges, registered as a default plugin."""

from __future__ import annotations

from owrl_sdk import hookimpl

from .outcome import OutcomeJudge


@hookimpl
def register_judges(register):
    register(OutcomeJudge)
