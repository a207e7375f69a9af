"""Bases of the other pluggable units: judges, rewards, optimizers, site adapters, suites.

A unit's options live in ``[plugins.NAME]`` under its registered ``name``. A unit that sets
``Options`` (a pydantic model or a dataclass) has that table validated where the settings
load (:meth:`owrl_sdk.contract.plugins.Plugins.load_settings`) and can read it converted with
``settings.options(self.name, self.Options, **options)``.
"""

from __future__ import annotations

import abc
import random
from typing import TYPE_CHECKING, Any, ClassVar, Optional, Sequence
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

from owrl_sdk.types import Judgement, Task, Trajectory

if TYPE_CHECKING:  # pragma: no cover
    from owrl_sdk.config import Settings
    from owrl_sdk.contract.tools import Tool


class Judge:
    """Scores a finished trajectory."""

    name: ClassVar[str]
    Options: ClassVar[Optional[type]] = None
    #: Whether this judge reads what each call changed (``ToolResult.feedback`` and
    #: ``changed``); False lets a judged episode skip the after-action snapshots when
    #: nothing else reads them (see :class:`~owrl_sdk.contract.policy.Policy`'s ``reads_changes``).
    reads_changes: bool = True

    def __init__(self, settings: "Settings", **options: Any):
        self.settings = settings
        self.options = options

    async def judge(self, trajectory: Trajectory) -> Judgement:  # pragma: no cover - abstract
        raise NotImplementedError


class Reward:
    """Turns a judged trajectory into one scalar reward (None: not a training signal)."""

    name: ClassVar[str]
    Options: ClassVar[Optional[type]] = None

    def __init__(self, settings: "Settings", **options: Any):
        self.settings = settings
        self.options = options

    def reward(self, trajectory: Trajectory) -> Optional[float]:  # pragma: no cover - abstract
        raise NotImplementedError


class Optimizer(abc.ABC):
    """A training algorithm (SFT, MM-GRPO).

    Constructed with ``Settings`` and its own options (a training config, the model);
    :meth:`optimize` is the one entry point every optimizer implements.
    """

    name: ClassVar[str]
    Options: ClassVar[Optional[type]] = None

    def __init__(self, settings: "Settings", **options: Any):
        self.settings = settings
        self.options = options

    @abc.abstractmethod
    def optimize(self, samples: list[Any]) -> dict[str, Any]:
        """Train on ``samples`` (per-turn samples; for RL with their advantages set) and
        return the metrics of what was done (names to numbers)."""


class SuiteCheck(BaseModel):
    """A suite's own verdict on one episode (MiniWoB's reward, the demo shop's state)."""

    score: float
    success: bool
    reason: str = ""
    details: dict[str, Any] = Field(default_factory=dict)


class TaskSuite:
    """A named set of tasks for ``owrl eval``, with the suite's own success check.

    The eval runner calls, per episode: ``await setup()`` once before the first episode,
    ``await start(env, task)`` after the environment opened the start page (a suite that
    must start the episode through the page's JavaScript does it here),
    ``await check(env, task, trajectory)`` after the episode ended but before its
    environment closes, and ``await teardown()`` once at the end.
    """

    name: ClassVar[str]
    description: ClassVar[str] = ""
    Options: ClassVar[Optional[type]] = None
    #: The URL scheme a suite that serves its own site gives its tasks (``demo:shop``): with
    #: :attr:`base_url`, ``owrl tasks`` shows a start URL as ``scheme/PATH``, which outlives the
    #: port the site was served on. None for a suite whose tasks are on real URLs.
    scheme: ClassVar[Optional[str]] = None

    def __init__(self, settings: "Settings", **options: Any):
        self.settings = settings
        self.options = options

    @property
    def base_url(self) -> Optional[str]:
        """Where the suite's own site is served while it runs (read with :attr:`scheme`)."""
        return None

    def tasks(self) -> list[Task]:  # pragma: no cover - abstract
        raise NotImplementedError

    async def setup(self) -> None:
        return None

    async def start(self, env: Any, task: Task) -> None:
        return None

    async def check(self, env: Any, task: Task, trajectory: Trajectory) -> Optional[SuiteCheck]:
        return None

    async def teardown(self) -> None:
        return None

    def episode_start(self, env: Any, task: Task) -> Any:
        """The suite's :meth:`start` as the episode's ``episode_start`` hook.

        The eval runner passes the suite to each episode's hooks, where it takes part like
        a matched site adapter (registered for that episode as ``task-suite:NAME#N``, run
        first): any other :data:`~owrl_sdk.contract.hookspecs.EPISODE_HOOKS` method it defines is
        called too, and a misspelt one is a :class:`~owrl_sdk.errors.PluginError`."""
        return self.start(env, task)


class SiteAdapter:
    """Knowledge of particular sites, scoped by domain.

    ``domains`` lists host names; a host matches a domain when it equals it or ends with
    ``.domain``. An adapter of a site a plugin serves on a local port (``demo:shop``) names
    that plugin's URL ``scheme`` instead: a start URL on an origin the ``site_origins`` hook
    gives for it is handed to :meth:`matches` written in the scheme (``demo:shop/cart``). Its hook methods (same names and arguments as the lifecycle hooks in
    :data:`owrl_sdk.contract.hookspecs.EPISODE_HOOKS`, no ``@hookimpl`` needed) run only in
    episodes whose start URL matches, and its ``tools()`` join the tool set there.

    The catalogue registers each adapter with the plugin manager as ``site-adapter:NAME``,
    so its hooks are called (and traced, ``OWRL_TRACE_PLUGINS=1``) through pluggy, ahead of
    the global plugins. A public method whose name is close to a hook's but matches none
    (``episode_strat``), or names a hook that is only module-level (``resolve_url``), is a
    :class:`~owrl_sdk.errors.PluginError` when the adapter is registered.
    """

    name: ClassVar[str]
    Options: ClassVar[Optional[type]] = None
    domains: ClassVar[tuple[str, ...]] = ()
    scheme: ClassVar[str] = ""

    def matches(self, url: str, settings: Optional["Settings"] = None) -> bool:
        """Whether an episode starting at ``url`` is this adapter's; ``settings``: the run's
        (where the adapter's own options are: ``settings.options(self.name, self.Options)``)."""
        host = (urlsplit(url).hostname or "").lower()
        return any(host == d or host.endswith("." + d) for d in self.domains)

    def tools(self) -> list["Tool"]:
        return []


class TaskSampler:
    """Chooses the tasks an RL iteration practises, from per-task success history."""

    name: ClassVar[str]
    Options: ClassVar[Optional[type]] = None

    def __init__(self, settings: Any = None, **options: Any):
        self.options = options
        self.history: dict[str, list[bool]] = {}

    def update(self, task_id: str, successes: Sequence[bool]) -> None:
        self.history.setdefault(task_id, []).extend(bool(s) for s in successes)

    def failure_rate(self, task_id: str) -> float | None:
        h = self.history.get(task_id)
        return None if not h else 1.0 - sum(h) / len(h)

    def weight(self, task: Task) -> float:
        return 1.0

    def sample(self, tasks: Sequence[Task], n: int, rng: random.Random) -> list[Task]:
        weights = [self.weight(t) for t in tasks]
        if sum(weights) <= 0:
            weights = [1.0] * len(tasks)
        return rng.choices(list(tasks), weights=weights, k=n)

    def state_dict(self) -> dict[str, Any]:
        return {"history": self.history}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.history = {k: list(v) for k, v in state.get("history", {}).items()}
