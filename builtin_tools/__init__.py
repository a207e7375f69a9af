"""The builtin tool set, registered as a default plugin."""

from __future__ import annotations

from owrl_sdk import hookimpl
from owrl_sdk.api import Register

from .browser import BROWSER_TOOLS
from .control import Done, Wait
from .extract import Extract

#: Tools that need no browser, then the browser tools of :mod:`builtin_tools.browser`, then
#: ``extract`` (last, so the tools before it keep their order).
TOOLS = (Done, Wait, *BROWSER_TOOLS, Extract)


@hookimpl
def register_tools(register: Register) -> None:
    for tool_class in TOOLS:
        register(tool_class())
