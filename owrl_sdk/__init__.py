"""owrl: the OpenWebRL SDK.

``import owrl_sdk`` stays light (no torch): heavy pieces load inside the plugins that
need them.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .plugins import hookimpl  # noqa: E402

__all__ = ["__version__", "hookimpl", "Agent"]


def __getattr__(name: str):  # lazy: the agent pulls in the loop and the config
    if name == "Agent":
        from .agent import Agent

        return Agent
    raise AttributeError(name)
