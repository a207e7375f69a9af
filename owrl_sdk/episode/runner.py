"""One way to run an episode: where every client turns a task, an environment and a policy
into an :class:`owrl_sdk.episode.loop.Episode`.

- :func:`episode_limits` reads the loop's limits from :class:`Settings` (the only place
  that copies them field by field).
- :func:`build_episode` assembles an ``Episode``: the memory named by the settings (or
  the one given), the catalogue's tools, the lifecycle hooks of the task (site adapters
  matched to its start URL, plus ``extra_hooks``: this episode's own plugins, such as its
  run folder, a task suite, a live view or a job log).
- :class:`StepCallback` makes a callable ``(trajectory, step or None)`` one of those plugins
  (``Agent.run(on_step=...)``).
- :func:`run_episode` builds one, runs it and closes the environment (shielded from
  cancellation); ``before_close`` sees the environment while the page is still open.
- :class:`JudgedEpisodes` is one judged episode as an evaluation runs it: a new run
  folder, a fresh context of a :class:`BrowserHost`, secrets looked up through the
  plugins, the suite's ``start`` as a hook and its ``check`` before the page closes, the
  judge, the blocklist for network failures, an :class:`EpisodeRecord`.

:class:`owrl_sdk.Agent`, :class:`owrl_sdk.scheduling.evaluation.Evaluation` (through the executors of
:mod:`owrl_sdk.scheduling.executors`), the Ray workers, RL rollouts and ``owrl serve`` all come here.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable, Optional

from owrl_sdk.safety.blocklist import Blocklist, host_of
from owrl_sdk.config import Settings
from owrl_sdk.contract.env import Environment
from owrl_sdk.episode.loop import Episode, EpisodeLimits
from owrl_sdk.contract.memory import Memory
from owrl_sdk.contract.plugins import Plugins
from owrl_sdk.contract.policy import Policy
from owrl_sdk.formats.records import EpisodeRecord
from owrl_sdk.episode.runstore import RunDir, RunStore
from owrl_sdk.safety.secrets import scrub
from owrl_sdk.contract.tools import Tool
from owrl_sdk.types import Step, Task, Trajectory


def episode_limits(settings: Settings, **overrides: Any) -> EpisodeLimits:
    """The loop's limits as the settings give them (``overrides`` win, e.g. ``max_steps``)."""
    fields: dict[str, Any] = dict(
        max_steps=settings.max_steps,
        max_parse_errors=settings.max_parse_errors,
        step_timeout=settings.step_timeout,
        episode_timeout=settings.episode_timeout,
        feedback_chars=settings.feedback_chars,
        max_unchanged_repeats=settings.max_unchanged_repeats,
        change_feedback=settings.change_feedback,
    )
    fields.update({k: v for k, v in overrides.items() if v is not None})
    return EpisodeLimits(**fields)


class StepCallback:
    """A callable ``callback(trajectory, step)`` as a per-episode plugin: called with each
    step as it ends (``step_end``) and with ``None`` once the outcome is set (``episode_end``)."""

    def __init__(self, callback: Callable[[Trajectory, Optional[Step]], None]):
        self.callback = callback

    def step_end(self, step: Step, trajectory: Trajectory) -> None:
        self.callback(trajectory, step)

    def episode_end(self, trajectory: Trajectory) -> None:
        self.callback(trajectory, None)

    def reads_changes(self) -> bool:
        """A callback sees every step as it ends: its change feedback is computed."""
        return True


class ChangeReader:
    """A per-episode plugin that asks for change feedback (the ``reads_changes`` hook): what a
    judge that reads it adds to the episodes it judges."""

    def reads_changes(self) -> bool:
        return True


def build_episode(
    task: Task,
    env: Environment,
    policy: Policy,
    settings: Settings,
    plugins: Plugins,
    *,
    memory: Optional[Memory] = None,
    tools: Optional[list[Tool]] = None,
    extra_hooks: Iterable[Any] = (),
    limits: Optional[EpisodeLimits] = None,
) -> Episode:
    """The one constructor of :class:`Episode` outside the loop's own tests.

    ``memory`` defaults to a new instance of the ``memory`` setting's strategy, ``tools`` to
    every registered tool, ``limits`` to :func:`episode_limits`. ``extra_hooks`` are this
    episode's own plugins (its :class:`~owrl_sdk.episode.runstore.RunDir`, a task suite, a live view; ``None`` entries
    are left out): objects whose methods named after a lifecycle hook are registered for
    this episode only (``Plugins.for_task(extra=...)``), called before the global plugins'
    and the matched site adapters', in the order given, so the run folder listed first has
    written a step before the next one sees it.
    """
    extras = [h for h in extra_hooks if h is not None]
    return Episode(
        task=task,
        env=env,
        policy=policy,
        memory=memory if memory is not None else plugins.catalogue.get("memories", settings.memory)(settings),
        tools=list(tools) if tools is not None else list(plugins.catalogue.items["tools"].values()),
        # pluggy calls the last registered of equal priority first: registered in reverse, called in order
        hooks=plugins.for_task(task, extra=extras[::-1]),
        limits=limits if limits is not None else episode_limits(settings),
    )


async def run_episode(
    task: Task,
    env: Environment,
    policy: Policy,
    settings: Settings,
    plugins: Plugins,
    *,
    before_close: Optional[Callable[[Environment, Trajectory], Awaitable[None]]] = None,
    **options: Any,
) -> Trajectory:
    """Build (with :func:`build_episode`'s ``options``) and run one episode, then close ``env``.

    ``before_close(env, trajectory)`` runs after the loop while the page is still open. The
    environment is closed even on cancellation (the close itself is shielded).
    """
    if hasattr(env, "secret_lookup"):
        env.secret_lookup = plugins.resolve_secret
    episode = build_episode(task, env, policy, settings, plugins, **options)
    try:
        trajectory = await episode.run()
        if before_close is not None:
            await before_close(env, trajectory)
    finally:
        await asyncio.shield(env.close())
        # a trace is written as the context closes, after episode_end saved the run folder: its
        # run folder checks it again here, also when the episode was cancelled (nothing after would)
        if episode.trajectory.outcome is not None:
            for hook in options.get("extra_hooks") or ():
                if isinstance(hook, RunDir):
                    try:
                        hook.save(episode.trajectory)
                    except Exception as err:  # noqa: BLE001 - must not replace the episode's own exception
                        episode.trajectory.warnings.append(f"saving the run after the browser closed failed: "
                                                           f"{type(err).__name__}: {err}")
    return trajectory


# ============================================================================ judged episodes


def episode_key(task: Task, n: int) -> str:
    return f"{task.id}#{n}"


def episode_record(task: Task, n: int, traj: Trajectory, seconds: float, run_dir: Optional[str]) -> EpisodeRecord:
    """The record of a judged trajectory (infra errors have no success: they are not the policy's)."""
    outcome = traj.outcome
    judgement = traj.judgements[-1]
    infra = outcome is not None and outcome.status == "infra_error"
    return EpisodeRecord(
        key=episode_key(task, n), task_id=task.id, episode=n,
        status=outcome.status if outcome else "aborted",
        success=None if infra else bool(judgement.success),
        score=judgement.score, steps=len(traj.steps), seconds=round(seconds, 3),
        failure=outcome.failure.kind if outcome and outcome.failure else None,
        answer=outcome.answer if outcome else None, run_dir=run_dir,
    )


def failed_record(task: Task, n: int, failure: str, seconds: float = 0.0,
                  run_dir: Optional[str] = None) -> EpisodeRecord:
    """The record of an episode the machinery could not run or judge (an ``infra_error``)."""
    return EpisodeRecord(key=episode_key(task, n), task_id=task.id, episode=n, status="infra_error", success=None,
                         score=0.0, steps=0, seconds=round(seconds, 3), failure=failure, answer=None, run_dir=run_dir)


class JudgedEpisodes:
    """Judged episodes of one suite, written under ``out/runs``.

    ``settings`` and ``out`` may be changed between episodes (RL sets a new horizon and a
    folder per iteration). The judge is built once, from its plugin name or given.
    """

    def __init__(self, settings: Settings, plugins: Plugins, suite: Any, judge: Any, out: Path,
                 record_blocklist: bool = True, tools: Optional[list[Tool]] = None):
        self.settings = settings
        self.plugins = plugins
        self.suite = suite
        #: The tools the episodes offer (None: every registered tool).
        self.tools = tools
        self.judge = plugins.catalogue.build("judges", judge, settings) if isinstance(judge, str) else judge
        #: Hosts whose network failed are recorded here (training skips them).
        self.blocklist: Optional[Blocklist] = Blocklist() if record_blocklist else None
        self.set_out(out)

    def set_out(self, out: Path) -> None:
        """Write the next episodes' run folders under ``out/runs``."""
        self.out = Path(out)
        self.store = RunStore(self.out / "runs")

    async def run(self, host: Any, policy: Policy, task: Task, n: int) -> tuple[EpisodeRecord, Trajectory]:
        """One judged episode of ``task`` (seed ``n``) in a fresh context of ``host``."""
        task = task.model_copy(deep=True, update={"metadata": {**task.metadata, "seed": n, "episode": n}})
        task = self.plugins.resolve_task(task)  # a plugin's scheme (demo:shop/), as owrl run reads it
        run = self.store.new_run(f"{task.id}-{n}")
        started = time.perf_counter()
        env = await host.new_env(run_dir=run.path)

        async def check(env: Any, traj: Trajectory) -> None:
            if traj.outcome is None or traj.outcome.status == "infra_error":
                return
            try:
                verdict = await self.suite.check(env, task, traj)
            except Exception as err:  # noqa: BLE001 - a check that cannot read the page
                traj.warnings.append(f"suite check failed: {type(err).__name__}: {err}")
                verdict = None
            if verdict is not None:
                traj.metadata["suite_check"] = verdict.model_dump()

        readers = [ChangeReader()] if getattr(self.judge, "reads_changes", True) else []
        traj = await run_episode(task, env, policy, self.settings, self.plugins, before_close=check,
                                 extra_hooks=[run, self.suite, *readers], tools=self.tools)
        # the judge reads what the run folder will hold: a model judge may be a remote endpoint
        traj.judgements.append(await self.judge.judge(scrub(traj)))
        traj.metadata["run_dir"] = str(run.path)
        failure = traj.outcome.failure if traj.outcome else None
        if failure is not None and failure.category == "network" and self.blocklist is not None:
            self.blocklist.add(host_of(task.start_url), failure.kind)
        run.save(traj)
        return episode_record(task, n, traj, time.perf_counter() - started, str(run.path)), traj
