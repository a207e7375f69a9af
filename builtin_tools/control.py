"""Tools that control the episode rather than the page.

``done`` may hand back structured output (its ``output`` argument, a JSON object); when the
task or flow gives an ``output_schema``, :mod:`owrl_sdk.formats.outputs` checks it before ``done`` runs.
"""

from __future__ import annotations

import asyncio
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field

from owrl_sdk.api import Environment, Tool, ToolResult


class DoneArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    response: str = Field(
        "", description="the answer to the task, or a short report of what was done"
    )
    output: Optional[dict[str, Any]] = Field(
        None, description="structured output as a JSON object, when the task asks for it"
    )


class Done(Tool):
    name = "done"
    description = ("Finish the task. Give the answer (or a short report) in response, and structured "
                   "output in output when the task asks for it.")
    Args = DoneArgs

    async def run(self, env: Environment, args: DoneArgs) -> ToolResult:
        data = {"output": args.output} if args.output is not None else {}
        return ToolResult(feedback="task finished", answer=args.response, ends_episode=True, data=data)


class WaitArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    seconds: float = Field(1.0, ge=0, le=30, description="how long to wait, at most 30 seconds")


class Wait(Tool):
    name = "wait"
    description = "Wait for the page to change, e.g. while results load."
    Args = WaitArgs

    async def run(self, env: Environment, args: WaitArgs) -> ToolResult:
        await asyncio.sleep(args.seconds)
        return ToolResult(feedback=f"waited {args.seconds:g} s")
