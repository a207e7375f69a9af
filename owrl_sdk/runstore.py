"""Run folders: ``runs/<timestamp>-<slug>/`` written step by step.

Layout: ``trajectory.json`` (owrl.trajectory/1, rewritten atomically after every step,
so a crash loses at most the step in flight), ``screenshots/NNNN.jpg``, ``result.json``
once the episode ended, ``trace.zip`` and ``downloads/`` when the environment makes them.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from pathlib import Path
from typing import Optional, Union

from .documents import save_trajectory
from .types import Step, Trajectory


def slugify(text: str, limit: int = 40) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:limit].rstrip("-") or "task"


class RunDir:
    def __init__(self, path: Path):
        self.path = path
        (path / "screenshots").mkdir(parents=True, exist_ok=True)

    @property
    def trajectory_file(self) -> Path:
        return self.path / "trajectory.json"

    def __call__(self, trajectory: Trajectory, step: Optional[Step]) -> None:
        """The loop's sink: write the step's screenshot, then the whole trajectory."""
        if step is not None and step.observation.screenshot and not step.observation.screenshot_file:
            name = f"screenshots/{step.index:04d}.jpg"
            (self.path / name).write_bytes(step.observation.screenshot)
            step.observation.screenshot_file = name
        save_trajectory(trajectory, self.trajectory_file)
        if trajectory.outcome is not None and step is None:
            self.write_result(trajectory)

    def write_result(self, trajectory: Trajectory) -> None:
        out = trajectory.outcome
        result = {
            "task_id": trajectory.task.id,
            "status": out.status if out else None,
            "answer": out.answer if out else None,
            "failure": out.failure.model_dump() if out and out.failure else None,
            "steps": len(trajectory.steps),
            "reward": trajectory.reward,
            "started_at": trajectory.started_at,
            "ended_at": trajectory.ended_at,
        }
        tmp = self.path / "result.json.tmp"
        tmp.write_text(json.dumps(result, indent=2), encoding="utf-8")
        tmp.replace(self.path / "result.json")


class RunStore:
    def __init__(self, root: Union[str, Path] = "runs"):
        self.root = Path(root)

    def new_run(self, intent: str) -> RunDir:
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        base = f"{stamp}-{slugify(intent)}"
        self.root.mkdir(parents=True, exist_ok=True)
        for n in range(1000):
            path = self.root / (base if n == 0 else f"{base}-{n}")
            try:
                path.mkdir()
            except FileExistsError:
                continue
            return RunDir(path)
        raise RuntimeError(f"cannot create a run folder under {self.root}")
