"""A toy one-step environment: four buttons, one of them right.

In memory on purpose: it checks that the optimizer learns, in seconds on a CPU, apart
from browsers and sites (the learning test and bench/bench_train.py use it). The
browser path of RL runs on the demo shop.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from owrl_sdk.api import (
    Check,
    Expectation,
    InProcessExecutor,
    Observation,
    Task,
    TaskSuite,
    Tool,
    ToolCall,
    ToolResult,
    Trajectory,
    Verdict,
)

from .rollouts import ExecutorRollouts

if TYPE_CHECKING:  # pragma: no cover
    from owrl_sdk.api import Environment, Plugins, Policy, Settings

COLOURS = ("red", "green", "blue", "yellow")
TASK = Task(id="press", intent="Press the green button.", start_url="mem://buttons", answer="green", answer_match="exact")


class NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


def press_tool(colour: str, only_right_ends: bool = False) -> Tool:
    """The tool pressing ``colour``: it ends the episode with that answer, or (with
    ``only_right_ends``) only the green one does, a wrong press leaving the episode to go on."""

    class Press(Tool):
        name = f"press_{colour}"
        description = f"press the {colour} button"
        Args = NoArgs

        async def run(self, env: Environment, args: NoArgs) -> ToolResult:
            if only_right_ends and colour != "green":
                return ToolResult(feedback=f"pressed {colour}: nothing happened")
            return ToolResult(feedback=f"pressed {colour}", answer=colour, ends_episode=True)

    return Press()


TOOLS = [press_tool(c) for c in COLOURS]


class ButtonsEnv:
    def __init__(self) -> None:
        self.warnings: list[str] = []

    async def reset(self, task: Task) -> None:
        pass

    async def observe(self) -> Observation:
        return Observation(url="mem://buttons", title="Buttons", aria='- button "red"\n- button "green"\n- button "blue"\n- button "yellow"')

    async def execute(self, tool: Tool, args: NoArgs, call: ToolCall) -> ToolResult:
        return await tool.run(self, args)

    async def verify(self, expect: Expectation) -> Verdict:
        return Verdict(ok=True, checks=[Check(key="none", ok=True)])

    async def close(self) -> None:
        pass


class ButtonsHost:
    """The toy's "browser": every episode gets a new :class:`ButtonsEnv`."""

    async def ensure_running(self) -> None:
        return None

    async def new_env(self, run_dir: Any = None, **_: Any) -> ButtonsEnv:
        return ButtonsEnv()


class ButtonsSuite(TaskSuite):
    """The toy's one task; its episodes are judged by the answer alone (the ``benchmark`` judge)."""

    name = "buttons"
    description = "Press the green button (in memory)."

    def tasks(self) -> list[Task]:
        return [TASK]


class ButtonsExecutor(InProcessExecutor):
    """The local executor's scheduling and per-item body, on in-memory workers."""

    name = "buttons"

    def worker_hosts(self, n: int) -> list[Any]:
        return [ButtonsHost() for _ in range(n)]


class InMemoryRollouts(ExecutorRollouts):
    """Runs the real executor, episode loop, policy, memory and judge on ButtonsEnv: the same
    per-item body as the browser rollouts (the local executor's), on a worker per
    episode, so that the policy's batcher generates for the whole group at once."""

    #: The tools its episodes offer (RLRun renders the training prompts with them).
    tools = TOOLS

    def __init__(self, plugins: Plugins, settings: Settings) -> None:
        # the toy learns on the default memory whatever the settings name
        settings = settings.with_overrides(memory="default")
        super().__init__(ButtonsSuite(settings), settings, plugins, workers=1, judge="benchmark")
        self.executor_cls = ButtonsExecutor

    async def collect(self, policy: Policy, items: list[tuple[str, Task, int]], max_steps: int,
                      out: Path) -> list[Trajectory]:
        if self.executor is not None and len(items) > self.workers:  # more at once than the workers started
            await self.close()
        self.workers = max(self.workers, len(items))
        return await super().collect(policy, items, max_steps, out)
