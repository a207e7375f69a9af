"""The policy unit: given a context, decide the next turn."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from .types import PolicyInfo, Turn

if TYPE_CHECKING:  # pragma: no cover
    from .config import Settings
    from .memory import Context


class Policy:
    """Base of every policy. Heavy imports belong in ``__init__``, not at module level."""

    name: ClassVar[str]

    def __init__(self, settings: "Settings", **options: Any):
        self.settings = settings
        self.options = options

    def info(self) -> PolicyInfo:
        return PolicyInfo(name=self.name, model=self.settings.model)

    async def act(self, context: "Context") -> Turn:  # pragma: no cover - abstract
        raise NotImplementedError

    async def close(self) -> None:
        return None
