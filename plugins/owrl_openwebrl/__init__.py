"""OpenWebRL's model plugins: the ``openwebrl`` and ``openai`` policies, the ``openwebrl-judge`` judge.

Nothing here imports torch at import time; the backend loads it when a model is chosen.
"""

from __future__ import annotations

from owrl_sdk import hookimpl


@hookimpl
def register_policies(register):
    from .policy import OpenAIPolicy, OpenWebRLPolicy

    register(OpenWebRLPolicy)
    register(OpenAIPolicy)


@hookimpl
def register_judges(register):
    from .judge import OpenWebRLJudge

    register(OpenWebRLJudge)


@hookimpl
def register_commands(register):
    from .commands import model_command

    register(model_command)
