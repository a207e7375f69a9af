"""Running the jobs of ``owrl serve``: a few at a time, in one shared browser.

Each job is one :class:`owrl_sdk.Agent` run (its episode built by :mod:`owrl_sdk.episode.runner`,
like every episode owrl runs) with its own policy instance and its own run folder under
``DATA/runs`` (the layout of :mod:`owrl_sdk.episode.runstore`); the browser is launched once for
the server and every episode gets a fresh context of it. While a job runs, its steps are
kept in memory as they are written, so streams can follow them; once it ended, they are
read back from its ``trajectory.json``.

Cancelling a running job cancels its asyncio task: the episode closes its trajectory as
``aborted`` (``infra.cancelled``) and the job ends ``cancelled``.

A batch job is one :class:`owrl_sdk.flows.batch.Batch` (one flow, once per row of inputs) in its own
batch folder under ``DATA/batches/JOB``. Its rows do not hold a slot as a whole: each row takes
one of the server's ``max_concurrent`` slots while its episode runs (at most ``workers`` rows of
the batch at a time), so a long batch and single jobs share the limit and queue for it in turn.
Rows run on the server's one browser, with the job's allowlist and the server's refusal of
local files, like every job. Cancelling a batch cancels the rows running and ends the job
``cancelled``: the rows that ended keep their results, the others stay ``pending``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import re
import time
from functools import partial
from pathlib import Path
from typing import Any, AsyncIterator, Optional

from owrl_sdk.agent import Agent
from owrl_sdk.flows.batch import BAD_INPUTS, Batch
from owrl_sdk.config import Settings, openai_endpoint
from owrl_sdk.formats.documents import Flow, flow_from_data
from owrl_sdk.safety.domains import DomainPolicy, internal_host
from owrl_sdk.errors import InfraError, OwrlError
from owrl_sdk.scheduling.executors import InProcessExecutor, WorkItem, WorkResult
from owrl_sdk.flows.flowplayer import FLOW_POLICY
from owrl_sdk.rules.inputs import InputsInvalid
from owrl_sdk.contract.plugins import Plugins
from owrl_sdk.episode.runner import failed_record
from owrl_sdk.flows.runrequest import RunRequest
from owrl_sdk.episode.runstore import RunDir
from owrl_sdk.safety.secrets import dumps, redact, scrub
from owrl_sdk.safety.secrets import scope as secrets_scope
from owrl_sdk.browser.storage import register_values
from owrl_sdk.types import Step, Task, Trajectory
from owrl_sdk.server.jobs import ENDED, INTERRUPTED, Job, JobStore
from owrl_sdk.server.webhooks import CallbackRefused, check_callback, deliver, summary

#: A stream with nothing new sends a heartbeat line this often (seconds).
HEARTBEAT = 15.0
#: How long a cancel request waits for the episode to close before answering.
CANCEL_WAIT = 20.0
#: Keys of policy_options that would clash with the Agent's own arguments.
#: How often a running batch's job view is rewritten with its rows' results, at most (seconds).
ROWS_WRITE_SECONDS = 1.0
RESERVED_OPTIONS = ("settings", "plugins", "memory", "env_factory", "flow", "proxy")
#: How the operator lets jobs open local files (owrl serve --help says the same).
LOCAL_FILES_HINT = "OWRL_SERVE_ALLOW_LOCAL_FILES=1"

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _local_path(text: str) -> bool:
    """Whether a model given by name is a path on this machine (else an id a hub resolves)."""
    if text.startswith(("/", ".", "~", "\\")):
        return True
    try:
        return Path(text).expanduser().exists()
    except (OSError, ValueError):  # a NUL byte, a name too long: no file of this machine
        return False


class SpecError(Exception):
    """A submitted job the server refuses; ``loc`` names the field as FastAPI does."""

    def __init__(self, loc: tuple[str, ...], message: str):
        super().__init__(message)
        self.loc = loc
        self.message = message


def input_errors(err: InputsInvalid, loc: tuple[str, ...]) -> list[dict[str, Any]]:
    """:func:`owrl_sdk.rules.inputs.resolve_inputs`' problems as FastAPI's list: one entry per
    problem, its ``loc`` ending with the input's name, in the API's words for giving a value."""
    return [{"loc": [*loc, p.name], "msg": p.text("give inputs.{name} a value"), "type": "value_error"}
            for p in err.problems]


class InputsError(Exception):
    """A job's inputs that do not make the flow's: every problem, each with its ``loc``."""

    def __init__(self, errors: list[dict[str, Any]]):
        super().__init__("; ".join(e["msg"] for e in errors))
        self.errors = errors


def resolve_job_inputs(flow: Flow, given: dict[str, Any], loc: tuple[str, ...]) -> dict[str, Any]:
    """The flow's input values from a job's ``inputs`` (typed, defaults added), or
    :class:`InputsError` naming every bad one; ``{{secret:...}}`` in a value is refused."""
    try:
        return RunRequest(flow=flow, inputs=given).values()
    except InputsInvalid as err:
        raise InputsError(input_errors(err, loc)) from None


class JobNotFound(KeyError):
    pass


class JobEnded(Exception):
    """Cancelling a job that already ended."""

    def __init__(self, job: Job):
        super().__init__(f"job {job.id} already ended ({job.status})")
        self.job = job


def step_data(step: Step) -> dict[str, Any]:
    """A step as the API shows it: the trajectory file's form, secrets scrubbed."""
    return scrub(step.model_dump(mode="json", by_alias=True))


class LiveJob:
    """The steps of a running job, and an event that fires when one is added: the job's log,
    a plugin of its episode (``Agent.run(hooks=[live])``), called after the run folder wrote
    each step (so the screenshot file is named)."""

    def __init__(self, store: JobStore, job_id: str):
        self.store = store
        self.job_id = job_id
        self.steps: list[dict[str, Any]] = []
        self.trajectory: Optional[Trajectory] = None
        self.event = asyncio.Event()

    def notify(self) -> None:
        event, self.event = self.event, asyncio.Event()
        event.set()

    def step_end(self, step: Step, trajectory: Trajectory) -> None:
        self.trajectory = trajectory
        self.steps.append(step_data(step))
        self.store.set_steps(self.job_id, len(self.steps))
        self.notify()

    def episode_end(self, trajectory: Trajectory) -> None:
        self.trajectory = trajectory
        self.notify()


class JobRunner:
    """Runs the server's jobs, ``max_concurrent`` at a time, each as an ``Agent`` run.

    Jobs are scheduled here with a semaphore, not through an executor of
    :mod:`owrl_sdk.scheduling.executors`, on purpose: an executor runs a fixed list of judged episodes
    of one suite with one policy factory and returns when all are done, while a job arrives
    at any time, carries its own policy, options, step limit and allowlist, is not judged,
    streams its steps as they are written, and is cancelled alone (its asyncio task) without
    touching the others. Giving the executor all of that would change its contract for one
    client and gain nothing here; the episode itself is still built by
    :mod:`owrl_sdk.episode.runner`, like every other.
    """

    def __init__(self, store: JobStore, data_dir: Path, settings: Settings, plugins: Plugins, max_concurrent: int = 1,
                 allow_local_files: bool = False):
        self.store = store
        self.runs_dir = Path(data_dir) / "runs"
        self.batches_dir = Path(data_dir) / "batches"
        self.plugins = plugins.bind(settings)  # hooks receive the server's settings
        #: The server's allowlist: a job may narrow it, never widen it. Each job's task carries
        #: its own list, so the browser's settings carry none.
        self.allowed = list(settings.allowed_domains)
        #: callbacks being delivered (kept so that none is collected before it is sent)
        self._deliveries: set["asyncio.Future[Any]"] = set()
        self.settings = settings.model_copy(update={"allowed_domains": [], "runs_dir": str(self.runs_dir)})
        self.max_concurrent = max_concurrent
        #: Off by default: every job's navigations refuse file:, view-source:, chrome: and the
        #: like (a flow could otherwise goto_url file:///etc/passwd and read it in its steps).
        self.allow_local_files = allow_local_files
        self.stopping = False
        self._slots: Optional[asyncio.Semaphore] = None
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._live: dict[str, LiveJob] = {}
        self._cancel_requested: set[str] = set()
        self._host: Any = None
        self._host_lock: Optional[asyncio.Lock] = None
        #: the egress gate the server's own clients for a job go through (see :meth:`_through_gate`)
        self._gate: Any = None
        self.gate_url: Optional[str] = None

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> int:
        """Mark jobs a dead server left running as interrupted; queue the queued ones again."""
        self._slots = asyncio.Semaphore(self.max_concurrent)
        self._host_lock = asyncio.Lock()
        from owrl_sdk.browser.egress import EgressGate

        # the server's own requests for a job (its endpoint, its callback): the address is judged when
        # the server connects, by the same rule as at submission
        self._gate = EgressGate(DomainPolicy(allowed=self.allowed, blocked=list(self.settings.blocked_domains)),
                                refuse_internal=not self.allowed)
        self.gate_url = await self._gate.start()
        _ = self.plugins.catalogue  # built once here, not by two jobs' threads at the same time
        interrupted = self.store.recover()
        for job_id in self.store.queued():
            self._schedule(job_id)
        return interrupted

    async def stop(self) -> None:
        """Running jobs end as failed (interrupted); queued ones stay queued for the next start."""
        self.stopping = True
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._host is not None:
            host, self._host = self._host, None
            await host.close()
        if self._gate is not None:
            gate, self._gate = self._gate, None
            await gate.close()

    # ------------------------------------------------------------------ submitting

    def check_policy(self, name: str) -> None:
        if name == FLOW_POLICY:
            raise SpecError(("body", "policy"), f"the {FLOW_POLICY} policy plays flows: submit the flow to POST /v1/jobs/flow")
        try:
            self.plugins.catalogue.get("policies", name)
        except OwrlError as err:
            raise SpecError(("body", "policy"), str(err)) from None

    def check_policy_options(self, policy: str, options: dict[str, Any], model: Optional[str],
                             loc: tuple[str, ...]) -> None:
        """A job's policy options (and ``model``) within what the operator allows: an option that
        names a file or folder on the server (its field marked ``server_side``: ``file``, or a
        ``model`` given as a path) only with local files allowed; an endpoint the server would
        call (``endpoint``) only inside the server's allowed domains. What a job may not set,
        the operator sets in the server's settings (``[plugins.NAME]``, ``OWRL_*``)."""
        reserved = [k for k in options if k in RESERVED_OPTIONS]
        if reserved:
            raise SpecError(loc + (reserved[0],), f"'{reserved[0]}' is not a policy option here")
        marked = self._server_side(policy)
        given = [(loc + (k,), k, v, marked.get(k)) for k, v in options.items()]
        if model is not None:
            given.append((("body", "model"), "model", model, "model"))
        for where, key, value, kind in given:
            if kind is None or value is None:
                continue
            text = str(value)
            if kind == "file" or (kind == "model" and _local_path(text)):
                if not self.allow_local_files:
                    raise SpecError(where, f"'{key}' names a file or folder on the server, which jobs may not "
                                           f"open: the operator sets it ([plugins.{policy}] in the server's "
                                           f"owrl.toml), or allows local files ({LOCAL_FILES_HINT})")
            elif kind == "endpoint":
                self._check_endpoint(policy, options, where, key, text)

    def _check_endpoint(self, policy: str, options: dict[str, Any], where: tuple[str, ...], key: str,
                        url: str) -> None:
        """An endpoint a job names: http(s) only, inside the allowlist, outside the blocklist;
        and unless it is the operator's own endpoint, it gets no key of the operator's (the
        job's options then carry ``api_key = "none"`` when they name no key of their own)."""
        if not re.match(r"(?i)https?://", url):
            raise SpecError(where, f"'{key}' is an endpoint the server would call: only http:// and https:// "
                                   "addresses are allowed")
        reason = DomainPolicy(allowed=self.allowed, blocked=list(self.settings.blocked_domains)).refusal(url)
        if reason:
            where_to = "outside its allowed domains" if self.allowed else "on its blocklist"
            raise SpecError(where, f"'{key}' is an endpoint the server would call, {where_to}: {reason}")
        operator = self._operator_endpoints(policy, key)
        inside = internal_host(url, resolve=True) if not self.allowed and url.rstrip("/") not in operator else None
        if inside:
            raise SpecError(where, f"'{key}' is an endpoint the server would call at {inside}: a job reaches "
                                   "an internal address only when the operator allowed it (allowed_domains, "
                                   "by address or network, e.g. 10.0.0.0/8)")
        if url.rstrip("/") not in operator and not options.get("api_key"):
            options["api_key"] = "none"  # the operator's key goes only to the operator's endpoint

    def _operator_endpoints(self, policy: str, key: str) -> set[str]:
        """The endpoints the operator configured (trusted: the job's rules do not apply to them)."""
        return {str(u).rstrip("/") for u in (openai_endpoint().base_url, self.settings.plugin(policy).get(key)) if u}

    def _server_side(self, policy: str) -> dict[str, str]:
        """The policy's options marked ``server_side`` (``file``, ``model``, ``endpoint``), by name."""
        schema = getattr(self.plugins.catalogue.get("policies", policy), "Options", None)
        marked = {}
        for key, field in (getattr(schema, "model_fields", {}) or {}).items():
            extra = field.json_schema_extra
            if isinstance(extra, dict) and extra.get("server_side"):
                marked[key] = str(extra["server_side"])
        return marked

    def _through_gate(self, policy: str, options: dict[str, Any]) -> None:
        """A job's endpoint (not the operator's) is called through the server's egress gate: its
        name is judged again by the address it resolves to when the server connects."""
        marked = self._server_side(policy)
        for key, value in list(options.items()):
            if marked.get(key) == "endpoint" and value \
                    and str(value).rstrip("/") not in self._operator_endpoints(policy, key):
                if self.gate_url is None:
                    raise InfraError("the server's egress gate is not running", code="egress_gate")
                options["proxy"] = self.gate_url

    def check_callback(self, url: Optional[str], loc: tuple[str, ...]) -> Optional[str]:
        """A job's ``callback_url``, if the server may call it (:mod:`.webhooks`); else a SpecError."""
        if url is None:
            return None

        try:
            return check_callback(url, self.allowed, list(self.settings.blocked_domains))
        except CallbackRefused as err:
            raise SpecError(loc, str(err)) from None

    def _notify(self, job_id: str) -> None:
        """The ended job's callback, when it named one: sent off the event loop, in the background."""
        job = self.store.get(job_id)
        if job is None or job.status not in ENDED:
            return
        url = self.store.callback_url(job_id)
        if not url:
            return

        task = asyncio.ensure_future(asyncio.to_thread(deliver, url, summary(job), job_id, proxy=self.gate_url))
        self._deliveries.add(task)
        task.add_done_callback(self._deliveries.discard)

    def check_domains(self, domains: list[str], loc: tuple[str, ...]) -> list[str]:
        """The job's allowlist: its own (inside the server's), else the server's."""
        if not domains:
            return list(self.allowed)
        if self.allowed:
            server = DomainPolicy(allowed=self.allowed)
            outside = [d for d in domains if server.refusal(f"http://{d}/")]
            if outside:
                raise SpecError(loc, f"{outside[0]} is outside the server's allowed domains ({', '.join(self.allowed)})")
        return list(domains)

    def check_start_url(self, url: str, allowed: list[str], loc: tuple[str, ...]) -> None:
        """http(s), or a scheme a plugin resolves to http(s) (demo:shop); inside the allowlist."""
        if not _SCHEME.match(url):
            raise SpecError(loc, "the start URL needs a scheme: http://, https:// or a plugin's (demo:shop)")
        try:
            resolved = self.plugins.resolve_url(url)
        except OwrlError as err:
            raise SpecError(loc, str(err)) from None
        except Exception as err:  # noqa: BLE001 - a plugin's bug is still the caller's bad URL here
            raise SpecError(loc, f"cannot resolve the start URL: {type(err).__name__}: {err}") from None
        if not resolved.lower().startswith(("http://", "https://")):
            raise SpecError(loc, "the start URL must be http(s) or a scheme a plugin resolves (demo:shop); "
                                 "file: and other schemes are not served")
        if allowed:
            reason = DomainPolicy(allowed=allowed).refusal(resolved)
            if reason:
                raise SpecError(loc, f"the start URL is refused: {reason}")

    def submit(self, kind: str, spec: dict[str, Any]) -> Job:
        job = self.store.add(kind, spec)
        self._schedule(job.id)
        return job

    def _schedule(self, job_id: str) -> None:
        self._tasks[job_id] = asyncio.create_task(self._run(job_id), name=f"owrl-job-{job_id}")

    # ------------------------------------------------------------------ cancelling

    async def cancel(self, job_id: str) -> Job:
        job = self.store.get(job_id)
        if job is None:
            raise JobNotFound(job_id)
        if job.status in ENDED:
            raise JobEnded(job)
        self._cancel_requested.add(job_id)
        task = self._tasks.get(job_id)
        if task is not None:
            task.cancel()
            await asyncio.wait({task}, timeout=CANCEL_WAIT)
        else:  # no task holds it (cannot normally happen): end it in the store all the same
            self.store.end(job_id, "cancelled", error="cancelled before it ran")
        found = self.store.get(job_id)
        assert found is not None
        return found

    # ------------------------------------------------------------------ running

    async def _run(self, job_id: str) -> None:
        with secrets_scope():  # what this job registers (its cookies, its endpoint's key) is its own
            await self._run_scoped(job_id)

    async def _run_scoped(self, job_id: str) -> None:
        assert self._slots is not None
        try:
            job = self.store.get(job_id)
            if job is not None and job.kind == "batch" and not self.stopping:
                await self._run_batch(job_id)  # its rows take the slots, one each
                return
            async with self._slots:
                if self.stopping:
                    return
                self.store.started(job_id)
                live = self._live[job_id] = LiveJob(self.store, job_id)
                await self._execute(job_id, live)
        except asyncio.CancelledError:
            self._ended_by_cancel(job_id)
        except Exception as err:  # noqa: BLE001 - the job fails, the server goes on
            failed = self._live.get(job_id)
            self.store.end(job_id, "failed", error=_one_line(err), steps=len(failed.steps) if failed else None,
                           outcome=failed.trajectory.outcome if failed and failed.trajectory else None)
        finally:
            self._tasks.pop(job_id, None)
            self._cancel_requested.discard(job_id)
            ended = self._live.pop(job_id, None)
            if ended is not None:
                ended.notify()  # followers read the ended job from the store and the run folder
            self._notify(job_id)

    def _ended_by_cancel(self, job_id: str) -> None:
        job = self.store.get(job_id)
        if job is None:
            return
        live = self._live.get(job_id)
        outcome = live.trajectory.outcome if live is not None and live.trajectory is not None else None
        steps = len(live.steps) if live is not None else None
        if job_id in self._cancel_requested:
            error = ("cancelled before it ran" if job.status == "queued"
                     else None if outcome is not None else "cancelled before its episode began")
            self.store.end(job_id, "cancelled", outcome=outcome, steps=steps, error=error)
        elif job.status == "running":  # the server is stopping
            self.store.end(job_id, "failed", outcome=outcome, steps=steps, error=INTERRUPTED)
        # a queued job stays queued: it runs when the server starts again

    def job_task(self, job_id: str, spec: dict[str, Any]) -> Task:
        """The task a job runs: a flow job's from its request, prepared as every door prepares
        a flow (:class:`~owrl_sdk.flows.runrequest.RunRequest`), with the values checked when it was
        queued; a task job's as it was given."""
        fields: dict[str, Any] = {"allowed_domains": spec.get("allowed_domains") or [],
                                  "max_steps": spec.get("max_steps")}
        inputs = dict(spec.get("inputs") or {})
        if spec.get("flow") is None:  # a task job: prepared as every door prepares one
            return RunRequest(intent=spec["task"], url=spec["start_url"], source="job").task(
                self.plugins, {}, metadata={"serve_job": job_id}, **fields)

        # a job queued by an older server has no request: its shown text and URL, filled in already
        # (filling them again changes nothing unless a value itself holds an input's placeholder)
        asked = spec.get("request") or {"url": spec["start_url"], "task": spec["task"]}
        request = RunRequest(flow=flow_from_data(spec["flow"], "flow"), inputs=inputs, url=asked.get("url"),
                             intent=asked.get("task"))
        return request.task(self.plugins, inputs, metadata={"serve_job": job_id}, **fields)

    async def _execute(self, job_id: str, live: LiveJob) -> None:
        spec = self.store.spec(job_id)
        settings = self.settings.with_overrides(policy=spec["policy"], model=spec.get("model"),
                                                max_steps=spec.get("max_steps"))
        options = dict(spec.get("policy_options") or {})
        self._through_gate(spec["policy"], options)
        task = self.job_task(job_id, spec)
        if spec.get("flow") is not None:
            options["flow"] = flow_from_data(task.metadata["flow"], "flow")
        # building a policy may load a model: not on the event loop
        session = spec.get("storage_state")  # the job's own log-in: its context only
        agent = await asyncio.to_thread(
            partial(Agent, spec["policy"], settings=settings, plugins=self.plugins,
                    env_factory=partial(self._env, job_id, session=session), **options))
        try:
            trajectory = await agent.run(task, out=self.runs_dir, hooks=[live])
        finally:
            await asyncio.shield(agent.close())
        self.store.end(job_id, "finished", outcome=trajectory.outcome, steps=len(trajectory.steps))

    # ------------------------------------------------------------------ batches

    def batch_dir(self, job_id: str) -> Path:
        return self.batches_dir / job_id

    def make_batch(self, job_id: str, spec: dict[str, Any], on_row: Any = None, executor: Any = None) -> Any:
        """The job's :class:`owrl_sdk.flows.batch.Batch` (every check of the batch made: a
        :class:`UsageError` for what would stop it)."""
        rows = spec["rows"] if spec.get("rows") is not None else str(self.batch_dir(job_id) / spec["rows_file"])
        return Batch(flow_from_data(spec["flow"], "flow"), rows, out=self.batch_dir(job_id), workers=spec["workers"],
                     settings=self.settings, plugins=self.plugins, url=spec.get("url"), on_row=on_row,
                     executor=executor, common=spec.get("inputs") or None)

    async def _run_batch(self, job_id: str) -> None:
        spec = self.store.spec(job_id)
        holder: list[Any] = []
        written = [0.0]

        def on_row(_: Any) -> None:
            # the job's view of its rows, at most once a second (a batch of many short rows would
            # otherwise rewrite every row's result after each one); the last is written at the end
            if time.monotonic() - written[0] >= ROWS_WRITE_SECONDS:
                written[0] = time.monotonic()
                self.store.set_batch(job_id, self._public(holder[0].summary()))

        executor = RowExecutor(self, job_id, spec)
        batch = await asyncio.to_thread(self.make_batch, job_id, spec, on_row, executor)
        executor.settings = batch.settings
        holder.append(batch)
        self.store.set_batch(job_id, self._public(batch.summary()))
        try:
            summary = await batch.run_async()
        finally:
            self.store.set_batch(job_id, self._public(batch.summary()))
        self.store.started(job_id)  # a batch of rows that all failed their inputs ran no episode
        self.store.end(job_id, "finished", steps=sum(r.get("steps") or 0 for r in summary["results"]))

    def _public(self, summary: dict[str, Any]) -> dict[str, Any]:
        """A batch summary as the job shows it: run folders relative to the data dir (as a
        job's ``run`` is a name, not a path of the server's disk)."""
        root = self.batches_dir.parent.resolve()
        for result in summary.get("results") or []:
            if result.get("run_dir"):
                try:
                    result["run_dir"] = str(Path(result["run_dir"]).resolve().relative_to(root))
                except ValueError:
                    result["run_dir"] = Path(result["run_dir"]).name
        return summary

    async def _env(self, job_id: str, run: Optional[RunDir], trace: bool, session: Optional[dict[str, Any]] = None) -> Any:
        if run is not None:
            self.store.set_run(job_id, run.path.name)
        return await self.new_env(run.path if run is not None else None, trace, session=session)

    async def new_env(self, run_dir: Optional[Path], trace: bool = False,
                      session: Optional[dict[str, Any]] = None) -> Any:
        """A fresh context of the server's one browser (launched on first use, again if it died).
        A job's session's values are secrets of the job's scope (its task runs in one)."""
        assert self._host_lock is not None
        if session:
            register_values(session)
        async with self._host_lock:
            if self._host is None:
                from owrl_sdk.browser import browser_host

                self._host = browser_host(self.settings, self.plugins)
                await self._host.start()
            else:
                await self._host.ensure_running()
        return await self._host.new_env(run_dir=run_dir, trace=trace, deny_local=not self.allow_local_files,
                                        context_options={"storage_state": session} if session else None)

    # ------------------------------------------------------------------ reading

    def run_dir(self, job: Job) -> Optional[Path]:
        return self.runs_dir / job.run if job.run else None

    def trajectory_bytes(self, job: Job) -> Optional[bytes]:
        folder = self.run_dir(job)
        try:
            data = (folder / "trajectory.json").read_bytes() if folder else None
        except FileNotFoundError:
            return None
        if not data:
            return data
        # the run store writes it scrubbed; a file written before a secret was known is scrubbed here
        text = data.decode("utf-8", "replace")
        if redact(text) == text:
            return data
        try:
            return dumps(json.loads(text), indent=2, ensure_ascii=False).encode("utf-8")
        except ValueError:
            return (redact(text) or "").encode("utf-8")

    def screenshot(self, job: Job, index: int) -> Optional[bytes]:
        folder = self.run_dir(job)
        try:
            return (folder / "screenshots" / f"{index:04d}.jpg").read_bytes() if folder else None
        except FileNotFoundError:
            return None

    def steps(self, job_id: str) -> list[dict[str, Any]]:
        """The steps written so far: live ones while the job runs, else the run folder's."""
        live = self._live.get(job_id)
        if live is not None:
            return list(live.steps)
        job = self.store.get(job_id)
        data = self.trajectory_bytes(job) if job is not None else None
        if not data:
            return []
        try:
            return scrub(list(json.loads(data).get("steps") or []))
        except (ValueError, AttributeError):
            return []

    async def follow(self, job_id: str, start: int = 0) -> AsyncIterator[str]:
        """NDJSON lines: each step from ``start`` on as it is written, then the ended job."""
        index = start
        loop = asyncio.get_running_loop()
        last_sent = loop.time()
        while not self.stopping:
            live = self._live.get(job_id)
            event = live.event if live is not None else None
            steps = live.steps if live is not None else self.steps(job_id)
            while index < len(steps):
                yield _line({"event": "step", "index": index, "step": steps[index]})
                index += 1
                last_sent = loop.time()
            if live is None:
                job = self.store.get(job_id)
                if job is None or job.status in ENDED:
                    yield _line({"event": "end", "job": job.model_dump(mode="json") if job else None})
                    return
            if loop.time() - last_sent >= HEARTBEAT:
                yield _line({"event": "heartbeat"})
                last_sent = loop.time()
            if event is None:  # queued: looked at again every half second
                await asyncio.sleep(0.5)
            else:
                try:
                    await asyncio.wait_for(event.wait(), 1.0)
                except asyncio.TimeoutError:
                    pass


class _ServerBrowser:
    """The server's browser as an executor's host: contexts with the server's refusals."""

    def __init__(self, runner: JobRunner, session: Optional[dict[str, Any]] = None):
        self.runner = runner
        self.session = session  # the batch job's own log-in, loaded into each row's context

    async def ensure_running(self) -> None:
        pass  # new_env launches it again when it died

    async def new_env(self, run_dir: Optional[Path] = None, trace: bool = False, **_: Any) -> Any:
        return await self.runner.new_env(run_dir, trace, session=self.session)


class RowExecutor(InProcessExecutor):
    """Runs a batch job's rows on the server: each row waits for one of the server's slots, at
    most ``workers`` rows at a time, in a context of the server's browser; each row's task gets
    the job's allowlist and step limit. The first row that gets a slot marks the job running.
    One attempt per row: a batch's rows have their own retries."""

    name = "serve"

    def __init__(self, runner: JobRunner, job_id: str, spec: dict[str, Any]):
        super().__init__(runner.settings, runner.plugins, int(spec.get("workers") or 1), max_attempts=1)
        self.runner = runner
        self.job_id = job_id
        self.allowed = list(spec.get("allowed_domains") or [])
        self.max_steps = spec.get("max_steps")
        self.session = spec.get("storage_state")

    def worker_hosts(self, n: int) -> list[Any]:
        return [_ServerBrowser(self.runner, self.session)] * n

    def prepare(self, item: WorkItem) -> tuple[Task, Optional[WorkResult]]:
        """The row's task with the job's allowlist and step limit; a row whose values made a start
        URL the server does not serve (a file:, a host outside the allowlist) fails as bad
        inputs, before any browser: as a flow job's would be a 422."""
        task = item.task.model_copy(update={
            "allowed_domains": self.allowed, "max_steps": self.max_steps or item.task.max_steps,
            "metadata": {**item.task.metadata, "serve_job": self.job_id}})
        try:
            self.runner.check_start_url(task.start_url, self.allowed, ("start_url",))
        except SpecError as err:
            record = dataclasses.replace(failed_record(task, item.episode, BAD_INPUTS), status="fail")
            return task, WorkResult(WorkItem(task, item.episode, item.group), record, error=err.message)
        return task, None

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """One of the server's slots; the first row that gets one marks the job running."""
        assert self.runner._slots is not None
        async with self.runner._slots:
            self.runner.store.started(self.job_id)
            yield


def _line(data: dict[str, Any]) -> str:
    """One NDJSON line of a stream: every event (steps, the ended job) is scrubbed here."""
    return json.dumps(scrub(data), ensure_ascii=False) + "\n"


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    message = text[0] if text else ""
    if isinstance(err, OwrlError):
        return message or type(err).__name__
    return f"{type(err).__name__}: {message}" if message else type(err).__name__
