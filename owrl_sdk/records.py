"""What a set of judged episodes leaves: one :class:`EpisodeRecord` per episode (a line of
``episodes.jsonl``), read back with :func:`read_records` and summed up by :func:`summarise`
(success rate with its :func:`wilson` interval, per task too).

Plain data, below the runner, the evaluation and the report pages, which all read it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from .documents import json_lines

__all__ = ["EpisodeRecord", "read_records", "summarise", "wilson"]


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


def read_records(path: Path) -> list[EpisodeRecord]:
    if not path.exists():
        return []
    out = []
    for line in json_lines(path.read_text(encoding="utf-8")):
        if not line.strip():
            continue
        try:
            out.append(EpisodeRecord(**json.loads(line)))
        except (json.JSONDecodeError, TypeError):
            continue  # a line cut short by a crash: that episode runs again
    return out
