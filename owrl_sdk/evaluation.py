"""Evaluation: many episodes of a suite on a pool of browser contexts, judged and summarised.

``DIR/episodes.jsonl`` gets one line per finished episode (appended as each ends), so an
interrupted evaluation resumes: episodes already in the file are skipped.
``DIR/summary.json`` holds the totals. Infrastructure errors are counted apart and left
out of the success rate: they are the machinery's failures, not the policy's.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from . import secrets
from .blocklist import Blocklist, host_of
from .components import TaskSuite
from .config import Settings
from .loop import Episode, EpisodeLimits
from .plugins import Plugins
from .runstore import RunStore
from .types import Task, Trajectory


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a success rate."""
    if n == 0:
        return (0.0, 0.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


class TaskFileSuite(TaskSuite):
    """The tasks of a file (owrl JSONL or a public benchmark's records)."""

    name = "file"

    def __init__(self, settings: Settings, tasks: list[Task], **options: Any):
        super().__init__(settings, **options)
        self._tasks = tasks

    def tasks(self) -> list[Task]:
        return list(self._tasks)


@dataclass
class EpisodeRecord:
    key: str
    task_id: str
    episode: int
    status: str
    success: Optional[bool]
    score: float
    steps: int
    seconds: float
    failure: Optional[str]
    answer: Optional[str]
    run_dir: Optional[str]

    @property
    def infra(self) -> bool:
        return self.status == "infra_error"


@dataclass
class EvalPlan:
    suite: TaskSuite
    tasks: list[Task]
    episodes: int = 1
    workers: int = 1
    policy: str = "oracle"
    policy_options: dict[str, Any] = field(default_factory=dict)
    judge: str = "composite"
    out: Path = Path("eval")
    #: One Chromium per worker instead of one shared by all workers' contexts.
    browser_per_worker: bool = False
    #: Record hosts that fail with network errors in the blocklist.
    record_blocklist: bool = True


def summarise(records: list[EpisodeRecord]) -> dict[str, Any]:
    def block(rs: list[EpisodeRecord]) -> dict[str, Any]:
        judged = [r for r in rs if not r.infra]
        wins = sum(1 for r in judged if r.success)
        low, high = wilson(wins, len(judged))
        return {
            "episodes": len(rs),
            "successes": wins,
            "success_rate": wins / len(judged) if judged else 0.0,
            "ci95": [low, high],
            "mean_score": sum(r.score for r in judged) / len(judged) if judged else 0.0,
            "infra_errors": len(rs) - len(judged),
            "mean_steps": sum(r.steps for r in rs) / len(rs) if rs else 0.0,
            "mean_seconds": sum(r.seconds for r in rs) / len(rs) if rs else 0.0,
        }

    per_task: dict[str, list[EpisodeRecord]] = {}
    for r in records:
        per_task.setdefault(r.task_id, []).append(r)
    summary = block(records)
    summary["per_task"] = {tid: block(rs) for tid, rs in sorted(per_task.items())}
    return summary


def read_records(path: Path) -> list[EpisodeRecord]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            out.append(EpisodeRecord(**json.loads(line)))
        except (json.JSONDecodeError, TypeError):
            continue  # a line cut short by a crash: that episode runs again
    return out


class Evaluation:
    """Runs an :class:`EvalPlan`; ``on_record`` is called as each episode finishes."""

    def __init__(self, plan: EvalPlan, settings: Settings, plugins: Plugins,
                 on_record: Optional[Callable[[EpisodeRecord], None]] = None):
        self.plan = plan
        self.settings = settings
        self.plugins = plugins
        self.on_record = on_record
        self.episodes_file = plan.out / "episodes.jsonl"
        #: Hosts whose network failed are recorded here (training skips them).
        self.blocklist: Optional[Blocklist] = Blocklist() if plan.record_blocklist else None
        self.store = RunStore(plan.out / "runs")

    def pending(self) -> list[tuple[Task, int]]:
        done = {r.key for r in read_records(self.episodes_file)}
        return [(t, n) for t in self.plan.tasks for n in range(self.plan.episodes) if f"{t.id}#{n}" not in done]

    async def run(self) -> dict[str, Any]:
        from .browser import BrowserHost

        self.plan.out.mkdir(parents=True, exist_ok=True)
        queue: asyncio.Queue[tuple[Task, int]] = asyncio.Queue()
        for item in self.pending():
            queue.put_nowait(item)
        suite = self.plan.suite
        await suite.setup()
        n_workers = max(1, self.plan.workers)
        hosts = [BrowserHost(self.settings, launch_hook=self.plugins.browser_launch_options)
                 for _ in range(n_workers if self.plan.browser_per_worker else 1)]
        try:
            for host in hosts:
                await host.start()
            workers = [asyncio.create_task(self._worker(hosts[i % len(hosts)], queue)) for i in range(n_workers)]
            await asyncio.gather(*workers)
        finally:
            for host in hosts:
                await host.close()
            await suite.teardown()
        return self.write_summary()

    def write_summary(self, **extra: Any) -> dict[str, Any]:
        """Totals over the plan's tasks in ``episodes.jsonl``, written to ``summary.json``."""
        wanted = {t.id for t in self.plan.tasks}
        summary = summarise([r for r in read_records(self.episodes_file) if r.task_id in wanted])
        summary.update(suite=self.plan.suite.name, policy=self.plan.policy, judge=self.plan.judge, **extra)
        (self.plan.out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
        return summary

    def add_record(self, record: EpisodeRecord) -> None:
        """Append one finished episode to ``episodes.jsonl`` and report it (its answer and
        failure scrubbed of secrets, like everything owrl writes)."""
        record = EpisodeRecord(**secrets.scrub(record.__dict__))
        with self.episodes_file.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record.__dict__) + "\n")
        if self.on_record:
            self.on_record(record)

    async def _worker(self, host: Any, queue: "asyncio.Queue[tuple[Task, int]]") -> None:
        catalogue = self.plugins.catalogue
        policy = catalogue.get("policies", self.plan.policy)(self.settings, **self.plan.policy_options)
        judge = catalogue.get("judges", self.plan.judge)(self.settings)
        try:
            while True:
                try:
                    task, n = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                await host.ensure_running()  # one relaunch even when several workers notice
                record, _ = await self.episode(host, policy, judge, task, n)
                self.add_record(record)
        finally:
            await policy.close()

    async def episode(self, host: Any, policy: Any, judge: Any, task: Task, n: int) -> tuple[EpisodeRecord, Trajectory]:
        """One judged episode of ``task`` (seed ``n``) in a fresh context of ``host``."""
        s = self.settings
        task = task.model_copy(deep=True, update={"metadata": {**task.metadata, "seed": n, "episode": n}})
        run = self.store.new_run(f"{task.id}-{n}")
        started = time.perf_counter()
        env = await host.new_env(run_dir=run.path)
        env.secret_lookup = self.plugins.resolve_secret
        episode = Episode(
            task=task, env=env, policy=policy,
            memory=self.plugins.catalogue.get("memories", s.memory)(s),
            tools=list(self.plugins.catalogue.items["tools"].values()),
            hooks=self.plugins.for_task(task, extra=[self.plan.suite]),
            limits=EpisodeLimits(max_steps=s.max_steps, max_parse_errors=s.max_parse_errors,
                                 step_timeout=s.step_timeout, episode_timeout=s.episode_timeout,
                                 feedback_chars=s.feedback_chars, max_unchanged_repeats=s.max_unchanged_repeats),
            sinks=[run],
        )
        try:
            traj = await episode.run()
            if traj.outcome is not None and traj.outcome.status != "infra_error":
                try:
                    check = await self.plan.suite.check(env, task, traj)
                except Exception as err:  # noqa: BLE001 - a check that cannot read the page
                    traj.warnings.append(f"suite check failed: {type(err).__name__}: {err}")
                    check = None
                if check is not None:
                    traj.metadata["suite_check"] = check.model_dump()
        finally:
            await asyncio.shield(env.close())
        traj.judgements.append(await judge.judge(traj))
        traj.metadata["run_dir"] = str(run.path)
        failure = traj.outcome.failure if traj.outcome else None
        if failure is not None and failure.category == "network" and self.blocklist is not None:
            self.blocklist.add(host_of(task.start_url), failure.kind)
        run(traj, None)
        return _record(task, n, traj, time.perf_counter() - started, str(run.path)), traj


def _record(task: Task, n: int, traj: Trajectory, seconds: float, run_dir: str) -> EpisodeRecord:
    outcome = traj.outcome
    judgement = traj.judgements[-1]
    infra = outcome is not None and outcome.status == "infra_error"
    return EpisodeRecord(
        key=f"{task.id}#{n}", task_id=task.id, episode=n,
        status=outcome.status if outcome else "aborted",
        success=None if infra else bool(judgement.success),
        score=judgement.score, steps=len(traj.steps), seconds=round(seconds, 3),
        failure=outcome.failure.kind if outcome and outcome.failure else None,
        answer=outcome.answer if outcome else None, run_dir=run_dir,
    )
