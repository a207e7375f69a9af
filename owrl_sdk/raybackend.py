"""The Ray backend: episodes run on Ray actors, each owning one browser and a pool of contexts.

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
from collections import Counter, deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from .config import Settings
from .errors import InfraError, UsageError
from .evaluation import EpisodeRecord, EvalPlan, Evaluation, TaskFileSuite
from .plugins import Plugins
from .types import Task


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
    """The body of one Ray actor: one browser, ``contexts`` policies, the suite, the judge."""

    def __init__(self, spec: dict[str, Any]):
        self.spec = spec
        self.evaluation: Optional[Evaluation] = None
        self.host: Any = None
        self.policies: Optional[asyncio.Queue] = None
        self.judge: Any = None
        self.local_tasks: dict[str, Task] = {}

    async def start(self) -> int:
        from .browser import BrowserHost

        spec = self.spec
        if spec.get("cwd") and Path(spec["cwd"]).is_dir():
            os.chdir(spec["cwd"])
        settings = Settings(**spec["settings"])
        plugins = Plugins()
        if spec.get("tasks") is not None:
            suite: Any = TaskFileSuite(settings, [Task.model_validate(t) for t in spec["tasks"]])
        else:
            suite = plugins.catalogue.get("task_suites", spec["suite"])(settings, **spec.get("suite_options", {}))
        plan = EvalPlan(suite=suite, tasks=[], policy=spec["policy"], policy_options=spec["policy_options"],
                        judge=spec["judge"], out=Path(spec["out"]), record_blocklist=spec["record_blocklist"])
        self.evaluation = Evaluation(plan, settings, plugins)
        plan.out.mkdir(parents=True, exist_ok=True)
        await suite.setup()
        # The suite's tasks as this worker sees them: a suite that serves its site (the demo
        # shop) points them at its own server here, not at the driver's.
        self.local_tasks = {t.id: t for t in suite.tasks()}
        self.host = BrowserHost(settings, launch_hook=plugins.browser_launch_options)
        await self.host.start()
        self.judge = plugins.catalogue.get("judges", spec["judge"])(settings)
        await self.configure(spec["policy"], spec["policy_options"])
        return os.getpid()

    async def configure(self, policy: str, policy_options: dict[str, Any], max_steps: Optional[int] = None) -> None:
        """Use a new policy (and step limit) from now on: RL rollouts name each new adapter."""
        assert self.evaluation is not None, "start() first"
        ev = self.evaluation
        if max_steps is not None:
            ev.settings = ev.settings.with_overrides(max_steps=max_steps)
        old, self.policies = self.policies, asyncio.Queue()
        make = ev.plugins.catalogue.get("policies", policy)
        for _ in range(max(1, self.spec["contexts"])):
            self.policies.put_nowait(make(ev.settings, **policy_options))
        while old is not None and not old.empty():
            await old.get_nowait().close()

    async def set_out(self, out: str) -> None:
        """Write the next episodes' run folders under ``out`` (each RL iteration has its own)."""
        assert self.evaluation is not None, "start() first"
        from .runstore import RunStore

        self.evaluation.plan.out = Path(out)
        self.evaluation.store = RunStore(Path(out) / "runs")

    async def episode(self, task: dict[str, Any], n: int, with_trajectory: bool = False) -> dict[str, Any]:
        assert self.evaluation is not None and self.policies is not None, "start() first"
        policy = await self.policies.get()
        try:
            await self.host.ensure_running()
            the_task = self.local_tasks.get(task["id"]) or Task.model_validate(task)
            record, traj = await self.evaluation.episode(self.host, policy, self.judge, the_task, n)
        finally:
            self.policies.put_nowait(policy)
        return {"record": record.__dict__, "trajectory": traj.model_dump(mode="json") if with_trajectory else None}

    async def close(self) -> None:
        if self.policies is not None:
            while not self.policies.empty():
                await self.policies.get_nowait().close()
        if self.host is not None:
            await self.host.close()
        if self.evaluation is not None:
            await self.evaluation.plan.suite.teardown()


def lost_record(task: Task, n: int) -> EpisodeRecord:
    return EpisodeRecord(key=f"{task.id}#{n}", task_id=task.id, episode=n, status="infra_error", success=None,
                         score=0.0, steps=0, seconds=0.0, failure="infra.worker_lost", answer=None, run_dir=None)


class WorkerPool:
    """Ray actors running :class:`EpisodeWorker`, with the bookkeeping of dead ones.

    ``submit`` runs episodes on the least-busy live worker; ``drain`` yields each result
    (or the episode to retry) as it finishes. Used by the evaluation and by RL rollouts.
    """

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

    async def configure(self, policy: str, policy_options: dict[str, Any], max_steps: Optional[int] = None) -> None:
        """Switch every worker (and the workers started later) to ``policy``."""
        self.spec = {**self.spec, "policy": policy, "policy_options": policy_options}
        if max_steps is not None:
            self.spec["settings"] = {**self.spec["settings"], "max_steps": max_steps}
        await asyncio.gather(*[_awaited(a.configure.remote(policy, policy_options, max_steps)) for a in self.busy])

    def free_worker(self) -> Any:
        live = [a for a, n in self.busy.items() if n < max(1, self.options.contexts)]
        return min(live, key=lambda a: self.busy[a]) if live else None

    def run(self, actor: Any, task: Task, n: int, with_trajectory: bool) -> "asyncio.Future[Any]":
        self.busy[actor] += 1
        ref = actor.episode.remote(task.model_dump(mode="json"), n, with_trajectory)

        async def wait() -> Any:
            return await ref

        return asyncio.ensure_future(wait())

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


def worker_spec(plan: EvalPlan, settings: Settings, contexts: int) -> dict[str, Any]:
    suite = plan.suite
    file_tasks = [t.model_dump(mode="json") for t in suite.tasks()] if isinstance(suite, TaskFileSuite) else None
    return {
        "cwd": os.getcwd(), "settings": settings.model_dump(), "suite": suite.name, "suite_options": suite.options,
        "tasks": file_tasks, "policy": plan.policy, "policy_options": plan.policy_options, "judge": plan.judge,
        "out": str(plan.out), "record_blocklist": plan.record_blocklist, "contexts": contexts,
    }


async def run_on_pool(pool: WorkerPool, items: list[tuple[Any, Task, int]], max_attempts: int, with_trajectory: bool,
                      on_result: Callable[[Any, Task, int, Optional[dict[str, Any]]], None]) -> int:
    """Run ``items`` (key, task, seed) on ``pool``; ``on_result(key, task, n, result)`` gets each
    result, or None for an episode whose attempts ran out. Returns how many episodes were retried."""
    ray = pool.ray
    pending = deque(items)
    attempts: Counter = Counter()
    inflight: dict[asyncio.Future, tuple[Any, Any, Task, int]] = {}
    retried = 0
    while pending or inflight:
        while pending:
            actor = pool.free_worker()
            if actor is None:
                break
            key, task, n = pending.popleft()
            inflight[pool.run(actor, task, n, with_trajectory)] = (actor, key, task, n)
        if not inflight:
            raise InfraError("every Ray worker died and none could be replaced", code="worker_lost")
        done, _ = await asyncio.wait(list(inflight), return_when=asyncio.FIRST_COMPLETED)
        for fut in done:
            actor, key, task, n = inflight.pop(fut)
            pool.finished(actor)
            err = fut.exception()
            if err is None:
                on_result(key, task, n, fut.result())
                continue
            if _is_actor_death(ray, err):
                await pool.lose(actor)
            attempts[key] += 1
            if attempts[key] < max_attempts:
                retried += 1
                pending.appendleft((key, task, n))
            else:
                on_result(key, task, n, None)
    return retried


class RayEvaluation(Evaluation):
    """An :class:`Evaluation` whose episodes run on Ray actors (same files, same summary)."""

    def __init__(self, plan: EvalPlan, settings: Settings, plugins: Plugins,
                 on_record: Optional[Callable[[EpisodeRecord], None]] = None, options: Optional[RayOptions] = None):
        super().__init__(plan, settings, plugins, on_record=on_record)
        self.options = options or RayOptions()
        self.pool: Optional[WorkerPool] = None

    async def run(self) -> dict[str, Any]:
        self.plan.out.mkdir(parents=True, exist_ok=True)
        items = self.pending()
        self.pool = WorkerPool(worker_spec(self.plan, self.settings, self.options.contexts),
                               min(self.plan.workers, max(1, len(items))), self.options)
        retried = 0
        if items:
            try:
                await self.pool.start()

                def on_result(key: Any, task: Task, n: int, result: Optional[dict[str, Any]]) -> None:
                    self.add_record(EpisodeRecord(**result["record"]) if result else lost_record(task, n))

                retried = await run_on_pool(self.pool, [(f"{t.id}#{n}", t, n) for t, n in items],
                                            self.options.max_attempts, False, on_result)
            finally:
                await self.pool.close()
        return self.write_summary(backend="ray", workers_lost=self.pool.workers_lost, episodes_retried=retried)
