"""The policy unit: given a context, decide the next turn."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Optional, Sequence

from .types import PolicyInfo, Turn

if TYPE_CHECKING:  # pragma: no cover
    from .config import Settings
    from .memory import Context


class Policy:
    """Base of every policy. Heavy imports belong in ``__init__``, not at module level."""

    name: ClassVar[str]
    #: Its ``[plugins.NAME]`` table's model (a pydantic model), validated where settings load;
    #: read with ``settings.options(self.name, self.Options, **options)``. None: no options.
    Options: ClassVar[Optional[type]] = None

    def __init__(self, settings: "Settings", **options: Any):
        self.settings = settings
        self.options = options

    #: Whether a call that fails with an error skips the rest of its turn, as a failed
    #: expectation always does. Off for a model, which reads every call's error and decides
    #: again; a scripted flow turns it on, so that no call runs after one that failed.
    stops_turn_on_error: bool = False

    #: Whether a successful ``done`` ends the episode at once, the turn's later calls skipped
    #: (owrl's rule). False: every call of the turn runs, and the episode ends only when the
    #: turn's last call ended it (the rule the released OpenWebRL models were trained under).
    done_ends_turn: bool = True

    #: The same call repeated without a visible change this many times ends the episode
    #: (``policy.repeated_without_change``); None: the episode's ``max_unchanged_repeats``
    #: limit; 0: never (the released OpenWebRL models' loop has no such rule).
    repeat_limit: Optional[int] = None

    #: Whether this policy reads what each call changed (``ToolResult.feedback`` beyond the
    #: tool's own words, and ``changed``). False lets the browser skip the after-action
    #: snapshot that change feedback costs, unless the memory or a plugin reads it
    #: (see the ``reads_changes`` hook and the ``change_feedback`` setting).
    reads_changes: bool = True

    #: Lines for the trajectory's warnings (e.g. an interface that is only approximate); a
    #: policy that has some sets its own list.
    warnings: Sequence[str] = ()

    def info(self) -> PolicyInfo:
        return PolicyInfo(name=self.name, model=self.settings.model)

    def environment(self) -> dict[str, Any]:
        """What this policy's model needs of the environment, applied before each reset by
        an environment that has ``configure(**options)`` (the browser's: ``dialogs`` and
        ``settle``). Empty: the environment's defaults."""
        return {}

    async def act(self, context: "Context") -> Turn:  # pragma: no cover - abstract
        raise NotImplementedError

    async def close(self) -> None:
        return None
