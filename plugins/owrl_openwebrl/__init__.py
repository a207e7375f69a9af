"""OpenWebRL's model plugins: the ``openwebrl``, ``owrl-text`` and ``openai`` policies, the
``openwebrl-judge`` judge, ``owrl model`` (tiny checkpoints, ``fetch`` of real small weights).

Nothing here imports torch at import time; the backend loads it when a model is chosen.
"""

from __future__ import annotations

from owrl_sdk import hookimpl
from owrl_sdk.api import Register


@hookimpl
def register_policies(register: Register) -> None:
    from .policy import OpenAIPolicy, OpenWebRLPolicy, TextPolicy

    register(OpenWebRLPolicy)
    register(TextPolicy)
    register(OpenAIPolicy)


@hookimpl
def register_judges(register: Register) -> None:
    from .judge import OpenWebRLJudge

    register(OpenWebRLJudge)


@hookimpl
def register_commands(register: Register) -> None:
    from .commands import model_command

    register(model_command)
