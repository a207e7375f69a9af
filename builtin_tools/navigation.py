"""The navigation tools: goto_url (held to the domain policy) and go_back."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from owrl_sdk.browser.env import BrowserEnv
from owrl_sdk.browser.errors import ActionError
from owrl_sdk.types import ToolResult

from .base import BrowserTool, _Args

class GotoUrlArgs(_Args):
    url: str = Field(description="the address to open, e.g. https://example.com/")

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        v = v.strip()
        if not v:
            raise ValueError("give an address, e.g. https://example.com/")
        if v.lower().startswith("javascript:"):
            raise ValueError("javascript: addresses are not allowed")
        if "://" not in v and not v.startswith(("about:", "data:", "file:")):
            v = "https://" + v
        return v


class GotoUrl(BrowserTool):
    name = "goto_url"
    description = "Open an address in the current tab."
    Args = GotoUrlArgs

    async def run(self, env: BrowserEnv, args: GotoUrlArgs) -> ToolResult:
        refused = env.domains.refusal(args.url)
        if refused:
            return ToolResult.failure(f"cannot open {args.url}: {refused}", kind="policy.blocked_domain")
        page = env.page
        previous = page.url
        try:
            await page.goto(args.url, wait_until="load")
        except Exception as err:
            if "Timeout" in str(err) and page.url != previous:
                return ToolResult(feedback="the page is still loading")
            raise
        return ToolResult()


class GoBack(BrowserTool):
    name = "go_back"
    description = "Go back to the previous page in this tab."

    async def run(self, env: BrowserEnv, args: Any) -> ToolResult:
        page = env.page
        previous = page.url
        response = await page.go_back(wait_until="load")
        if response is None and page.url == previous:
            raise ActionError("there is no earlier page in this tab's history", kind="action.no_history")
        if page.url == "about:blank" and previous != "about:blank":
            # the blank page every tab starts on is not a page to go back to
            await page.go_forward(wait_until="load")
            raise ActionError("there is no earlier page in this tab's history", kind="action.no_history")
        return ToolResult()
