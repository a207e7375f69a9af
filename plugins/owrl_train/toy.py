"""A toy one-step environment: four buttons, one of them right.

In memory on purpose: it checks that the optimizer learns, in seconds on a CPU, apart
from browsers and sites (the learning test and bench/bench_train.py use it). The
browser path of RL runs on the demo shop.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from owrl_sdk.api import (
    Check,
    episode_limits,
    Expectation,
    Memory,
    Observation,
    run_episode,
    RunStore,
    Task,
    Tool,
    ToolCall,
    ToolResult,
    Trajectory,
    Verdict,
)

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


class InMemoryRollouts:
    """Runs the real episode loop, policy, memory and judge on ButtonsEnv."""

    #: The tools its episodes offer (RLRun renders the training prompts with them).
    tools = TOOLS

    def __init__(self, plugins: Plugins, settings: Settings) -> None:
        self.plugins = plugins
        self.settings = settings

    async def collect(self, policy: Policy, items: list[tuple[str, Task, int]], max_steps: int,
                      out: Path) -> list[Trajectory]:
        store = RunStore(out)
        judge = self.plugins.catalogue.get("judges", "benchmark")(self.settings)  # the answer match, from the catalogue

        async def one(group: str, task: Task, n: int) -> Trajectory:
            run = store.new_run(f"{task.id}-{n}")
            memory: Memory = self.plugins.catalogue.get("memories", "default")(self.settings)
            traj = await run_episode(task.model_copy(deep=True), ButtonsEnv(), policy, self.settings, self.plugins,
                                     memory=memory, tools=TOOLS, extra_hooks=[run],
                                     limits=episode_limits(self.settings, max_steps=max_steps))
            traj.judgements.append(await judge.judge(traj))
            traj.metadata.update(group=group, run_dir=str(run.path))
            run.save(traj)
            return traj

        # concurrently, so the policy's batcher generates for the whole group at once
        return list(await asyncio.gather(*(one(g, t, n) for g, t, n in items)))
