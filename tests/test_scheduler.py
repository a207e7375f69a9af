"""The one scheduler every executor runs its items on (owrl_sdk.scheduling.executors.schedule).

Its rules are about queues and attempts, not browsers, so these tests give it workers made
here: each "runs" an item by sleeping a moment and answering as told. The executors' own
tests (tests/test_executors.py, tests/scale) run it on real browsers and a real Ray."""

from __future__ import annotations

import asyncio
from typing import Any, Optional

import pytest

from owrl_sdk.scheduling.executors import RETRY, STOP, Workers, WorkersGone, WorkItem, WorkResult, schedule
from owrl_sdk.episode.runner import failed_record
from owrl_sdk.types import Task


def items(n: int) -> list[WorkItem]:
    return [WorkItem(Task(id=f"t{i}", intent="x", start_url="about:blank")) for i in range(n)]


class Scripted(Workers):
    """``names`` workers; ``lose`` maps (task id, attempt) to True where the worker is lost
    under that run; ``die`` names workers that never come back after losing an item."""

    def __init__(self, names: list[str], lose: Optional[set[tuple[str, int]]] = None, die: bool = False):
        self.idle = list(names)
        self.lose = lose or set()
        self.die = die
        self.runs: list[tuple[str, str]] = []  # (worker, task id), in the order they started
        self.most_at_once = self.now = 0

    def claim(self) -> Optional[Any]:
        return self.idle.pop(0) if self.idle else None

    async def run(self, worker: Any, item: WorkItem) -> tuple[WorkResult, bool]:
        self.runs.append((worker, item.task.id))
        self.now += 1
        self.most_at_once = max(self.most_at_once, self.now)
        await asyncio.sleep(0.01)
        self.now -= 1
        attempt = sum(1 for _, t in self.runs if t == item.task.id)
        lost = (item.task.id, attempt) in self.lose
        if not (lost and self.die):
            self.idle.append(worker)
        failure = "infra.browser_crash" if lost else None
        record = failed_record(item.task, 0, failure) if failure else failed_record(item.task, 0, "policy.none")
        return WorkResult(item, record), lost


async def test_every_item_runs_once_and_no_more_at_once_than_there_are_workers():
    workers = Scripted(["a", "b"])
    results, retried = await schedule(items(7), workers, max_attempts=3)
    assert sorted(r.item.task.id for r in results) == [f"t{i}" for i in range(7)]
    assert retried == 0 and len(workers.runs) == 7 and workers.most_at_once == 2


async def test_an_item_whose_worker_was_lost_runs_again_and_the_last_attempt_stands():
    workers = Scripted(["a", "b"], lose={("t1", 1), ("t2", 1), ("t2", 2), ("t2", 3)})
    results, retried = await schedule(items(4), workers, max_attempts=3)
    by_id = {r.item.task.id: r for r in results}
    assert len(results) == 4 and retried == 3  # t1 once, t2 twice (its third attempt is its last)
    assert [t for _, t in workers.runs].count("t1") == 2 and [t for _, t in workers.runs].count("t2") == 3
    assert by_id["t1"].record.failure == "policy.none"  # the retry's result, not the lost one
    assert by_id["t2"].record.failure == "infra.browser_crash"  # attempts ran out: the last one stands


async def test_a_lost_item_goes_to_the_front_of_the_queue():
    workers = Scripted(["a"], lose={("t0", 1)})
    await schedule(items(3), workers, max_attempts=2)
    assert [t for _, t in workers.runs] == ["t0", "t0", "t1", "t2"]


async def test_stop_drops_the_items_not_started_and_lets_those_in_flight_finish():
    workers = Scripted(["a", "b"])
    seen: list[str] = []

    def on_result(result: WorkResult) -> Any:
        seen.append(result.item.task.id)
        return STOP

    results, _ = await schedule(items(6), workers, max_attempts=1, on_result=on_result)
    assert len(workers.runs) == 2 and len(results) == 2 and sorted(seen) == ["t0", "t1"]


async def test_no_worker_left_is_an_error_not_a_hang():
    workers = Scripted(["a"], lose={("t0", 1)}, die=True)
    with pytest.raises(WorkersGone):
        await schedule(items(2), workers, max_attempts=3)


async def test_a_cancelled_run_cancels_the_episodes_in_flight():
    started = asyncio.Event()
    cancelled: list[str] = []

    class Slow(Scripted):
        async def run(self, worker: Any, item: WorkItem) -> tuple[WorkResult, bool]:
            started.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.append(item.task.id)
                raise
            raise AssertionError("not reached")

    task = asyncio.ensure_future(schedule(items(3), Slow(["a", "b"]), max_attempts=1))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(cancelled) == ["t0", "t1"]


async def test_retry_queues_the_item_as_its_next_episode_after_those_waiting():
    """A caller's own retry rule (a batch row's ``--retries``) goes through the scheduler: the
    item runs again as episode + 1 in its group, after the items queued; the result that asked
    for it is not kept, and a lost worker under the retry is counted for the retry alone."""
    workers = Scripted(["a"], lose={("t0", 2)})
    asked: list[tuple[str, int]] = []

    def on_result(result: WorkResult) -> Any:
        asked.append((result.item.task.id, result.item.episode))
        return RETRY if result.item.task.id == "t0" and result.item.episode < 2 else None

    work = [WorkItem(i.task, 0, group=f"g{n}") for n, i in enumerate(items(3))]
    results, retried = await schedule(work, workers, max_attempts=2, on_result=on_result)
    assert [t for _, t in workers.runs] == ["t0", "t1", "t2", "t0", "t0", "t0"]  # the 2nd run lost its worker
    assert asked == [("t0", 0), ("t1", 0), ("t2", 0), ("t0", 1), ("t0", 2)]
    assert [(r.item.task.id, r.item.episode, r.item.group) for r in results] == [("t1", 0, "g1"), ("t2", 0, "g2"), ("t0", 2, "g0")]
    assert retried == 3  # two asked for, one lost worker
