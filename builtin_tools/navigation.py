"""The navigation tools: goto_url (held to the domain policy) and go_back."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from owrl_sdk.api import ActionError, BrowserEnv, ToolResult

from .base import BrowserTool, _Args

class GotoUrlArgs(_Args):
    url: str = Field(description="the address to open, e.g. https://example.com/")
    as_given: bool = Field(False, description="open the address as written: an address without a scheme is not "
                           "completed with https:// (the browser refuses it)")

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        v = v.strip()
        if not v:
            raise ValueError("give an address, e.g. https://example.com/")
        if v.lower().startswith("javascript:"):
            raise ValueError("javascript: addresses are not allowed")
        return v

    @model_validator(mode="after")
    def _scheme(self) -> "GotoUrlArgs":
        if not self.as_given and "://" not in self.url and not self.url.startswith(("about:", "data:", "file:")):
            self.url = "https://" + self.url
        return self


class GotoUrl(BrowserTool):
    name = "goto_url"
    description = "Open an address in the current tab."
    Args = GotoUrlArgs

    async def act(self, env: BrowserEnv, args: GotoUrlArgs) -> ToolResult:
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


class GoBackArgs(_Args):
    no_history: Literal["fail", "ignore"] = Field("fail", description="with no earlier page: fail the call, or "
                                                  "succeed having done nothing")


class GoBack(BrowserTool):
    name = "go_back"
    description = "Go back to the previous page in this tab."
    Args = GoBackArgs

    async def act(self, env: BrowserEnv, args: GoBackArgs) -> ToolResult:
        page = env.page
        previous = page.url
        response = await page.go_back(wait_until="load")
        nothing = "there is no earlier page in this tab's history"
        if response is None and page.url == previous:
            if args.no_history == "ignore":
                return ToolResult(feedback=f"{nothing}: nothing happened")
            raise ActionError(nothing, kind="action.no_history")
        if page.url == "about:blank" and previous != "about:blank":
            # the blank page every tab starts on is not a page to go back to
            await page.go_forward(wait_until="load")
            if args.no_history == "ignore":
                return ToolResult(feedback=f"{nothing}: nothing happened")
            raise ActionError(nothing, kind="action.no_history")
        return ToolResult()
