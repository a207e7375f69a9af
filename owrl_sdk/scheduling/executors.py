"""Executors: where a list of judged episodes runs.

An :class:`Executor` takes :class:`WorkItem` s (a task, its episode number, an optional
group) and runs each once as a judged episode (:class:`owrl_sdk.episode.runner.JudgedEpisodes`)
on ``workers`` workers, calling ``on_result`` as each finishes and returning every
:class:`WorkResult`. An episode that fails, even one whose judging raises, becomes an
``infra_error`` record; it never stops the others.

Policies: each worker gets its policy once, from the :data:`PolicyFactory` the client
passes in the :class:`Workload`, called as ``factory(settings, plugins)``.
:class:`NamedPolicy` builds a new instance of a registered policy for every worker (what
an evaluation does; it is picklable, so it also crosses to Ray workers) and the executor
closes them at the end; :class:`SharedPolicy` hands every worker the same object, which
stays its owner's and is not closed (RL rollouts in the trainer's process share its
model-backed policy this way; an executor whose workers run in other processes, as ``ray``,
sets ``shares_policy`` false and refuses it).

Executors are registered by plugins with the ``register_executors`` hook, like every
other catalogue kind; ``owrl eval --backend NAME`` picks one. The core registers
``local`` (this module: asyncio workers on contexts of one shared browser, or one browser
per worker) and ``ray`` (:mod:`owrl_sdk.scheduling.raybackend`: Ray actors each owning a browser).
Evaluations, batches, the server's batch jobs and RL rollouts all run on them; those whose
workers run in this process share one scheduling, :class:`InProcessExecutor`.

A worker lost under an episode is not the policy's failure, on either backend: a Ray actor
that dies takes its episodes to another actor, and a local worker whose browser dies (the
process killed or crashed, a remote browser's connection lost) runs its episode again once
the browser is back; each episode at most ``max_attempts`` times (3).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncContextManager, Awaitable, Callable, ClassVar, Optional

from owrl_sdk.config import Settings
from owrl_sdk.errors import UsageError
from owrl_sdk.contract.plugins import Plugins, hookimpl
from owrl_sdk.contract.policy import Policy
from owrl_sdk.formats.records import EpisodeRecord
from owrl_sdk.episode.runner import JudgedEpisodes, episode_key, failed_record
from owrl_sdk.types import Failure, Outcome, Task, Trajectory

log = logging.getLogger(__name__)

#: Makes the policy of one worker: ``factory(settings, plugins) -> Policy``.
PolicyFactory = Callable[[Settings, Plugins], Policy]


@dataclass
class NamedPolicy:
    """A new instance of the registered policy ``name`` for every worker (closed by the executor)."""

    name: str
    options: dict[str, Any] = field(default_factory=dict)
    #: The executor owns (and closes) what this factory makes.
    owned: ClassVar[bool] = True

    def __call__(self, settings: Settings, plugins: Plugins) -> Policy:
        policy: Policy = plugins.catalogue.build("policies", self.name, settings, **self.options)
        return policy


@dataclass
class SharedPolicy:
    """The same in-process policy for every worker; it stays the caller's (never closed here)."""

    policy: Policy
    owned: ClassVar[bool] = False

    def __call__(self, settings: Settings, plugins: Plugins) -> Policy:
        return self.policy


@dataclass
class WorkItem:
    """One episode to run: ``task`` with seed ``episode``; ``group`` travels to the result."""

    task: Task
    episode: int = 0
    group: Optional[str] = None

    @property
    def key(self) -> str:
        return episode_key(self.task, self.episode)


@dataclass
class WorkResult:
    item: WorkItem
    record: EpisodeRecord
    #: The judged trajectory, when the workload asked for trajectories (RL does).
    trajectory: Optional[Trajectory] = None
    #: Why the machinery could not run or judge the episode (its record is an ``infra_error``).
    error: Optional[str] = None


@dataclass
class Workload:
    """What every episode of a run shares: the suite, the policy, the judge, the output."""

    suite: Any
    policy: PolicyFactory
    judge: str = "composite"
    out: Path = Path("eval")
    #: Record hosts that fail with network errors in the blocklist.
    record_blocklist: bool = True
    #: Return each judged trajectory in its result.
    with_trajectory: bool = False
    #: Steps per episode whatever the tasks say (RL's horizon); None: the task's, else the setting.
    max_steps: Optional[int] = None
    #: The tools the episodes offer instead of the catalogue's (an in-memory environment's own,
    #: as the RL toy's buttons); None: every registered tool.
    tools: Optional[list[Any]] = None


OnResult = Callable[[WorkResult], Any]

#: What an ``on_result`` callback returns to stop a run: the items not started are dropped
#: (the local executor's workers finish the episodes they are in and take no more).
STOP = "stop"

#: What an ``on_result`` callback returns to run the item again (a batch row's ``--retries``):
#: it goes to the back of the queue as its next episode (``episode + 1``, the same group), and
#: the result just heard is not kept.
RETRY = "retry"


class Executor:
    """Runs :class:`WorkItem` s of a :class:`Workload` on ``workers`` workers.

    ``start(workload)`` once, then ``run(items, on_result)`` any number of times (with
    ``configure`` between runs to switch the policy, the horizon or the output folder),
    then ``close()``. Also an async context manager. Subclasses set ``name`` and register
    through ``register_executors``; their ``__init__`` takes the settings, the plugins,
    ``workers`` and their own keyword options (unknown options are ignored by the
    built-in ones, so a command line can pass all it has).
    """

    name: ClassVar[str] = ""
    #: Whether the workers run in this process, so that they can share an in-process policy
    #: (:class:`SharedPolicy`); one that runs them elsewhere (``ray``) takes policy factories only.
    shares_policy: ClassVar[bool] = True

    def __init__(self, settings: Settings, plugins: Plugins, workers: int = 1, **options: Any):
        self.settings = settings
        # hooks receive the settings the episodes run with (a test's stand-in without bind stays as given)
        self.plugins = plugins.bind(settings) if hasattr(plugins, "bind") else plugins
        self.workers = max(1, workers)
        self.options = options
        self.workload: Optional[Workload] = None

    async def start(self, workload: Workload) -> None:
        self.workload = workload

    async def configure(self, *, policy: Optional[PolicyFactory] = None, max_steps: Optional[int] = None,
                        out: Optional[Path] = None) -> None:
        """Use another policy, horizon or output folder for the next ``run``."""
        assert self.workload is not None, "start() first"
        if policy is not None:
            self.workload.policy = policy
        if max_steps is not None:
            self.workload.max_steps = max_steps
        if out is not None:
            self.workload.out = Path(out)

    async def run(self, items: list[WorkItem], on_result: Optional[OnResult] = None) -> list[WorkResult]:
        """Run each item once, calling ``on_result`` as each finishes; every executor implements it
        with :func:`schedule` (``local`` and the server's rows on their browsers, ``ray`` on its
        actors)."""
        raise NotImplementedError

    def stats(self) -> dict[str, Any]:
        """Extra totals for ``summary.json`` (the Ray executor adds lost workers and retries)."""
        return {}

    async def close(self) -> None:
        pass

    async def __aenter__(self) -> "Executor":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


def horizon(task: Task, max_steps: Optional[int]) -> Task:
    """``task`` with the workload's step limit, when it sets one (RL's curriculum does)."""
    return task if max_steps is None else task.model_copy(update={"max_steps": max_steps})


class Workers:
    """What a backend gives the scheduler (:func:`schedule`): workers that each run one
    :class:`WorkItem` at a time. The scheduler owns the queue, the attempts and the results;
    a backend only says which worker is free and runs an item on it."""

    def claim(self) -> Optional[Any]:
        """A worker free to take one more item now, marked busy; None when none is."""
        raise NotImplementedError

    async def run(self, worker: Any, item: WorkItem) -> tuple[WorkResult, bool]:
        """Run ``item`` on ``worker`` (a claimed one, free again once this returns): its
        result, and whether the worker was lost under it, so that the item is worth another
        attempt (the result then stands only if the attempts run out). Never raises for an
        episode's own failure: that is an ``infra_error`` result."""
        raise NotImplementedError


class WorkersGone(Exception):
    """Items are left and no worker is, nor ever will be again (every Ray actor died)."""


async def schedule(items: list[WorkItem], workers: Workers, max_attempts: int,
                   on_result: Optional[OnResult] = None) -> tuple[list[WorkResult], int]:
    """Run each of ``items`` on ``workers``: the one scheduler of every executor. Each free
    worker takes the next item; an item whose worker was lost under it goes back to the front
    of the queue for another worker (or the same, once its browser is back), up to
    ``max_attempts`` runs in all, after which its last result stands. ``on_result`` hears
    each result as it comes and may answer :data:`STOP` (the items not started are dropped;
    those in flight finish) or :data:`RETRY` (the item runs again, as its next episode, after
    those queued: the caller's own retry rule, a batch's ``--retries``). Returns the results
    kept, in the order they finished, and how many runs were attempts again."""
    pending = deque(enumerate(items))
    next_index = len(items)
    attempts: dict[int, int] = {}
    inflight: dict[asyncio.Future[tuple[WorkResult, bool]], tuple[int, WorkItem]] = {}
    results: list[WorkResult] = []
    retried = 0
    try:
        while pending or inflight:
            while pending:
                worker = workers.claim()
                if worker is None:
                    break
                index, item = pending.popleft()
                inflight[asyncio.ensure_future(workers.run(worker, item))] = (index, item)
            if not inflight:
                raise WorkersGone(f"{len(pending)} episodes are left and no worker is")
            done, _ = await asyncio.wait(list(inflight), return_when=asyncio.FIRST_COMPLETED)
            for fut in done:
                index, item = inflight.pop(fut)
                result, lost = fut.result()
                tries = attempts[index] = attempts.get(index, 0) + 1
                if lost and tries < max_attempts:
                    retried += 1
                    log.warning("episode %s: its worker was lost (%s); running it again (attempt %d of %d)",
                                item.key, result.record.failure, tries + 1, max_attempts)
                    pending.appendleft((index, item))
                    continue
                answer = on_result(result) if on_result is not None else None
                if answer == RETRY:
                    retried += 1
                    pending.append((next_index, WorkItem(item.task, item.episode + 1, group=item.group)))
                    next_index += 1  # a new item: its own count of lost workers
                    continue
                results.append(result)
                if answer == STOP:
                    pending.clear()
    finally:
        for fut in inflight:  # cancelled from outside (a Ctrl+C): the episodes in flight go too
            fut.cancel()
        if inflight:
            await asyncio.gather(*inflight, return_exceptions=True)
    return results, retried


class _PolicyWorkers(Workers):
    """The workers of an in-process executor: one per browser entry, each with its policy,
    running an item through ``one(host, policy, item)``."""

    def __init__(self, hosts: list[Any], policies: list[Policy], one: Callable[[Any, Policy, WorkItem],
                 Awaitable[tuple[WorkResult, bool]]]):
        self.idle = list(zip(hosts, policies))
        self.one = one

    def claim(self) -> Optional[Any]:
        return self.idle.pop(0) if self.idle else None

    async def run(self, worker: Any, item: WorkItem) -> tuple[WorkResult, bool]:
        try:
            host, policy = worker
            return await self.one(host, policy, item)
        finally:
            self.idle.append(worker)


async def run_item(episodes: JudgedEpisodes, host: Any, policy: Policy, item: WorkItem, *,
                   max_steps: Optional[int] = None, with_trajectory: bool = False,
                   task: Optional[Task] = None) -> WorkResult:
    """One item's judged episode on ``host`` (``ensure_running()``, ``new_env(...)``) with
    ``policy``: the per-item body of every executor (the local one's workers, the server's rows,
    each Ray actor, the RL toy's in-memory workers). ``task``: the item's task as the executor
    adjusted it (default: the item's); ``max_steps``: the workload's horizon. An error of the
    machinery is this item's ``infra_error`` result, never raised."""
    the_task = horizon(task if task is not None else item.task, max_steps)
    try:
        await host.ensure_running()  # one relaunch even when several workers notice
        record, traj = await episodes.run(host, policy, the_task, item.episode)
    except Exception as err:  # noqa: BLE001 - the machinery failed this episode only
        return error_result(item, err)
    return WorkResult(item, record, traj if with_trajectory else None)


def error_result(item: WorkItem, err: BaseException, seconds: float = 0.0) -> WorkResult:
    """The result of an episode whose machinery raised: an ``infra_error``, never the policy's fault."""
    return WorkResult(item, failed_record(item.task, item.episode, f"infra.{type(err).__name__}", seconds),
                      error=f"{type(err).__name__}: {err}")


def failed_trajectory(result: WorkResult, policy: Any) -> Trajectory:
    """A stand-in trajectory for a result that came back without one (its episode never ended
    normally: the machinery raised, or its Ray workers kept dying): an ``infra_error`` that
    no reward trains on. ``policy`` is a :class:`PolicyInfo` or its fields."""
    item = result.item
    category, _, code = (result.record.failure or "infra.error").partition(".")
    task = item.task.model_copy(update={"metadata": {**item.task.metadata, "seed": item.episode,
                                                     "episode": item.episode}})
    failure = Failure.model_validate({"category": category, "code": code, "detail": result.error or ""})
    return Trajectory.model_validate({"task": task, "policy": policy,
                                      "outcome": Outcome(status="infra_error", failure=failure)})


#: The failures of an episode whose browser was lost under it: the worker's, not the policy's.
WORKER_LOST = frozenset({"infra.browser_crash", "infra.browser_disconnected"})


class InProcessExecutor(Executor):
    """What every executor whose workers run in this process shares: the suite set up at
    ``start`` and torn down at ``close``, one :class:`JudgedEpisodes` for all workers, a
    policy per worker, and the items run by :func:`schedule`, where an episode whose browser
    was lost under it (:data:`WORKER_LOST`) runs again once the browser is back, up to
    ``max_attempts`` times in all (the last attempt's record stands).

    A backend supplies only its workers' browsers (:meth:`worker_hosts`); it may also adjust or
    refuse an item before it runs (:meth:`prepare`) and hold something around each episode
    (:meth:`slot`), as the server's rows do with its slots.
    """

    def __init__(self, settings: Settings, plugins: Plugins, workers: int = 1, *,
                 max_attempts: Optional[int] = None, **options: Any):
        super().__init__(settings, plugins, workers, **options)
        self.max_attempts = max(1, 3 if max_attempts is None else max_attempts)
        self.episodes: Optional[JudgedEpisodes] = None
        self.retried = 0

    async def start(self, workload: Workload) -> None:
        await super().start(workload)
        await workload.suite.setup()
        self.episodes = JudgedEpisodes(self.settings, self.plugins, workload.suite, workload.judge, workload.out,
                                       record_blocklist=workload.record_blocklist, tools=workload.tools)

    async def configure(self, *, policy: Optional[PolicyFactory] = None, max_steps: Optional[int] = None,
                        out: Optional[Path] = None) -> None:
        await super().configure(policy=policy, max_steps=max_steps, out=out)
        assert self.episodes is not None
        if out is not None:
            self.episodes.set_out(Path(out))

    def worker_hosts(self, n: int) -> list[Any]:
        """The browsers of ``n`` workers (one entry per worker; entries may repeat): objects with
        ``ensure_running()`` and ``new_env(...)``."""
        raise NotImplementedError

    def prepare(self, item: WorkItem) -> tuple[Task, Optional[WorkResult]]:
        """The task the item runs, or the result it ends with before any browser (a refusal)."""
        return item.task, None

    def slot(self) -> AsyncContextManager[Any]:
        """Held while an episode runs (nothing by default)."""
        return contextlib.nullcontext()

    async def run(self, items: list[WorkItem], on_result: Optional[OnResult] = None) -> list[WorkResult]:
        assert self.workload is not None and self.episodes is not None, "start() first"
        workload, episodes = self.workload, self.episodes
        settings = self.settings if workload.max_steps is None else self.settings.with_overrides(
            max_steps=workload.max_steps)
        episodes.settings = settings

        async def one(host: Any, policy: Policy, item: WorkItem) -> tuple[WorkResult, bool]:
            task, refused = self.prepare(item)
            if refused is not None:
                return refused, False
            async with self.slot():
                result = await run_item(episodes, host, policy, item, max_steps=workload.max_steps,
                                        with_trajectory=workload.with_trajectory, task=task)
            return result, result.error is None and result.record.failure in WORKER_LOST

        if not items:
            return []
        hosts = self.worker_hosts(min(self.workers, len(items)))
        policies: list[Policy] = []
        try:
            for _ in hosts:
                policies.append(workload.policy(settings, self.plugins))
            results, retried = await schedule(items, _PolicyWorkers(hosts, policies, one), self.max_attempts,
                                              on_result)
        finally:
            if getattr(workload.policy, "owned", True):
                for policy in policies:
                    await policy.close()
        self.retried += retried
        return results

    async def close(self) -> None:
        if self.workload is not None and self.episodes is not None:
            self.episodes = None
            await self.workload.suite.teardown()


class LocalExecutor(InProcessExecutor):
    """asyncio workers in this process, on contexts of one shared browser (``browser_per_worker``:
    one each); every worker makes sure its browser runs (relaunching a crashed one) before
    each episode.

    An episode whose browser died under it runs again on the relaunched browser, up to
    ``max_attempts`` times in all (3), as the Ray backend retries a lost actor's episodes. A
    batch asks for one attempt: its rows have their own retries, which know a row's point of
    no return."""

    name = "local"

    def __init__(self, settings: Settings, plugins: Plugins, workers: int = 1, *,
                 browser_per_worker: bool = False, max_attempts: Optional[int] = None, **options: Any):
        super().__init__(settings, plugins, workers, max_attempts=max_attempts, **options)
        self.browser_per_worker = browser_per_worker
        self.hosts: list[Any] = []
        self.lost = 0

    async def start(self, workload: Workload) -> None:
        from owrl_sdk.browser import browser_host

        await super().start(workload)
        self.hosts = [browser_host(self.settings, self.plugins)
                      for _ in range(self.workers if self.browser_per_worker else 1)]
        for host in self.hosts:
            await host.start()

    def worker_hosts(self, n: int) -> list[Any]:
        return [self.hosts[i % len(self.hosts)] for i in range(n)]

    def stats(self) -> dict[str, Any]:
        """As the Ray backend's: browsers lost (each relaunch or reconnection) and episodes run again."""
        return {"backend": self.name, "workers_lost": self.lost + self._relaunches(self.hosts),
                "episodes_retried": self.retried}

    @staticmethod
    def _relaunches(hosts: list[Any]) -> int:
        return sum(max(0, int(getattr(host, "generation", 1)) - 1) for host in hosts)

    async def close(self) -> None:
        self.lost += self._relaunches(self.hosts)  # counted before the hosts go: stats() is read after close
        hosts, self.hosts = self.hosts, []
        for host in hosts:
            await host.close()
        await super().close()  # the suite's teardown


def executor_class(plugins: Plugins, name: str) -> type[Executor]:
    """The executor registered as ``name``; an unknown name is a usage error naming the known ones."""
    found: Optional[type[Executor]] = plugins.catalogue.items["executors"].get(name)
    if found is None:
        known = ", ".join(plugins.catalogue.names("executors")) or "none"
        raise UsageError(f"no executor (backend) named '{name}' (available: {known})")
    return found


@hookimpl
def register_executors(register: Callable[[Any], None]) -> None:
    register(LocalExecutor)


__all__ = ["Executor", "InProcessExecutor", "LocalExecutor", "NamedPolicy", "SharedPolicy", "PolicyFactory", "WorkItem", "WorkResult",
           "Workers", "WorkersGone", "schedule",
           "Workload", "executor_class", "horizon", "error_result", "failed_trajectory"]
