"""Policies for testing the harness: ``oracle`` (the ceiling) and ``random`` (the floor).

``oracle`` plays a task's ``metadata.oracle_turns`` when it has them (the demo shop's
tasks do), and solves a few MiniWoB++ tasks from the utterance; ``random`` makes random
but valid calls. Neither looks at a model: they measure the harness, not a policy.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, Callable, Optional

from pydantic import BaseModel, ConfigDict, Field

from owrl_sdk import hookimpl
from owrl_sdk.api import Context, Policy, Register, ToolCall, Turn

if TYPE_CHECKING:  # pragma: no cover
    from owrl_sdk.api import Settings


class OraclePolicy(Policy):
    """Plays a task's scripted turns (``oracle_turns``) or, on MiniWoB++, the miniwob plugin's
    solution, found in the catalogue it is built with (``catalogue.build``)."""

    name = "oracle"

    def __init__(self, settings: "Settings", catalogue: Any = None, **options: Any):
        super().__init__(settings, **options)
        self.catalogue = catalogue

    async def act(self, context: Context) -> Turn:
        task = context.task
        last = context.last_step
        done_turns = last.index + 1 if last is not None else 0  # a memory may leave steps out
        if last is not None:
            for record in last.calls:
                failed = (record.verdict is not None and not record.verdict.ok) or (
                    record.result is not None and not record.result.ok)
                if failed:
                    return Turn(end=f"oracle step failed: {record.call.name}")
        turns = task.metadata.get("oracle_turns")
        if turns is None and task.metadata.get("miniwob"):
            if self.catalogue is None:
                return Turn(end="the oracle finds MiniWoB++ solutions in the plugin catalogue: build it with "
                                "catalogue.build('policies', 'oracle', settings)")
            turns = self._miniwob_turns(task)
        if turns is None:
            return Turn(end=f"the oracle has no solution for task {task.id}")
        if done_turns >= len(turns):
            return Turn(end="oracle ran out of turns")
        planned = turns[done_turns]
        return Turn(thought=planned.get("thought", ""), calls=[ToolCall.model_validate(c) for c in planned["calls"]])

    def _miniwob_turns(self, task: Any) -> Any:
        # the miniwob plugin's solutions, found through the catalogue (plugins do not import each other)
        calls = self.catalogue.get("task_suites", "miniwob").oracle_calls(task.metadata["miniwob"], task.intent)
        if calls is None:
            return None
        return [{"thought": "solve", "calls": calls}, {"thought": "finish", "calls": [{"name": "done", "arguments": {"response": ""}}]}]


class RandomOptions(BaseModel):
    """``[plugins.random]``: the random policy's options."""

    model_config = ConfigDict(extra="forbid")

    seed: int = Field(0, description="seed of its random choices")


class RandomPolicy(Policy):
    """Random valid calls: clicks anywhere, scrolls, typing, keys; done now and then."""

    name = "random"
    Options = RandomOptions

    def __init__(self, settings: "Settings", seed: Optional[int] = None, **options: Any):
        super().__init__(settings, **options)
        self.rng = random.Random(settings.options(self.name, RandomOptions, seed=seed).seed)

    async def act(self, context: Context) -> Turn:
        r = self.rng
        names = {t.name for t in context.tools}
        choices: list[tuple[str, Callable[[], dict[str, Any]]]] = [
            ("click", lambda: {"point_2d": [r.randint(0, 1000), r.randint(0, 1000)]}),
            ("scroll", lambda: {"direction": r.choice(["up", "down"]), "amount": r.randint(1, 5)}),
            ("write", lambda: {"message": r.choice(["hello", "shirt", "42", "test@example.com"])}),
            ("press_keys", lambda: {"keys": [r.choice(["Enter", "Tab", "Escape"])]}),
            ("done", lambda: {"response": r.choice(["", "yes", "no", "12"])}),
        ]
        weights = [6, 2, 2, 1, 1]
        avail = [(c, w) for c, w in zip(choices, weights) if c[0] in names]
        (name, make), = r.choices([c for c, _ in avail], weights=[w for _, w in avail])
        return Turn(thought="random", calls=[ToolCall(name=name, arguments=make())])


@hookimpl
def register_policies(register: Register) -> None:
    register(OraclePolicy)
    register(RandomPolicy)
