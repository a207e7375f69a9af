"""The Ray backend, the ``ray`` executor: episodes run on Ray actors, each owning one browser and a pool of contexts.

    owrl eval --suite demo-shop --policy oracle --backend ray --workers 2 [--ray-address ADDR]

The driver shards the pending episodes across ``workers`` actors, keeping at most
``contexts`` episodes in flight on each, and writes every result as it comes back to the
same ``episodes.jsonl`` and ``summary.json`` as the local backend (so an interrupted Ray
evaluation resumes like a local one, with either backend).

A worker that dies (its process killed, its node lost) takes its in-flight episodes with
it: each is queued again on another worker, and a fresh worker replaces the dead one.
An episode whose attempts run out is recorded as ``infra_error`` with the failure
``infra.worker_lost`` — a failure of the machinery, left out of the success rate, never
counted against the policy. ``summary.json`` adds ``backend``, ``workers_lost`` and
``episodes_retried``.

Without ``--ray-address`` (nor ``RAY_ADDRESS``) a local Ray is started for the run (and
stopped after it); with one, the driver joins that cluster. Workers chdir to the driver's working directory when
it exists on their node, so relative paths (the output folder, task and flow files) mean
the same there: on a multi-node cluster, put the output folder on a shared volume.
``OWRL_*`` variables of the driver are passed to the workers, except ``OWRL_SECRET_*``:
secrets must come from the workers' own environment (a local Ray inherits the driver's).
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from owrl_sdk.config import Settings
from owrl_sdk.errors import ConfigError, InfraError, UsageError
from owrl_sdk.scheduling.evaluation import EvalPlan, Evaluation, TaskFileSuite
from owrl_sdk.scheduling.executors import Executor, OnResult, WorkItem, Workers, WorkersGone, Workload, WorkResult, run_item, schedule
from owrl_sdk.contract.plugins import Plugins, hookimpl
from owrl_sdk.formats.records import EpisodeRecord
from owrl_sdk.episode.runner import JudgedEpisodes, failed_record
from owrl_sdk.types import Task, Trajectory


@dataclass
class RayOptions:
    #: ``ray://`` or ``HOST:PORT`` of a running cluster; None: ``RAY_ADDRESS``, else a local Ray for the run.
    address: Optional[str] = None
    #: Browser contexts (episodes in flight) per worker.
    contexts: int = 1
    #: Tries per episode when the worker running it dies.
    max_attempts: int = 3
    #: CPUs Ray reserves for each worker.
    worker_cpus: float = 1.0


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UsageError("the Ray backend needs ray: pip install 'openwebrl-sdk[scale]'") from None
    return ray


class EpisodeWorker:
    """The body of one Ray actor: one browser, ``contexts`` policies, the suite, the judge.

    Its episodes are :class:`owrl_sdk.episode.runner.JudgedEpisodes`, as on the local executor; each
    of its ``contexts`` slots gets its policy once from the workload's policy factory.
    """

    def __init__(self, spec: dict[str, Any]):
        self.spec = spec
        self.episodes: Optional[JudgedEpisodes] = None
        self.host: Any = None
        self.policies: Optional[asyncio.Queue[Any]] = None
        self.policy_factory: Any = None
        self.local_tasks: dict[str, Task] = {}

    async def start(self) -> int:
        from owrl_sdk.browser import browser_host

        spec = self.spec
        if spec.get("cwd") and Path(spec["cwd"]).is_dir():
            os.chdir(spec["cwd"])
        settings = Settings(**spec["settings"])
        plugins = Plugins().bind(settings)  # hooks receive the job's settings in this worker too
        if spec.get("tasks") is not None:
            suite: Any = TaskFileSuite(settings, [Task.model_validate(t) for t in spec["tasks"]])
        else:
            suite = plugins.catalogue.get("task_suites", spec["suite"])(settings, **spec.get("suite_options", {}))
        self.episodes = JudgedEpisodes(settings, plugins, suite, spec["judge"], Path(spec["out"]),
                                       record_blocklist=spec["record_blocklist"])
        Path(spec["out"]).mkdir(parents=True, exist_ok=True)
        await suite.setup()
        # The suite's tasks as this worker sees them: a suite that serves its site (the demo
        # shop) points them at its own server here, not at the driver's.
        self.local_tasks = {t.id: t for t in suite.tasks()}
        self.host = browser_host(settings, plugins)
        await self.host.start()
        await self.configure(spec["policy"], spec.get("max_steps"))
        return os.getpid()

    async def configure(self, policy: Any, max_steps: Optional[int] = None) -> None:
        """Use a new policy factory (and step limit) from now on: RL rollouts name each new adapter."""
        assert self.episodes is not None, "start() first"
        episodes = self.episodes
        if max_steps is not None:
            episodes.settings = episodes.settings.with_overrides(max_steps=max_steps)
            self.spec["max_steps"] = max_steps
        old, self.policies = self.policies, asyncio.Queue()
        old_factory, self.policy_factory = self.policy_factory, policy
        for _ in range(max(1, self.spec["contexts"])):
            self.policies.put_nowait(policy(episodes.settings, episodes.plugins))
        while old is not None and not old.empty():
            stale = old.get_nowait()
            if getattr(old_factory, "owned", True):
                await stale.close()

    async def set_out(self, out: str) -> None:
        """Write the next episodes' run folders under ``out`` (each RL iteration has its own)."""
        assert self.episodes is not None, "start() first"
        self.episodes.set_out(Path(out))

    async def episode(self, task: dict[str, Any], n: int, with_trajectory: bool = False) -> dict[str, Any]:
        """One judged episode; an error of the machinery (not the actor's death) comes back as an
        ``infra_error`` record with ``error`` set, like on the local executor."""
        assert self.episodes is not None and self.policies is not None, "start() first"
        policy = await self.policies.get()
        try:
            item = WorkItem(self.local_tasks.get(task["id"]) or Task.model_validate(task), n)
            result = await run_item(self.episodes, self.host, policy, item, max_steps=self.spec.get("max_steps"),
                                    with_trajectory=with_trajectory)
        finally:
            self.policies.put_nowait(policy)
        traj = result.trajectory
        return {"record": result.record.__dict__, "trajectory": traj.model_dump(mode="json") if traj is not None else None,
                "error": result.error}

    async def close(self) -> None:
        if self.policies is not None:
            while not self.policies.empty():
                policy = self.policies.get_nowait()
                if getattr(self.policy_factory, "owned", True):
                    await policy.close()
        if self.host is not None:
            await self.host.close()
        if self.episodes is not None:
            await self.episodes.suite.teardown()


def lost_record(task: Task, n: int) -> EpisodeRecord:
    """The record of an episode whose workers kept dying until its attempts ran out."""
    return failed_record(task, n, "infra.worker_lost")


class WorkerPool:
    """Ray actors running :class:`EpisodeWorker`, with the bookkeeping of dead ones: how
    many episodes each has in flight (:meth:`free_worker` picks the least busy live one), and
    a replacement for each that dies while replacements are left. The executor's items run on
    it through the one scheduler (:func:`owrl_sdk.scheduling.executors.schedule`)."""

    def __init__(self, spec: dict[str, Any], workers: int, options: RayOptions):
        self.ray = import_ray()
        self.spec = spec
        self.size = max(1, workers)
        self.options = options
        self.started_ray = False
        self.busy: dict[Any, int] = {}
        self.pids: dict[Any, int] = {}
        self.replacements_left = 2 * self.size
        self.workers_lost = 0

    async def start(self) -> None:
        ray = self.ray
        if not ray.is_initialized():
            env = {k: v for k, v in os.environ.items() if k.startswith("OWRL_") and not k.startswith("OWRL_SECRET_")}
            kwargs: dict[str, Any] = dict(include_dashboard=False, logging_level=logging.WARNING,
                                          log_to_driver=False, runtime_env={"env_vars": env})
            address = self.options.address or os.environ.get("RAY_ADDRESS")
            if address:
                kwargs["address"] = address
            else:
                # A local Ray for this run only: on loopback, with room for every worker.
                kwargs["address"] = "local"  # never an unrelated cluster that happens to run here
                kwargs["num_cpus"] = max(os.cpu_count() or 1, int(self.size * self.options.worker_cpus + 0.999))
                kwargs["_node_ip_address"] = "127.0.0.1"
            try:
                ray.init(**kwargs)
            except Exception as err:  # noqa: BLE001 - ray's own connection errors
                raise InfraError(f"cannot start or join Ray ({kwargs.get('address')}): {err}",
                                 code="ray_unavailable") from None
            self.started_ray = True
        await asyncio.gather(*[self._add_worker() for _ in range(self.size)])

    async def _add_worker(self) -> None:
        actor_cls = self.ray.remote(num_cpus=self.options.worker_cpus, max_restarts=0)(EpisodeWorker)
        actor = actor_cls.remote(self.spec)
        try:
            pid = await actor.start.remote()
        except Exception as err:  # noqa: BLE001 - the worker's own error, wrapped by Ray
            self.ray.kill(actor)
            raise InfraError(f"a Ray worker could not start: {_cause(err)}", code="worker_start_failed") from None
        self.busy[actor] = 0
        self.pids[actor] = pid

    async def configure(self, policy: Any, max_steps: Optional[int] = None) -> None:
        """Switch every worker (and the workers started later) to the policy factory ``policy``."""
        self.spec = {**self.spec, "policy": policy}
        if max_steps is not None:
            self.spec["max_steps"] = max_steps
        await asyncio.gather(*[_awaited(a.configure.remote(policy, max_steps)) for a in self.busy])

    async def set_out(self, out: str) -> None:
        """Write the next episodes' run folders under ``out`` (workers started later too)."""
        self.spec["out"] = str(out)
        await asyncio.gather(*[_awaited(a.set_out.remote(str(out))) for a in self.busy])

    def free_worker(self) -> Any:
        live = [a for a, n in self.busy.items() if n < max(1, self.options.contexts)]
        return min(live, key=lambda a: self.busy[a]) if live else None

    def finished(self, actor: Any) -> None:
        if actor in self.busy:
            self.busy[actor] -= 1

    async def lose(self, actor: Any) -> None:
        """``actor`` died: forget it and start a replacement while replacements are left."""
        if actor not in self.busy:
            return
        del self.busy[actor]
        self.pids.pop(actor, None)
        self.workers_lost += 1
        if self.replacements_left > 0:
            self.replacements_left -= 1
            await self._add_worker()

    async def close(self) -> None:
        async def stop(actor: Any) -> None:
            try:
                await asyncio.wait_for(asyncio.ensure_future(_awaited(actor.close.remote())), timeout=30)
            except Exception:  # noqa: BLE001 - a worker that died or hangs is killed below anyway
                pass
            self.ray.kill(actor)

        await asyncio.gather(*[stop(a) for a in list(self.busy)])
        self.busy.clear()
        if self.started_ray:
            self.ray.shutdown()


async def _awaited(ref: Any) -> Any:
    return await ref


def _cause(err: BaseException) -> str:
    cause = getattr(err, "cause", None) or err
    return f"{type(cause).__name__}: {cause}".splitlines()[0]


def _is_actor_death(ray: Any, err: BaseException) -> bool:
    return isinstance(err, (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError))


def worker_spec(workload: Workload, settings: Settings, contexts: int) -> dict[str, Any]:
    """What a worker needs to rebuild the workload on its own node (the policy factory is pickled)."""
    if not getattr(workload.policy, "owned", True):
        raise ConfigError("Ray workers cannot share an in-process policy: give a policy factory they can "
                          "rebuild (owrl_sdk.scheduling.executors.NamedPolicy), e.g. a served model by name")
    suite = workload.suite
    file_tasks = [t.model_dump(mode="json") for t in suite.tasks()] if isinstance(suite, TaskFileSuite) else None
    return {
        "cwd": os.getcwd(), "settings": settings.model_dump(), "suite": suite.name, "suite_options": suite.options,
        "tasks": file_tasks, "policy": workload.policy, "judge": workload.judge, "out": str(workload.out),
        "record_blocklist": workload.record_blocklist, "contexts": contexts, "max_steps": workload.max_steps,
    }


class _ActorWorkers(Workers):
    """The pool's actors as the scheduler's workers: each takes ``contexts`` items at once; an
    item whose actor died (or whose call failed in Ray) is lost with it, and the actor is
    replaced while replacements are left."""

    def __init__(self, pool: WorkerPool, with_trajectory: bool):
        self.pool = pool
        self.with_trajectory = with_trajectory

    def claim(self) -> Optional[Any]:
        actor = self.pool.free_worker()
        if actor is not None:
            self.pool.busy[actor] += 1
        return actor

    async def run(self, worker: Any, item: WorkItem) -> tuple[WorkResult, bool]:
        try:
            result = await worker.episode.remote(item.task.model_dump(mode="json"), item.episode, self.with_trajectory)
        except Exception as err:  # noqa: BLE001 - Ray's error for this call: the item is tried again
            self.pool.finished(worker)
            if _is_actor_death(self.pool.ray, err):
                await self.pool.lose(worker)
            return WorkResult(item, lost_record(item.task, item.episode),
                              error=f"its workers died; attempts ran out ({_cause(err)})"), True
        self.pool.finished(worker)
        traj = result.get("trajectory")
        return WorkResult(item, EpisodeRecord(**result["record"]),
                          Trajectory.model_validate(traj) if traj is not None else None, result.get("error")), False


class RayExecutor(Executor):
    """The ``ray`` executor: :class:`EpisodeWorker` actors, ``contexts`` episodes in flight on each.

    The pool starts on the first ``run`` (with no more workers than episodes) and lives
    until ``close``; ``configure`` switches its workers to a new policy, horizon or output
    folder (RL rollouts do between iterations). A dead worker's episodes are retried on
    another, up to ``max_attempts`` tries, then recorded as ``infra.worker_lost``.
    """

    name = "ray"
    shares_policy = False

    def __init__(self, settings: Settings, plugins: Plugins, workers: int = 1, *,
                 options: Optional[RayOptions] = None, address: Optional[str] = None,
                 contexts: Optional[int] = None, max_attempts: Optional[int] = None, **ignored: Any):
        super().__init__(settings, plugins, workers)
        options = options or RayOptions()
        given = {k: v for k, v in dict(address=address, contexts=contexts, max_attempts=max_attempts).items()
                 if v is not None}
        self.ray_options = RayOptions(**{**options.__dict__, **given})
        self.pool: Optional[WorkerPool] = None
        self.spec: Optional[dict[str, Any]] = None
        self.retried = 0

    async def start(self, workload: Workload) -> None:
        if workload.tools is not None:
            raise ConfigError("the ray executor's workers offer the catalogue's tools, built in each worker: "
                              "a workload's own tool objects (tools=...) run on the local executor")
        await super().start(workload)
        self.spec = worker_spec(workload, self.settings, self.ray_options.contexts)

    async def configure(self, *, policy: Optional[Any] = None, max_steps: Optional[int] = None,
                        out: Optional[Path] = None) -> None:
        await super().configure(policy=policy, max_steps=max_steps, out=out)
        assert self.workload is not None and self.spec is not None
        if policy is not None:
            worker_spec(self.workload, self.settings, self.ray_options.contexts)  # refuses a shared policy
        self.spec = {**self.spec, "policy": self.workload.policy, "max_steps": self.workload.max_steps,
                     "out": str(self.workload.out)}
        if self.pool is not None:
            if policy is not None or max_steps is not None:
                await self.pool.configure(self.workload.policy, self.workload.max_steps)
            if out is not None:
                await self.pool.set_out(str(out))

    async def run(self, items: list[WorkItem], on_result: Optional[OnResult] = None) -> list[WorkResult]:
        assert self.workload is not None and self.spec is not None, "start() first"
        if not items:
            return []
        if self.pool is None:
            self.pool = WorkerPool(self.spec, min(self.workers, len(items)), self.ray_options)
            await self.pool.start()
        try:
            results, retried = await schedule(items, _ActorWorkers(self.pool, self.workload.with_trajectory),
                                              self.ray_options.max_attempts, on_result)
        except WorkersGone:
            raise InfraError("every Ray worker died and none could be replaced", code="worker_lost") from None
        self.retried += retried
        return results

    def stats(self) -> dict[str, Any]:
        return {"backend": "ray", "workers_lost": self.pool.workers_lost if self.pool else 0,
                "episodes_retried": self.retried}

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()


class RayEvaluation(Evaluation):
    """An :class:`Evaluation` whose episodes run on the ``ray`` executor (same files, same summary)."""

    def __init__(self, plan: EvalPlan, settings: Settings, plugins: Plugins,
                 on_record: Optional[Callable[[EpisodeRecord], None]] = None, options: Optional[RayOptions] = None):
        self.options = options or RayOptions()
        super().__init__(plan, settings, plugins, on_record=on_record,
                         executor=RayExecutor(settings, plugins, plan.workers, options=self.options))

    @property
    def pool(self) -> Optional[WorkerPool]:
        """The executor's worker pool (once started)."""
        assert isinstance(self.executor, RayExecutor)
        return self.executor.pool


@hookimpl
def register_executors(register: Callable[[Any], None]) -> None:
    """The ``ray`` executor (a default plugin, like the local one; Ray is imported when it starts)."""
    register(RayExecutor)
