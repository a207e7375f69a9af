"""Memory strategies shipped with owrl, registered through the ``owrl`` entry point.

``default`` keeps the full text history of the episode (thoughts, calls, feedback and
verdicts) and the latest K screenshots (K = 1, as OpenWebRL was trained).

Settings (``[plugins.memory]`` in owrl.toml): ``screenshots`` (K), ``reasoning``
(``full`` keeps every thought, ``action-only`` drops past thoughts and keeps the calls).
"""

from __future__ import annotations

from owrl_sdk import hookimpl
from owrl_sdk.errors import ConfigError
from owrl_sdk.memory import Context, Memory
from owrl_sdk.types import Observation, Step, Task


class FullHistoryMemory(Memory):
    name = "default"

    def __init__(self, settings, **options):
        super().__init__(settings, **options)
        conf = {**settings.plugin("memory"), **options}
        self.k = int(conf.get("screenshots", 1))
        self.reasoning = conf.get("reasoning", "full")
        if self.k < 0:
            raise ConfigError("setting 'plugins.memory.screenshots' must be 0 or more")
        if self.reasoning not in ("full", "action-only"):
            raise ConfigError("setting 'plugins.memory.reasoning' must be 'full' or 'action-only'")
        self.steps: list[Step] = []
        self.shots: list[bytes] = []

    def reset(self, task: Task) -> None:
        self.steps = []
        self.shots = []

    def context(self, task: Task, observation: Observation, tools) -> Context:
        shots = [s for s in self.shots if s] + ([observation.screenshot] if observation.screenshot else [])
        keep = shots[-self.k:] if self.k else []
        history = self.steps
        if self.reasoning == "action-only":
            history = [s.model_copy(update={"turn": s.turn.model_copy(update={"thought": ""})}) for s in self.steps]
        return Context(task=task, observation=observation, tools=list(tools), history=list(history), screenshots=keep)

    def record(self, step: Step) -> None:
        self.steps.append(step)
        if step.observation.screenshot:
            self.shots.append(step.observation.screenshot)
            del self.shots[: -max(self.k, 1)]


@hookimpl
def register_memories(register):
    register(FullHistoryMemory)
