"""Tools that control the episode rather than the page."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, ConfigDict, Field

from owrl_sdk.tools import Tool
from owrl_sdk.types import ToolResult


class DoneArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    response: str = Field(
        "", description="the answer to the task, or a short report of what was done"
    )


class Done(Tool):
    name = "done"
    description = "Finish the task. Give the answer (or a short report) in response."
    Args = DoneArgs

    async def run(self, env, args: DoneArgs) -> ToolResult:
        return ToolResult(feedback="task finished", answer=args.response, ends_episode=True)


class WaitArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    seconds: float = Field(1.0, ge=0, le=30, description="how long to wait, at most 30 seconds")


class Wait(Tool):
    name = "wait"
    description = "Wait for the page to change, e.g. while results load."
    Args = WaitArgs

    async def run(self, env, args: WaitArgs) -> ToolResult:
        await asyncio.sleep(args.seconds)
        return ToolResult(feedback=f"waited {args.seconds:g} s")
