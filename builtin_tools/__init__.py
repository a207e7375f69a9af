"""The builtin tool set, registered as a default plugin."""

from __future__ import annotations

from owrl_sdk import hookimpl

from .control import Done, Wait

#: Tools that need no browser; the browser tools join them in :mod:`builtin_tools.browser`.
TOOLS = (Done, Wait)


@hookimpl
def register_tools(register):
    for tool_class in TOOLS:
        register(tool_class())
