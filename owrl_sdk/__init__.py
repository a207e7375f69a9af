"""owrl: the OpenWebRL SDK.

``import owrl_sdk`` stays light (no torch): heavy pieces load inside the plugins that
need them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from owrl_sdk.version import __version__

# The library logs under "owrl.*" and leaves the output to the application: the CLI's -v/-q
# set it up; code that embeds owrl routes it as it likes (nothing is printed by default).
logging.getLogger("owrl").addHandler(logging.NullHandler())

from owrl_sdk.contract.plugins import hookimpl  # noqa: E402

if TYPE_CHECKING:  # for type checkers; at run time Agent loads on first use (below)
    from owrl_sdk.agent import Agent

__all__ = ["__version__", "hookimpl", "Agent"]


def __getattr__(name: str) -> Any:  # lazy: the agent pulls in the loop and the config
    if name == "Agent":
        from owrl_sdk.agent import Agent

        return Agent
    raise AttributeError(name)
