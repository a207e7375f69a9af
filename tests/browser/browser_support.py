"""What the browser tests share besides fixtures: settings, running a call as the loop does, refs."""

from __future__ import annotations

import re
from typing import Any

from builtin_tools import TOOLS
from owrl_sdk.browser import BrowserEnv
from owrl_sdk.config import Settings
from owrl_sdk.contract.tools import ToolArgumentError
from owrl_sdk.types import Task, ToolCall, ToolResult


def quick_settings(**overrides: Any) -> Settings:
    """Short time-outs, so that tests of failures do not wait long."""
    values = dict(action_timeout=1.5, expect_timeout=1.5, navigation_timeout=10.0)
    values.update(overrides)
    return Settings(**values)


TOOL_BY_NAME = {cls.name: cls() for cls in TOOLS}


async def act(env: BrowserEnv, name: str, **arguments: Any) -> ToolResult:
    """Run one call the way the loop does: parse the arguments, then env.execute."""
    tool = TOOL_BY_NAME[name]
    try:
        args = tool.parse_args(arguments)
    except ToolArgumentError as err:
        return ToolResult.failure(str(err))
    return await env.execute(tool, args, ToolCall(name=name, arguments=arguments))


def task(url: str) -> Task:
    return Task(intent="test", start_url=url)


def ref_of(aria: str, role: str, name: str) -> str:
    """The ref of the first ``role "name"`` line in an aria snapshot."""
    found = re.search(rf'{re.escape(role)} "{re.escape(name)}"[^\n]*?\[ref=(\w+)\]', aria)
    assert found, f'no {role} "{name}" in the snapshot:\n{aria}'
    return found.group(1)


def grid(x_px: float, y_px: float, width: int = 1280, height: int = 1000) -> list[float]:
    """Viewport pixels as a point_2d on the 0-1000 grid."""
    return [x_px / width * 1000, y_px / height * 1000]
