"""The policy unit: given a context, decide the next turn."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, ClassVar, Optional, Protocol, Sequence

from owrl_sdk.errors import ConfigError
from owrl_sdk.types import PolicyInfo, Turn

if TYPE_CHECKING:  # pragma: no cover
    from owrl_sdk.config import Settings
    from owrl_sdk.contract.memory import Context


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


class TrainablePolicy(Protocol):
    """What training (``owrl train``, the trainer plugin) needs of a model policy's class: the
    model's loader, its prompt class and the functions that write a turn the way the model
    reads and writes it. A policy plugin whose models can be trained gives its policy class
    these attributes (the ``openwebrl`` plugin's policy does); a trainer finds that class in
    the catalogue and uses only these, so that neither plugin imports the other.

    - ``backend_class(model_id, quantize=..., device=..., trainable=..., [autocast=...])``: the model;
    - ``prompt_class(messages=..., tools=...)``: one turn's messages and declared tools;
    - ``build_prompt(context, ...)``: the prompt for a context;
    - ``render_turn(thought, calls, ...)``: a turn as the model writes it (the training target);
    - ``openai_messages(prompt)``: a prompt as OpenAI-style chat messages;
    - ``text_policy``: the catalogue name of the text-only policy that shares the model's format;
    - an instance is made as any policy is, ``cls(settings, **options)`` (a trainer passes the
      model it trains as ``backend=``), and gives ``prompt(context)`` (what it would send for a
      context) and ``sampling`` (its sampling settings, which a trainer may replace for a while:
      greedy probes).
    """

    name: ClassVar[str]
    sampling: Any

    def __init__(self, settings: "Settings", **options: Any) -> None: ...

    def prompt(self, context: "Context") -> Any: ...

    backend_class: ClassVar[type]
    prompt_class: ClassVar[type]
    text_policy: ClassVar[str]
    build_prompt: ClassVar[Callable[..., Any]]
    render_turn: ClassVar[Callable[..., str]]
    openai_messages: ClassVar[Callable[..., list[dict[str, Any]]]]


#: The attributes :class:`TrainablePolicy` names, checked when a trainer takes a policy class.
TRAINABLE_ATTRIBUTES = ("backend_class", "prompt_class", "text_policy", "build_prompt", "render_turn", "openai_messages")


def trainable(cls: Any) -> "type[TrainablePolicy]":
    """``cls`` as a :class:`TrainablePolicy`, or a :class:`~owrl_sdk.errors.ConfigError` naming
    what it lacks."""
    missing = [a for a in TRAINABLE_ATTRIBUTES if not hasattr(cls, a)]
    if missing:
        raise ConfigError(f"the policy {getattr(cls, 'name', cls)!r} cannot be trained: its class lacks "
                          f"{', '.join(missing)} (owrl_sdk.api.TrainablePolicy)")
    return cls  # type: ignore[no-any-return]
