"""The job store of ``owrl serve``: one SQLite file (WAL), so jobs outlive the server.

A job is ``queued`` until a slot is free, then ``running``; it ends ``finished`` (the
episode ran to an outcome, whatever that outcome is), ``failed`` (the job could not run or
was interrupted) or ``cancelled``. A server that starts on a store whose jobs were
``running`` marks them ``failed`` with an "interrupted" error: a half-run episode is not
replayed behind the client's back. ``queued`` jobs are simply run again.

Stdlib and pydantic only: this module is imported without FastAPI.
"""

from __future__ import annotations

import builtins
import json
import os
import re
import sqlite3
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Optional
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

from owrl_sdk.errors import UsageError
from owrl_sdk.support.files import try_lock
from owrl_sdk.safety.secrets import redact, scrub
from owrl_sdk.types import Outcome, utc_now

if TYPE_CHECKING:
    from filelock import BaseFileLock

JobStatus = Literal["queued", "running", "finished", "failed", "cancelled"]
JobKind = Literal["task", "flow", "batch"]
ENDED: tuple[str, ...] = ("finished", "failed", "cancelled")

INTERRUPTED = "interrupted: the server stopped while this job was running (its run folder keeps the steps taken)"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT NOT NULL UNIQUE,
    kind       TEXT NOT NULL,
    status     TEXT NOT NULL,
    spec       TEXT NOT NULL,
    created_at TEXT NOT NULL,
    started_at TEXT,
    ended_at   TEXT,
    run        TEXT,
    steps      INTEGER NOT NULL DEFAULT 0,
    outcome    TEXT,
    error      TEXT,
    batch      TEXT
);
CREATE INDEX IF NOT EXISTS jobs_status ON jobs (status);
"""

#: Columns added after the first release, with their type: a store an older server made gets them.
_ADDED_COLUMNS = (("batch", "TEXT"),)

_OUTPUTS_EXAMPLE = {"order_id": "DS-623438", "total": "$24.00"}


class BatchRow(BaseModel):
    """One row of a batch job, as ``batch.json`` holds it (secrets redacted)."""

    row: int = Field(description="the row's number in the submitted rows (from 1)")
    key: str = Field(description="the row's content key: a digest of its values, then #N for the N-th row alike")
    status: str = Field(description="pending (not run yet), or the episode's outcome: success, fail, aborted, "
                                    "infra_error, or needs_review (it failed after its point of no return)")
    inputs: dict[str, Any] = Field(default_factory=dict, description="the row's input values (typed once resolved)")
    outputs: dict[str, Any] = Field(default_factory=dict, description="what the row's episode handed back, by name",
                                    examples=[_OUTPUTS_EXAMPLE])
    failure: Optional[str] = Field(None, description="the failure's kind (task.bad_inputs: the row's values did "
                                                     "not make the flow's inputs), None on success")
    detail: Optional[str] = Field(None, description="the failure's detail")
    answer: Optional[str] = Field(None, description="the answer of the row's done")
    run_dir: Optional[str] = Field(None, description="the row's run folder, under the server's data dir "
                                                     "(batches/JOB/runs/...)")
    steps: int = 0
    seconds: float = 0.0


class BatchStatus(BaseModel):
    """Where a batch job stands: counts, then every row (what the batch folder's batch.json holds)."""

    rows: int = Field(description="rows submitted")
    succeeded: int = 0
    failed: int = Field(0, description="rows that ended other than success (bad inputs included), those that need "
                                       "review aside")
    needs_review: int = Field(0, description="rows that failed after their point of no return (a commit call ran): "
                                             "a person decides, they are not run again")
    pending: int = Field(0, description="rows not run (yet, or ever: a cancelled batch)")
    results: list[BatchRow] = Field(default_factory=list, description="every row, in the order submitted")


class Job(BaseModel):
    """A job as the API shows it. ``spec`` (the request, flow and policy options included)
    stays in the store: policy options may hold credentials."""

    id: str
    kind: JobKind
    status: JobStatus
    task: str = Field(description="the task text (a flow's own task when none was given)")
    start_url: str = Field(description="the start URL as submitted (plugin schemes such as demo:shop unresolved)")
    policy: str
    max_steps: Optional[int] = None
    allowed_domains: list[str] = Field(default_factory=list)
    created_at: str
    started_at: Optional[str] = None
    ended_at: Optional[str] = None
    steps: int = Field(0, description="steps written so far")
    outcome: Optional[Outcome] = Field(None, description="the episode's outcome once it ended (also for a cancelled run: aborted)")
    error: Optional[str] = Field(None, description="why a job failed (or was cancelled before it ran)")
    run: Optional[str] = Field(None, description="the job's run folder, under the server's data dir/runs")
    inputs: dict[str, Any] = Field(
        default_factory=dict, examples=[{"product": "tote-bag", "quantity": 2}],
        description="the input values ({{input:NAME}}) the job runs with, typed and with the flow's defaults "
                    "(a batch: the values every row gets)")
    outputs: dict[str, Any] = Field(
        default_factory=dict, examples=[_OUTPUTS_EXAMPLE],
        description="what the episode handed back once it ended: each save_as value and done's output "
                    "(the outcome's outputs; a batch's are per row, in batch)")
    batch: Optional[BatchStatus] = Field(None, description="a batch job's rows: status, inputs, outputs and "
                                                           "failure of each (None for other jobs)")


#: Option names whose values are credentials: a job's are kept in memory, never in the store.
#: Also a header's name (``Authorization``, ``Cookie``) inside an option such as ``headers``.
CREDENTIALS = re.compile(r"(?i)^(.*api[-_]?key|.*(token|secret|password|passwd|credential|private[-_]?key)s?|"
                         r"(proxy-)?authorization|cookie|x-[a-z-]*(key|auth|token))$")


def _holds_credential(key: str, value: Any) -> bool:
    """Whether an option is (or holds) a credential: its name says so, a key inside it says so
    (``headers: {"Authorization": ...}``), or it is an address with a password in it."""
    if CREDENTIALS.match(str(key)):
        return value is not None
    if isinstance(value, dict):
        return any(_holds_credential(k, v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_credential("", v) for v in value)
    if isinstance(value, str) and "@" in value and "://" in value:
        try:
            return bool(urlsplit(value.strip()).password)
        except ValueError:
            return True  # an address that does not parse, with a user part: held rather than guessed
    return False
#: What the store holds in place of a credential; a job read back without its value (the server
#: restarted meanwhile) cannot run and says why.
HELD = "<held in memory, not stored>"


def _private(path: Path, mode: int) -> None:
    try:
        os.chmod(path, mode)
    except OSError:  # pragma: no cover - a file system without modes
        pass


class JobStore:
    """Jobs in ``path`` (SQLite). Safe to call from several threads; every call is short.

    The data folder is made 0700 and the store's files 0600: they hold every job's task,
    flow and inputs. A job's credentials (policy options named like :data:`CREDENTIALS`, options
    holding such a name, such as a ``headers`` table with ``Authorization``, and addresses with a
    password in them) are kept in this process's memory only; the store holds :data:`HELD` in
    their place."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _private(self.path.parent, 0o700)
        self._held: dict[str, dict[str, Any]] = {}
        #: each job's own storage state (a log-in), in memory only, until the job ends
        self._sessions: dict[str, Any] = {}
        for suffix in ("", "-wal", "-shm"):  # made before SQLite opens them, with the mode kept
            f = Path(str(self.path) + suffix)
            if not f.exists() and suffix == "":
                f.touch(mode=0o600)
            if f.exists():
                _private(f, 0o600)
        old_umask = os.umask(0o077)  # the -wal and -shm files SQLite makes are private too
        try:
            self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
        finally:
            os.umask(old_umask)
        self._db.row_factory = sqlite3.Row
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA busy_timeout=5000")
            self._db.executescript(_SCHEMA)
            have = {r[1] for r in self._db.execute("PRAGMA table_info(jobs)").fetchall()}
            for name, kind in _ADDED_COLUMNS:
                if name not in have:
                    self._db.execute(f"ALTER TABLE jobs ADD COLUMN {name} {kind}")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _query(self, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def _write(self, sql: str, args: tuple[Any, ...] = ()) -> int:
        with self._lock:
            return self._db.execute(sql, args).rowcount

    # ------------------------------------------------------------------ reading

    def get(self, job_id: str) -> Optional[Job]:
        rows = self._query("SELECT * FROM jobs WHERE id = ?", (job_id,))
        return _job(rows[0]) if rows else None

    def spec(self, job_id: str) -> dict[str, Any]:
        """The job's spec, its credentials put back from memory. A credential that is no longer
        held (the server restarted since the job was queued) is a ``LookupError``."""
        rows = self._query("SELECT spec FROM jobs WHERE id = ?", (job_id,))
        if not rows:
            raise KeyError(job_id)
        spec: dict[str, Any] = json.loads(rows[0]["spec"])
        options = spec.get("policy_options")
        if isinstance(options, dict):
            held = self._held.get(job_id, {})
            lost = [k for k, v in options.items() if v == HELD and k not in held]
            if lost:
                raise LookupError(f"the job's {', '.join(lost)} was kept in memory only, and the server has "
                                  "restarted since it was queued: submit the job again")
            options.update(held)
        if spec.get("storage_state") == HELD:
            if job_id not in self._sessions:
                raise LookupError("the job's storage_state was kept in memory only, and the server has restarted "
                                  "since it was queued: submit the job again")
            spec["storage_state"] = self._sessions[job_id]
        return spec

    def callback_url(self, job_id: str) -> Optional[str]:
        """The job's ``callback_url``: read from the stored spec alone (a callback needs none of
        the credentials held in memory, which are gone once the job ended)."""
        rows = self._query("SELECT spec FROM jobs WHERE id = ?", (job_id,))
        if not rows:
            return None
        url = json.loads(rows[0]["spec"]).get("callback_url")
        return str(url) if url else None

    def list(self, status: Optional[str] = None, limit: int = 100) -> list[Job]:
        """Newest first."""
        if status:
            rows = self._query("SELECT * FROM jobs WHERE status = ? ORDER BY seq DESC LIMIT ?", (status, limit))
        else:
            rows = self._query("SELECT * FROM jobs ORDER BY seq DESC LIMIT ?", (limit,))
        return [_job(r) for r in rows]

    def queued(self) -> builtins.list[str]:  # `list` here is the method above
        """Ids of queued jobs, oldest first."""
        rows = self._query("SELECT id FROM jobs WHERE status = 'queued' ORDER BY seq")
        return [r["id"] for r in rows]

    # ------------------------------------------------------------------ writing

    def add(self, kind: str, spec: dict[str, Any]) -> Job:
        job_id = uuid.uuid4().hex[:16]
        stored = spec
        options = spec.get("policy_options")
        if isinstance(options, dict):
            held = {k: v for k, v in options.items() if _holds_credential(str(k), v)}
            if held:
                self._held[job_id] = held
                stored = {**spec, "policy_options": {**options, **{k: HELD for k in held}}}
        if spec.get("storage_state") is not None:  # a log-in's cookies: never in the store
            self._sessions[job_id] = spec["storage_state"]
            stored = {**stored, "storage_state": HELD}
        self._write("INSERT INTO jobs (id, kind, status, spec, created_at) VALUES (?, ?, 'queued', ?, ?)",
                   (job_id, kind, json.dumps(stored), utc_now()))
        job = self.get(job_id)
        assert job is not None
        return job

    def started(self, job_id: str) -> None:
        self._write("UPDATE jobs SET status = 'running', started_at = ? WHERE id = ? AND status = 'queued'",
                   (utc_now(), job_id))

    def set_run(self, job_id: str, run: str) -> None:
        self._write("UPDATE jobs SET run = ? WHERE id = ?", (run, job_id))

    def set_steps(self, job_id: str, steps: int) -> None:
        self._write("UPDATE jobs SET steps = ? WHERE id = ?", (steps, job_id))

    def set_batch(self, job_id: str, summary: dict[str, Any]) -> None:
        """A batch job's rows as they stand (a batch summary, scrubbed before it is written)."""
        status = BatchStatus.model_validate(scrub(summary))
        self._write("UPDATE jobs SET batch = ? WHERE id = ?", (status.model_dump_json(), job_id))

    def end(self, job_id: str, status: str, *, outcome: Optional[Outcome] = None, steps: Optional[int] = None,
            error: Optional[str] = None) -> None:
        """Only scrubbed text reaches the file: a failure's detail or an error may quote a secret."""
        assert status in ENDED, status
        self._sessions.pop(job_id, None)  # the job's log-in is not kept past its end
        outcome, error = scrub(outcome), redact(error)
        self._write(
            "UPDATE jobs SET status = ?, ended_at = ?, outcome = ?, error = ?, steps = COALESCE(?, steps) "
            "WHERE id = ? AND status NOT IN ('finished', 'failed', 'cancelled')",
            (status, utc_now(), outcome.model_dump_json() if outcome else None, error, steps, job_id),
        )

    def recover(self) -> int:
        """Mark the jobs that were running when the last server stopped as failed (interrupted)."""
        return self._write("UPDATE jobs SET status = 'failed', ended_at = ?, error = ? WHERE status = 'running'",
                           (utc_now(), INTERRUPTED))


def lock_data_dir(folder: Path) -> "BaseFileLock":
    """Hold ``folder/serve.lock`` until the returned lock is released (or the process ends): two
    servers on one data dir would both run its queued jobs."""
    folder.mkdir(parents=True, exist_ok=True)
    _private(folder, 0o700)
    lock = try_lock(folder / "serve.lock")
    if lock is None:
        raise UsageError(f"another owrl serve is using {folder}: stop it or pass another --data-dir")
    return lock


def _job(row: sqlite3.Row) -> Job:
    """The job as the API shows it, scrubbed (rows an older server wrote included)."""
    spec = json.loads(row["spec"])
    outcome = Outcome.model_validate_json(row["outcome"]) if row["outcome"] else None
    batch = BatchStatus.model_validate_json(row["batch"]) if row["batch"] else None
    return scrub(Job(
        id=row["id"], kind=row["kind"], status=row["status"],
        task=spec.get("task", ""), start_url=spec.get("start_url", ""), policy=spec.get("policy", ""),
        max_steps=spec.get("max_steps"), allowed_domains=spec.get("allowed_domains") or [],
        created_at=row["created_at"], started_at=row["started_at"], ended_at=row["ended_at"],
        steps=row["steps"], outcome=outcome, error=row["error"], run=row["run"],
        inputs=spec.get("inputs") or {}, outputs=dict(outcome.outputs) if outcome is not None else {}, batch=batch,
    ))
