"""owrl: the OpenWebRL SDK.

``import owrl_sdk`` stays light (no torch): heavy pieces load inside the plugins that
need them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

from .plugins import hookimpl  # noqa: E402

if TYPE_CHECKING:  # for type checkers; at run time Agent loads on first use (below)
    from .agent import Agent

__all__ = ["__version__", "hookimpl", "Agent"]


def __getattr__(name: str) -> Any:  # lazy: the agent pulls in the loop and the config
    if name == "Agent":
        from .agent import Agent

        return Agent
    raise AttributeError(name)
