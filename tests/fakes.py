"""An in-memory environment for testing the loop without a browser.

A fake, on purpose: these tests pin down the loop's sequencing (done, max steps,
parse errors, expectations, infra errors), which must not depend on a browser. The
real browser environment has its own tests under tests/browser/.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict

from owrl_sdk.contract.memory import Context
from owrl_sdk.contract.policy import Policy
from owrl_sdk.contract.tools import Tool
from owrl_sdk.types import Check, Expectation, Observation, Task, ToolCall, ToolResult, Turn, Verdict


@dataclass
class FakePage:
    url: str
    title: str = ""
    text: set[str] = field(default_factory=set)


class FakeEnv:
    """Pages are a dict url -> FakePage; `fail_on` makes a stage raise."""

    def __init__(self, pages: dict[str, FakePage], fail_on: Optional[str] = None):
        self.pages = pages
        self.page: Optional[FakePage] = None
        self.fail_on = fail_on
        self.warnings: list[str] = []
        self.closed = False
        self.executed: list[str] = []

    async def reset(self, task: Task) -> None:
        if self.fail_on == "reset":
            raise ConnectionResetError("connection reset by peer")
        self.page = self.pages[task.start_url]

    async def observe(self) -> Observation:
        if self.fail_on == "observe":
            raise RuntimeError("Target page, context or browser has been closed")
        assert self.page is not None
        return Observation(url=self.page.url, title=self.page.title, aria="\n".join(sorted(self.page.text)), screenshot=b"\xff\xd8fake")

    async def execute(self, tool: Any, args: Any, call: ToolCall) -> ToolResult:
        self.executed.append(call.name)
        if self.fail_on == "tool":
            raise RuntimeError("browser has disconnected")
        return await tool.run(self, args)

    async def verify(self, expect: Expectation) -> Verdict:
        assert self.page is not None
        checks = []
        if expect.url_contains is not None:
            ok = expect.url_contains in self.page.url
            checks.append(Check(key="url_contains", ok=ok, detail=f"url is {self.page.url}"))
        if expect.url_matches is not None:
            ok = re.search(expect.url_matches, self.page.url) is not None
            checks.append(Check(key="url_matches", ok=ok, detail=f"url is {self.page.url}"))
        if expect.text_visible is not None:
            ok = expect.text_visible in self.page.text
            checks.append(Check(key="text_visible", ok=ok, detail=f"'{expect.text_visible}' not on the page"))
        return Verdict(ok=all(c.ok for c in checks), checks=checks)

    async def close(self) -> None:
        self.closed = True


class GoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    to: str


class Go(Tool):
    """Moves the fake env to another page (stands in for a click that navigates)."""

    name = "go"
    description = "go to a fake page"
    Args = GoArgs

    async def run(self, env: FakeEnv, args: GoArgs) -> ToolResult:
        if args.to not in env.pages:
            return ToolResult.failure(f"no page {args.to}")
        old = env.page.url if env.page else ""
        env.page = env.pages[args.to]
        return ToolResult(feedback=f"navigated {old} -> {args.to}")


class ListPolicy(Policy):
    """Answers with the turns it was given, in order, then repeats the last one."""

    name = "list"

    def __init__(self, settings, turns: list[Turn] = (), **options):
        super().__init__(settings, **options)
        self.turns = list(turns)
        self.contexts: list[Context] = []

    async def act(self, context: Context) -> Turn:
        self.contexts.append(context)
        index = min(len(self.contexts) - 1, len(self.turns) - 1)
        return self.turns[index].model_copy(deep=True)


def call(name: str, expect: Optional[dict] = None, **arguments: Any) -> ToolCall:
    return ToolCall(name=name, arguments=arguments, expect=Expectation(**expect) if expect else None)
