"""RL rollouts on the SDK's executors, chosen by name.

Evaluation, batches and RL play their episodes on the same executors
(:mod:`owrl_sdk.scheduling.executors`): ``local`` (contexts of one browser in this process), ``ray``
(Ray actors, each owning a browser, :mod:`owrl_sdk.scheduling.raybackend`), or any executor a plugin
registers. :class:`ExecutorRollouts` is the trainer's side of that: it starts the executor
once, switches it to each iteration's policy, horizon and output folder, and hands back
the judged trajectories in a stable order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from owrl_sdk.api import (
    ConfigError,
    Executor,
    executor_class,
    failed_trajectory,
    NamedPolicy,
    SharedPolicy,
    Task,
    Trajectory,
    WorkItem,
    Workload,
)

from .serving import PolicySpec


def said(trajectory: Trajectory) -> str:
    """What the policy answered in every step of ``trajectory``, as one string."""
    return "\n".join(s.turn.raw if s.turn.raw is not None else repr(s.turn.calls) for s in trajectory.steps)


class ExecutorRollouts:
    """Rollouts on the executor registered as ``backend``, started on the first ``collect``
    and kept across iterations (the suite is set up once; each ``collect`` writes under its
    own ``out``). ``options`` go to the executor (``ray``: ``address``, ``contexts``,
    ``max_attempts``); an unknown ``backend`` is refused here, naming the known ones.

    The policy is the trainer's in-process, model-backed one, shared by every worker through
    :class:`owrl_sdk.scheduling.executors.SharedPolicy` (its batcher merges the workers' requests; with
    ``lockstep``, a policy that offers ``lockstep(expected)`` cuts each batch only when every
    worker with an episode left has asked, so that a run can be repeated exactly), or a
    served adapter (:class:`~owrl_train.serving.PolicySpec`), which each worker rebuilds as
    an ``openai`` policy. An executor whose workers run in other processes
    (``shares_policy`` false, as ``ray``) takes only the second.
    """

    #: The tools the episodes offer instead of the catalogue's (a subclass with an in-memory
    #: environment sets its own: the RL toy's buttons); the trainer renders its prompts with them.
    tools: Optional[list[Any]] = None

    def __init__(self, suite: Any, settings: Any, plugins: Any, workers: int = 2, judge: str = "composite",
                 lockstep: bool = False, *, backend: str = "local", **options: Any):
        self.suite = suite
        self.settings = settings
        self.plugins = plugins
        self.workers = workers
        self.judge = judge
        self.lockstep = lockstep
        self.backend = backend
        self.executor_cls: type[Executor] = executor_class(plugins, backend)
        self.options = {k: v for k, v in options.items() if v is not None}
        self.executor: Optional[Executor] = None

    @property
    def shares_policy(self) -> bool:
        """Whether the executor's workers can use the trainer's in-process policy."""
        return self.executor_cls.shares_policy

    @property
    def pool(self) -> Any:
        """The executor's worker pool, where it has one (``ray``, once the first rollouts started it)."""
        return getattr(self.executor, "pool", None)

    @property
    def retried(self) -> int:
        """Episodes the executor ran again after their worker was lost."""
        return int(self.executor.stats().get("episodes_retried", 0)) if self.executor is not None else 0

    def _factory(self, policy: Any) -> Any:
        if isinstance(policy, PolicySpec):
            return NamedPolicy(policy.name, dict(policy.options))
        if not self.shares_policy:
            raise ConfigError(f"{self.backend} rollouts need a served policy: set serve_base_url in the RL config "
                              "(their workers run in other processes and cannot share the trainer's in-process model)")
        return SharedPolicy(policy)

    async def collect(self, policy: Any, items: list[tuple[str, Task, int]], max_steps: int,
                      out: Path) -> list[Trajectory]:
        """One episode per (group, task, n), judged; each trajectory with ``metadata['group']``.
        The curriculum sets the horizon (``max_steps``), whatever the suite's own tasks say."""
        factory = self._factory(policy)
        if self.executor is None:
            self.executor = self.executor_cls(self.settings, self.plugins, self.workers, **self.options)
            await self.executor.start(Workload(suite=self.suite, policy=factory, judge=self.judge, out=out,
                                               with_trajectory=True, max_steps=max_steps, tools=self.tools))
        else:
            await self.executor.configure(policy=factory, max_steps=max_steps, out=out)
        work = [WorkItem(task, n, group) for group, task, n in items]
        finished = 0

        def count(_: Any) -> None:
            nonlocal finished
            finished += 1

        # lockstep: every batch waits for each worker that will still ask (those with an item left)
        lockstep = getattr(policy, "lockstep", None) if self.lockstep and isinstance(factory, SharedPolicy) else None
        if lockstep is not None:
            lockstep(lambda: min(self.workers, len(work) - finished))
        try:
            results = await self.executor.run(work, count)
        finally:
            if lockstep is not None:
                lockstep(None)
        info = policy.info() if isinstance(factory, SharedPolicy) else {"name": policy.name,
                                                                         "model": policy.options.get("model")}
        trajectories = []
        for result in results:  # an episode the machinery failed is an infra error, never trained on
            traj = result.trajectory or failed_trajectory(result, info)
            traj.metadata["group"] = result.item.group
            trajectories.append(traj)
        order = {g: i for i, (g, _, _) in enumerate(items)}
        # the episodes of one group may play one page: their answers order them, not who finished first
        trajectories.sort(key=lambda t: (order[t.metadata["group"]], t.task.metadata.get("episode", 0), said(t)))
        return trajectories

    async def close(self) -> None:
        if self.executor is not None:
            executor, self.executor = self.executor, None
            await executor.close()  # tears the suite down too


class BrowserRollouts(ExecutorRollouts):
    """Rollouts on the ``local`` executor: one browser, ``workers`` contexts, in the trainer's process."""

    def __init__(self, suite: Any, settings: Any, plugins: Any, workers: int = 2, judge: str = "composite",
                 lockstep: bool = False):
        super().__init__(suite, settings, plugins, workers, judge, lockstep, backend="local")


class RayRollouts(ExecutorRollouts):
    """Rollouts on the ``ray`` executor: Ray actors, each owning one browser, with a served
    policy (the actors cannot share the trainer's model). Trajectories come back to the
    driver; their run folders (screenshots for the update) are written under ``out``, which
    must be on a volume the trainer can read. A dead actor's episodes run again on another,
    up to ``max_attempts`` tries."""

    def __init__(self, suite: Any, settings: Any, workers: int = 2, judge: str = "composite",
                 address: Optional[str] = None, contexts: int = 1, max_attempts: int = 3, *, plugins: Any):
        super().__init__(suite, settings, plugins, workers, judge, backend="ray", address=address,
                         contexts=contexts, max_attempts=max_attempts)
