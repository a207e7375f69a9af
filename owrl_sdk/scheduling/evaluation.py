"""Evaluation: many episodes of a suite, run by an executor (:mod:`owrl_sdk.scheduling.executors`), judged and summarised.

``DIR/episodes.jsonl`` gets one line per finished episode (appended as each ends), so an
interrupted evaluation resumes: episodes already in the file are skipped.
``DIR/summary.json`` holds the totals. Infrastructure errors are counted apart and left
out of the success rate: they are the machinery's failures, not the policy's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from owrl_sdk.contract.components import TaskSuite
from owrl_sdk.config import Settings
from owrl_sdk.scheduling.executors import Executor, LocalExecutor, NamedPolicy, WorkItem, Workload
from owrl_sdk.contract.plugins import Plugins
from owrl_sdk.formats.records import EpisodeRecord, episode_log, read_records, summarise, wilson
from owrl_sdk.types import Task

__all__ = ["EpisodeRecord", "EvalPlan", "Evaluation", "TaskFileSuite", "read_records", "summarise", "wilson"]


class TaskFileSuite(TaskSuite):
    """The tasks of a file (owrl JSONL or a public benchmark's records)."""

    name = "file"

    def __init__(self, settings: Settings, tasks: list[Task], **options: Any):
        super().__init__(settings, **options)
        self._tasks = tasks

    def tasks(self) -> list[Task]:
        return list(self._tasks)


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


class Evaluation:
    """Runs an :class:`EvalPlan` on an executor; ``on_record`` is called as each episode finishes.

    ``executor``: an :class:`owrl_sdk.scheduling.executors.Executor` not yet started (default: the
    ``local`` one, with the plan's workers and ``browser_per_worker``). Every worker gets its
    own instance of the plan's policy (:class:`owrl_sdk.scheduling.executors.NamedPolicy`).
    """

    def __init__(self, plan: EvalPlan, settings: Settings, plugins: Plugins,
                 on_record: Optional[Callable[[EpisodeRecord], None]] = None, executor: Optional[Executor] = None):
        self.plan = plan
        self.settings = settings
        self.plugins = plugins
        self.on_record = on_record
        self.episodes_file = plan.out / "episodes.jsonl"
        self.log = episode_log(self.episodes_file)
        self.executor = executor or LocalExecutor(settings, plugins, plan.workers,
                                                  browser_per_worker=plan.browser_per_worker)

    def pending(self) -> list[tuple[Task, int]]:
        wanted = {f"{t.id}#{n}": (t, n) for t in self.plan.tasks for n in range(self.plan.episodes)}
        return [wanted[key] for key in self.log.pending(list(wanted))]

    def workload(self) -> Workload:
        plan = self.plan
        return Workload(suite=plan.suite, policy=NamedPolicy(plan.policy, dict(plan.policy_options)),
                        judge=plan.judge, out=plan.out, record_blocklist=plan.record_blocklist)

    async def run(self) -> dict[str, Any]:
        self.plan.out.mkdir(parents=True, exist_ok=True)
        items = [WorkItem(task, n) for task, n in self.pending()]
        executor = self.executor
        try:
            if items:
                await executor.start(self.workload())
                await executor.run(items, lambda result: self.add_record(result.record))
        finally:
            await executor.close()
        return self.write_summary(**executor.stats())

    def write_summary(self, **extra: Any) -> dict[str, Any]:
        """Totals over the plan's tasks in ``episodes.jsonl``, written to ``summary.json``."""
        wanted = {t.id for t in self.plan.tasks}
        summary = summarise([r for r in self.log.records() if r.task_id in wanted])
        summary.update(suite=self.plan.suite.name, policy=self.plan.policy, judge=self.plan.judge, **extra)
        (self.plan.out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
        return summary

    def add_record(self, record: EpisodeRecord) -> None:
        """Append one finished episode to ``episodes.jsonl`` and report it (its answer and
        failure scrubbed of secrets, like everything owrl writes)."""
        record = self.log.append(record.__dict__)
        if self.on_record:
            self.on_record(record)
