"""Bases of the other pluggable units: judges, rewards, optimizers, site adapters, suites."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Optional

from .types import Judgement, Task, Trajectory

if TYPE_CHECKING:  # pragma: no cover
    from .config import Settings
    from .tools import Tool


class Judge:
    """Scores a finished trajectory."""

    name: ClassVar[str]

    def __init__(self, settings: "Settings", **options: Any):
        self.settings = settings
        self.options = options

    async def judge(self, trajectory: Trajectory) -> Judgement:  # pragma: no cover - abstract
        raise NotImplementedError


class Reward:
    """Turns a judged trajectory into one scalar reward (None: not a training signal)."""

    name: ClassVar[str]

    def __init__(self, settings: "Settings", **options: Any):
        self.settings = settings
        self.options = options

    def reward(self, trajectory: Trajectory) -> Optional[float]:  # pragma: no cover - abstract
        raise NotImplementedError


class Optimizer:
    """A training algorithm (SFT, MM-GRPO)."""

    name: ClassVar[str]

    def __init__(self, settings: "Settings", **options: Any):
        self.settings = settings
        self.options = options


class TaskSuite:
    """A named set of tasks for ``owrl eval``."""

    name: ClassVar[str]
    description: ClassVar[str] = ""

    def __init__(self, settings: "Settings", **options: Any):
        self.settings = settings
        self.options = options

    def tasks(self) -> Iterable[Task]:  # pragma: no cover - abstract
        raise NotImplementedError


class SiteAdapter:
    """Knowledge of particular sites, scoped by domain.

    ``domains`` lists host names; a host matches a domain when it equals it or ends with
    ``.domain``. Its hook methods (same names and arguments as the lifecycle hooks) run
    only in episodes whose start URL matches, and its ``tools()`` join the tool set there.
    """

    name: ClassVar[str]
    domains: ClassVar[tuple[str, ...]] = ()

    def matches(self, url: str) -> bool:
        from urllib.parse import urlsplit

        host = (urlsplit(url).hostname or "").lower()
        return any(host == d or host.endswith("." + d) for d in self.domains)

    def tools(self) -> list["Tool"]:
        return []
