"""What a set of judged episodes leaves: one :class:`EpisodeRecord` per episode (a line of
``episodes.jsonl``), read back with :func:`read_records` and summed up by :func:`summarise`
(success rate with its :func:`wilson` interval, per task too); and :class:`ResultLog`, the
append-only file of results by key that an evaluation (``episodes.jsonl``) and a batch
(``rows.jsonl``, ``commits.jsonl``) resume from.

Plain data, below the runner, the evaluation and the report pages, which all read it.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Generic, Optional, TypeVar

from owrl_sdk.safety import secrets
from owrl_sdk.formats.documents import json_lines

__all__ = ["EpisodeRecord", "ResultLog", "episode_log", "read_records", "summarise", "wilson"]

R = TypeVar("R")


@dataclass
class EpisodeRecord:
    """One finished, judged episode: a line of ``episodes.jsonl``."""

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


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a success rate."""
    if n == 0:
        return (0.0, 0.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


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


class ResultLog(Generic[R]):
    """An append-only JSONL file of results, one line per finished item, written as each
    ends: what an interrupted run resumes from.

    ``parse`` turns a line's object into a result (raising ``TypeError``, ``KeyError`` or
    ``ValueError`` for one that is not), ``key`` names the item it belongs to. A line cut short
    by a crash, or one that is not a result, is skipped: its item counts as not done and runs
    again. Where a key has several lines the last one stands. Every line is scrubbed of
    secrets before it is written; ``durable`` lines are on disk (fsync) before ``append``
    returns, for a line that must survive a power cut (a batch row's point of no return).
    """

    def __init__(self, path: Path, parse: Callable[[dict[str, Any]], R], key: Callable[[R], str], *,
                 durable: bool = False):
        self.path = Path(path)
        self.parse = parse
        self.key = key
        self.durable = durable

    def records(self) -> list[R]:
        """Every readable result, in the order written."""
        if not self.path.exists():
            return []
        out = []
        for line in json_lines(self.path.read_text(encoding="utf-8", errors="replace")):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                if not isinstance(data, dict):
                    raise TypeError("not an object")
                out.append(self.parse(data))
            except (json.JSONDecodeError, TypeError, KeyError, ValueError):
                continue  # a line cut short by a crash: that item runs again
        return out

    def latest(self) -> dict[str, R]:
        """The last result of each key."""
        return {self.key(r): r for r in self.records()}

    def pending(self, keys: list[str]) -> list[str]:
        """``keys`` with no result yet, in their order."""
        done = self.latest()
        return [k for k in keys if k not in done]

    def append(self, data: dict[str, Any]) -> R:
        """Write one result (scrubbed of secrets) and return it as read back."""
        clean = secrets.scrub(data)
        record = self.parse(clean)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(clean, ensure_ascii=False, default=str) + "\n")
            if self.durable:
                fh.flush()
                os.fsync(fh.fileno())
        return record


def episode_log(path: Path) -> ResultLog[EpisodeRecord]:
    """``episodes.jsonl``: an :class:`EpisodeRecord` per finished episode, by its key."""
    return ResultLog(path, lambda data: EpisodeRecord(**data), lambda record: record.key)


def read_records(path: Path) -> list[EpisodeRecord]:
    return episode_log(path).records()
