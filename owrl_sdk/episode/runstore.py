"""Run folders: ``runs/<timestamp>-<slug>/`` written step by step.

Layout: ``trajectory.json`` (owrl.trajectory/1, rewritten atomically after every step,
so a crash loses at most the step in flight), ``screenshots/NNNN.jpg``, ``result.json`` and
``report.html`` once the episode ended, ``trace.zip`` and ``downloads/`` when the environment makes them.

A :class:`RunDir` is a per-episode plugin (``extra_hooks`` of :func:`owrl_sdk.episode.runner.build_episode`):
its ``step_end`` writes the step's screenshot and rewrites ``trajectory.json``, its
``episode_end`` writes the final trajectory and ``result.json``; a client that changes the
trajectory afterwards (a judgement, ``metadata.run_dir``) writes it again with :meth:`RunDir.save`.

Every JSON file is written through :func:`owrl_sdk.safety.secrets.dumps`, which scrubs each string of
secrets. A trace cannot be scrubbed: once the episode ended, a trace of an episode that used a
secret is deleted (and the trajectory says so) unless traces with secrets were allowed
(``owrl run --trace-with-secrets``, ``Agent.run(trace_with_secrets=True)``).
"""

from __future__ import annotations

import datetime as _dt
import re
import warnings
from pathlib import Path
from typing import Union

from owrl_sdk.safety import secrets
from owrl_sdk.formats.documents import save_trajectory
from owrl_sdk.support.files import write_atomic
from owrl_sdk.formats.report import write_run_report
from owrl_sdk.types import Step, Trajectory


def slugify(text: str, limit: int = 40) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:limit].rstrip("-") or "task"


class RunDir:
    """One run folder, and the episode plugin that writes it."""

    def __init__(self, path: Path, keep_secret_traces: bool = False):
        self.path = path
        #: keep a trace of an episode that used secrets (``--trace-with-secrets``), with a warning
        self.keep_secret_traces = keep_secret_traces
        (path / "screenshots").mkdir(parents=True, exist_ok=True)
        #: placeholders resolved in this process before the run began: any more, and a secret
        #: may have been typed while the trace recorded
        self._resolved_before = secrets.resolution_count()

    @property
    def trajectory_file(self) -> Path:
        return self.path / "trajectory.json"

    def step_end(self, step: Step, trajectory: Trajectory) -> None:
        """The ``step_end`` hook: write the step's screenshot, then the whole trajectory."""
        if step.observation.screenshot and not step.observation.screenshot_file:
            name = f"screenshots/{step.index:04d}.jpg"
            (self.path / name).write_bytes(step.observation.screenshot)
            step.observation.screenshot_file = name
        save_trajectory(trajectory, self.trajectory_file)

    def episode_end(self, trajectory: Trajectory) -> None:
        """The ``episode_end`` hook: the final trajectory and ``result.json``."""
        self.save(trajectory)

    def save(self, trajectory: Trajectory) -> None:
        """Write ``trajectory.json`` (and, once the outcome is set, ``result.json``, after
        deleting a trace that holds secrets)."""
        if trajectory.outcome is not None:
            self.check_traces(trajectory)  # before the trajectory is saved: it carries the warning
        save_trajectory(trajectory, self.trajectory_file)
        if trajectory.outcome is not None:
            self.write_result(trajectory)
            self.write_report()

    def write_report(self) -> None:
        """``report.html``, from the trajectory just written: every run has one, whichever door
        it came through (the CLI, ``--json``, a batch row, Python, the server). A report that
        cannot be written costs the run nothing but a warning."""

        try:
            write_run_report(self.path)
        except Exception as err:  # noqa: BLE001 - the run's own files are written; the page is extra
            warnings.warn(f"{self.path}: report.html not written: {err}", stacklevel=2)

    def write_result(self, trajectory: Trajectory) -> None:
        out = trajectory.outcome
        result = {
            "task_id": trajectory.task.id,
            "status": out.status if out else None,
            "answer": out.answer if out else None,
            "failure": out.failure.model_dump() if out and out.failure else None,
            "inputs": trajectory.inputs,
            "outputs": out.outputs if out else {},
            "steps": len(trajectory.steps),
            "reward": trajectory.reward,
            "started_at": trajectory.started_at,
            "ended_at": trajectory.ended_at,
        }
        write_atomic(self.path / "result.json", secrets.dumps(result, indent=2))

    def check_traces(self, trajectory: Trajectory) -> None:
        """Delete the traces of an episode that used secrets, unless they were allowed; either
        way, say so in the trajectory. An episode used a secret when a placeholder was resolved
        in this process while it ran, or a known secret shows in the trace in a form redaction
        knows (in text; pictures cannot be searched)."""
        traces = sorted(self.path.glob("trace*.zip"))
        if not traces:
            return
        used = secrets.resolution_count() != self._resolved_before or any(secrets.found_in_file(t) for t in traces)
        if not used:
            return
        names = ", ".join(t.name for t in traces)
        if self.keep_secret_traces:
            warning = (f"{names} holds the secrets this episode used in clear (--trace-with-secrets): "
                       "traces are not redacted, do not share it")
        else:
            for t in traces:
                t.unlink(missing_ok=True)
            warning = (f"{names} deleted: this episode used secrets and a trace records them in clear "
                       "(pass --trace-with-secrets to keep it)")
        if warning not in trajectory.warnings:
            trajectory.warnings.append(warning)


class RunStore:
    def __init__(self, root: Union[str, Path] = "runs"):
        self.root = Path(root)

    def new_run(self, intent: str, keep_secret_traces: bool = False) -> RunDir:
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        base = f"{stamp}-{slugify(intent)}"
        self.root.mkdir(parents=True, exist_ok=True)
        for n in range(1000):
            path = self.root / (base if n == 0 else f"{base}-{n}")
            try:
                path.mkdir()
            except FileExistsError:
                continue
            return RunDir(path, keep_secret_traces)
        raise RuntimeError(f"cannot create a run folder under {self.root}")
