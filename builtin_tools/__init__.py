"""The builtin tool set, registered as a default plugin."""

from __future__ import annotations

from owrl_sdk import hookimpl

from .browser import BROWSER_TOOLS
from .control import Done, Wait

#: Tools that need no browser, then the browser tools of :mod:`builtin_tools.browser`.
TOOLS = (Done, Wait, *BROWSER_TOOLS)


@hookimpl
def register_tools(register):
    for tool_class in TOOLS:
        register(tool_class())
