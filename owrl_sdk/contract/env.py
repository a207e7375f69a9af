"""What the loop needs from an environment: a small protocol.

The browser environment implements it on Playwright; tests implement it in memory.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from owrl_sdk.types import Expectation, Observation, Task, ToolCall, ToolResult, Verdict


@runtime_checkable
class Environment(Protocol):
    #: Notes for the trajectory (e.g. a site adapter that lowered a safety default).
    warnings: list[str]

    async def reset(self, task: Task) -> None:
        """Open a fresh session on the task's start page."""

    async def observe(self) -> Observation:
        """What the page looks like now."""

    async def execute(self, tool: Any, args: Any, call: ToolCall) -> ToolResult:
        """Run one validated tool call and describe what changed."""

    async def verify(self, expect: Expectation) -> Verdict:
        """Check an expectation against the page, polling for a bounded time."""

    async def close(self) -> None:
        """Release everything the environment holds."""


@runtime_checkable
class PageEnvironment(Protocol):
    """An environment with browser tabs, as code below the browser layer (the start-page
    check of :mod:`owrl_sdk.failures`) reads one without importing it: ``pages`` (its tabs,
    the active one in ``page``) and ``dialog`` (a JavaScript dialog held open, or None).
    :class:`owrl_sdk.browser.BrowserEnv` is one."""

    pages: list[Any]

    @property
    def dialog(self) -> Any: ...
