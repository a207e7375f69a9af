"""The memory unit: what the policy sees of the episode so far."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Optional

from owrl_sdk.types import Observation, Step, Task

if TYPE_CHECKING:  # pragma: no cover
    from owrl_sdk.config import Settings
    from owrl_sdk.contract.tools import Tool


@dataclass
class Context:
    """Everything a policy gets for one turn."""

    task: Task
    observation: Observation
    tools: list["Tool"]
    history: list[Step] = field(default_factory=list)
    #: The latest screenshots, oldest first (the current one last); K of them.
    screenshots: list[bytes] = field(default_factory=list)
    #: Strategy-specific text (e.g. a summary) the policy may render.
    notes: Optional[str] = None
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def last_step(self) -> Optional[Step]:
        return self.history[-1] if self.history else None


class Memory:
    """Base of every memory strategy; one instance serves one episode at a time."""

    name: ClassVar[str]
    #: Its ``[plugins.NAME]`` table's model (a pydantic model), validated where settings load;
    #: read with ``settings.options(self.name, self.Options, **options)``. None: no options.
    Options: ClassVar[Optional[type]] = None

    #: Whether this memory reads what each call changed (``ToolResult.feedback`` and
    #: ``changed``) itself; a memory that only hands the steps to the policy does not.
    reads_changes: ClassVar[bool] = True

    def __init__(self, settings: "Settings", **options: Any):
        self.settings = settings
        self.options = options

    def reset(self, task: Task) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def context(self, task: Task, observation: Observation, tools: list["Tool"]) -> Context:  # pragma: no cover
        raise NotImplementedError

    def record(self, step: Step) -> None:  # pragma: no cover - abstract
        raise NotImplementedError
