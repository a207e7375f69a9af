"""The tab tools: new_tab, switch_tab, close_tab (the environment reports the tab that becomes active)."""

from __future__ import annotations

from typing import Optional

from pydantic import Field, field_validator

from owrl_sdk.api import BrowserEnv, ToolResult

from .base import BrowserTool, _Args
from .navigation import GotoUrlArgs

class NewTabArgs(_Args):
    url: Optional[str] = Field(None, description="address to open in the new tab (default: a blank page)")

    @field_validator("url")
    @classmethod
    def _url(cls, v: Optional[str]) -> Optional[str]:
        return GotoUrlArgs._url(v) if v is not None and v.strip() else None


class NewTab(BrowserTool):
    name = "new_tab"
    description = "Open a new tab (optionally at url); it becomes the active tab."
    Args = NewTabArgs

    async def act(self, env: BrowserEnv, args: NewTabArgs) -> ToolResult:
        await env.open_tab(args.url)
        return ToolResult()


class SwitchTabArgs(_Args):
    tab_index: int = Field(ge=0, description="the tab's index, 0 for the first (see the list of tabs)")


class SwitchTab(BrowserTool):
    name = "switch_tab"
    description = "Make another tab the active one."
    Args = SwitchTabArgs

    async def act(self, env: BrowserEnv, args: SwitchTabArgs) -> ToolResult:
        await env.switch_tab(args.tab_index)
        return ToolResult()  # the environment reports the tab that became active


class CloseTabArgs(_Args):
    tab_index: Optional[int] = Field(None, ge=0, description="the tab to close (default: the active one)")


class CloseTab(BrowserTool):
    name = "close_tab"
    description = "Close the active tab (or the tab given by tab_index)."
    Args = CloseTabArgs

    async def act(self, env: BrowserEnv, args: CloseTabArgs) -> ToolResult:
        closed = args.tab_index if args.tab_index is not None else env.pages.index(env.page)
        await env.close_tab(args.tab_index)
        return ToolResult(data={"closed": closed})
