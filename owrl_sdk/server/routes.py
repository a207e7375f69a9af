"""The routes of ``owrl serve``: the jobs under ``/v1`` and the public health check.

Each route reaches the server's :class:`JobRunner` through the ``runner_of`` dependency (the
application holds it in ``app.state``), so the routers are built once, at import, and
:func:`~owrl_sdk.server.app.create_app` only includes them. A request's checks that depend on
the server (its domains, policies, callback rules) happen in the spec builders below, before a
job is queued: what would fail later is a 422 now.
"""

from __future__ import annotations

import asyncio
import shutil
import uuid
from pathlib import Path
from typing import Annotated, Any, Optional, Union

from fastapi import APIRouter, Body, Depends, File, Form, HTTPException, Query, Request, UploadFile
from fastapi import Path as PathParam
from fastapi.responses import Response, StreamingResponse
from pydantic import ValidationError

from owrl_sdk.version import __version__
from owrl_sdk.browser.storage import checked_state
from owrl_sdk.formats.documents import FLOW_SCHEMA, Flow
from owrl_sdk.errors import UsageError
from owrl_sdk.flows.flowplayer import FLOW_POLICY
from owrl_sdk.rules.inputs import fill, placeholders
from owrl_sdk.formats.report import CSP
from owrl_sdk.server.jobs import Job, JobStatus
from owrl_sdk.server.models import (FLOW_EXAMPLE, INPUTS_FLOW_EXAMPLE, MAX_CSV_BYTES, MAX_ROWS, BatchJobRequest, Domain, ErrorDetail,
                                   FlowJobRequest, Health, JobId, JobList, RequestValidationErrorOf, StepsPage, TaskJobRequest)
from owrl_sdk.server.runner import JobEnded, JobNotFound, JobRunner, SpecError, resolve_job_inputs


def runner_of(request: Request) -> JobRunner:
    """The application's job runner (set by ``create_app``)."""
    runner: JobRunner = request.app.state.runner
    return runner


Runner = Annotated[JobRunner, Depends(runner_of)]

#: ``/health``: outside ``/v1``, no token.
public = APIRouter()
#: Everything under ``/v1`` (``create_app`` adds the prefix, the bearer scheme and the error answers).
jobs = APIRouter()


# ---------------------------------------------------------------------------- checks, before a job is queued


def copy_capped(source: Any, target: Path, limit: int, chunk: int = 64 * 1024) -> bool:
    """Copy the file object ``source`` to ``target`` in chunks; False (``target`` removed) as
    soon as more than ``limit`` bytes were read."""
    size = 0
    with open(target, "wb") as out:
        while True:
            block = source.read(chunk)
            if not block:
                return True
            size += len(block)
            if size > limit:
                break
            out.write(block)
    target.unlink(missing_ok=True)
    return False


def session_of(state: Optional[dict[str, Any]], loc: tuple[str, ...]) -> dict[str, Any]:
    """A job's own storage state, checked, as a spec entry (its values become secrets of the
    job's own scope when it runs, not of the server's)."""
    if state is None:
        return {}
    try:
        return {"storage_state": checked_state(state, "storage_state", register=False)}
    except UsageError as err:
        raise SpecError(loc, str(err)) from None


def check_schema(flow: Flow, loc: tuple[str, ...]) -> None:
    if flow.schema_ != FLOW_SCHEMA:
        raise SpecError(loc + ("schema",), f"schema {flow.schema_!r} is not {FLOW_SCHEMA}")


def flow_spec(runner: JobRunner, flow: Flow, inputs: dict[str, Any], start_url: Optional[str], task: Optional[str],
              max_steps: Optional[int], allowed_domains: list[str], loc: tuple[str, ...]) -> dict[str, Any]:
    """A flow job's spec: its inputs resolved, its start URL filled in and checked."""
    check_schema(flow, loc)
    values = resolve_job_inputs(flow, inputs, ("body", "inputs"))
    url = start_url or flow.start_url
    if not url:
        raise SpecError(("query", "start_url"), "the flow has no start_url: put one in the flow or pass ?start_url=")
    allowed = runner.check_domains(list(allowed_domains), ("query", "allowed_domains"))
    url = fill(url, values, url=True) if values else url  # the job shows (and runs) the values filled in
    runner.check_start_url(url, allowed, ("query" if start_url else "body", "start_url"))
    steps = max_steps or max(runner.settings.max_steps, len(flow.turns))
    text = task or flow.task or "play the flow"
    # the job shows the task text and start URL filled in; its run prepares its task from the
    # request as given (owrl_sdk.flows.runrequest, as every door does), so nothing is filled in twice
    return {"task": fill(text, values) if values else text, "start_url": url, "policy": FLOW_POLICY,
            "max_steps": steps, "allowed_domains": allowed, "inputs": values,
            "request": {"url": start_url or flow.start_url, "task": task or flow.task or "play the flow"},
            "flow": flow.model_dump(mode="json", by_alias=True, exclude_none=True)}


def batch_spec(runner: JobRunner, flow: Flow, rows: Optional[list[dict[str, Any]]], inputs: dict[str, Any],
               workers: int, start_url: Optional[str], max_steps: Optional[int], allowed_domains: list[str],
               loc: tuple[str, ...]) -> dict[str, Any]:
    """A batch job's spec; a start URL without inputs is checked now, one with inputs per row."""
    check_schema(flow, loc)
    url = start_url or flow.start_url
    if not url:
        raise SpecError(("body", "start_url"), "the flow has no start_url: put one in the flow or give start_url")
    allowed = runner.check_domains(list(allowed_domains), ("body", "allowed_domains"))
    if not placeholders(url):  # one with an input is checked per row, by the browser
        runner.check_start_url(url, allowed, ("body", "start_url"))
    return {"task": flow.task or "play the flow once per row", "start_url": url, "url": start_url,
            "policy": FLOW_POLICY, "max_steps": max_steps, "allowed_domains": allowed, "inputs": inputs,
            "workers": workers, "rows": rows, "flow": flow.model_dump(mode="json", by_alias=True, exclude_none=True)}


def check_batch(runner: JobRunner, job_id: str, spec: dict[str, Any], loc: tuple[str, ...]) -> dict[str, Any]:
    """What would stop the whole batch (a CSV header against the flow's inputs, ...) is a 422;
    else the batch's rows, all pending."""
    try:
        return runner.make_batch(job_id, spec).summary()  # type: ignore[no-any-return]
    except UsageError as err:
        message = str(err).replace(str(runner.batch_dir(job_id)) + "/", "")
        raise SpecError(loc, message) from None


def queued_batch(runner: JobRunner, job: Job, rows: dict[str, Any]) -> Job:
    """The queued job, showing its rows pending (before its task writes them)."""
    runner.store.set_batch(job.id, rows)
    return runner.store.get(job.id) or job


def job_or_404(runner: JobRunner, job_id: str) -> Job:
    job = runner.store.get(job_id)
    if job is None:
        raise HTTPException(404, f"no job {job_id}")
    return job


# ---------------------------------------------------------------------------- submitting


@public.get("/health", response_model=Health, tags=["server"])
async def health() -> Health:
    """Liveness; needs no token."""
    return Health(status="ok", version=__version__)


@jobs.post("/jobs/task", response_model=Job, status_code=201, tags=["jobs"])
async def submit_task(body: TaskJobRequest, runner: Runner) -> Job:
    """Queue a task for a policy. Answers at once; poll the job or stream its steps."""
    policy = body.policy or runner.settings.policy
    runner.check_policy(policy)
    runner.check_policy_options(policy, body.policy_options, body.model, ("body", "policy_options"))
    allowed = runner.check_domains(list(body.allowed_domains), ("body", "allowed_domains"))
    runner.check_start_url(body.start_url, allowed, ("body", "start_url"))
    spec = {"task": body.task, "start_url": body.start_url, "policy": policy, "policy_options": body.policy_options,
            "model": body.model, "max_steps": body.max_steps, "allowed_domains": allowed,
            "callback_url": runner.check_callback(body.callback_url, ("body", "callback_url")),
            **session_of(body.storage_state, ("body", "storage_state"))}
    return runner.submit("task", spec)


@jobs.post("/jobs/flow", response_model=Job, status_code=201, tags=["jobs"])
async def submit_flow(
    body: Annotated[Union[FlowJobRequest, Flow], Body(openapi_examples={
        "demo": {"summary": "a one-turn flow on the demo shop", "value": FLOW_EXAMPLE},
        "inputs": {"summary": "a flow and its inputs", "value": {"flow": INPUTS_FLOW_EXAMPLE,
                                                                 "inputs": {"category": "shoes"}}}})],
    runner: Runner,
    start_url: Annotated[Optional[str], Query(min_length=1, max_length=8_192,
                                              description="start URL (default: the flow's start_url)")] = None,
    task: Annotated[Optional[str], Query(min_length=1, max_length=20_000,
                                         description="task text (default: the flow's task)")] = None,
    max_steps: Annotated[Optional[int], Query(ge=1, le=1_000,
                                              description="steps before the episode ends (default: enough for the flow)")] = None,
    allowed_domains: Annotated[list[Domain], Query(max_length=100, description="hosts the episode may visit; repeat")] = [],  # noqa: B006
    callback_url: Annotated[Optional[str], Query(min_length=1, max_length=2_048,
                                                 description="POSTed a signed summary when the job ends")] = None,
) -> Job:
    """Queue a flow for the scripted policy. The body is an owrl.flow/1 document, or
    ``{"flow": ..., "inputs": {...}}`` to give its inputs: every input is checked before the
    job is queued (a 422 names each bad one). The ended job carries the flow's ``outputs``."""
    flow, inputs, loc = (body.flow, dict(body.inputs), ("body", "flow")) if isinstance(body, FlowJobRequest) \
        else (body, {}, ("body",))
    given = body.callback_url if isinstance(body, FlowJobRequest) else None
    where = ("body", "callback_url") if given else ("query", "callback_url")
    spec = flow_spec(runner, flow, inputs, start_url, task, max_steps, list(allowed_domains), loc)
    spec["callback_url"] = runner.check_callback(given or callback_url, where)
    if isinstance(body, FlowJobRequest):
        spec.update(session_of(body.storage_state, ("body", "storage_state")))
    return runner.submit("flow", spec)


@jobs.post("/jobs/batch", response_model=Job, status_code=201, tags=["jobs"])
async def submit_batch(body: BatchJobRequest, runner: Runner) -> Job:
    """Queue a batch: the flow once per row of input values, as one job. ``GET`` of the job
    shows each row's status, inputs, outputs and failure as the rows end (``batch``)."""
    spec = batch_spec(runner, body.flow, [dict(r) for r in body.rows], dict(body.inputs), body.workers,
                      body.start_url, body.max_steps, list(body.allowed_domains), ("body", "flow"))
    spec["callback_url"] = runner.check_callback(body.callback_url, ("body", "callback_url"))
    spec.update(session_of(body.storage_state, ("body", "storage_state")))
    rows = await asyncio.to_thread(check_batch, runner, "check", spec, ("body", "rows"))  # off the event loop
    return queued_batch(runner, runner.submit("batch", spec), rows)


@jobs.post("/jobs/batch/csv", response_model=Job, status_code=201, tags=["jobs"],
           openapi_extra={"requestBody": {"content": {"multipart/form-data": {"encoding": {
               "flow": {"contentType": "application/json"}, "rows": {"contentType": "text/csv"}}}}}})
async def submit_batch_csv(
    flow: Annotated[Union[UploadFile, str], Form(description="the owrl.flow/1 document (JSON): a field "
                                                              "(curl -F 'flow=<f.json') or a file (-F flow=@f.json)")],
    rows: Annotated[UploadFile, File(description="a CSV file: a header of input names, then one row per run "
                                                 "(UTF-8; , ; or tab separated; an empty cell takes the default)")],
    runner: Runner,
    workers: Annotated[int, Form(ge=1, le=64, description="rows at a time")] = 1,
    start_url: Annotated[Optional[str], Form(min_length=1, max_length=8_192,
                                             description="start URL (default: the flow's start_url)")] = None,
    max_steps: Annotated[Optional[int], Form(ge=1, le=1_000, description="steps before a row's episode ends")] = None,
    callback_url: Annotated[Optional[str], Form(min_length=1, max_length=2_048,
                                                description="POSTed a signed summary when the batch ends")] = None,
) -> Job:
    """Queue a batch from a CSV upload (multipart/form-data: ``flow``, the flow's JSON, and
    ``rows``, the CSV file). A header that names a column the flow takes no input for, or
    lacks one it requires, is a 422; a row whose values are bad ends failed, alone."""
    text = flow.encode("utf-8") if isinstance(flow, str) else await flow.read(MAX_CSV_BYTES + 1)
    if len(text) > MAX_CSV_BYTES:
        raise SpecError(("body", "flow"), f"the flow is over {MAX_CSV_BYTES} bytes")
    try:
        parsed = Flow.model_validate_json(text)
    except ValidationError as err:
        raise RequestValidationErrorOf(err, ("body", "flow")) from None
    spec = batch_spec(runner, parsed, None, {}, workers, start_url, max_steps, [], ("body", "flow"))
    spec["callback_url"] = runner.check_callback(callback_url, ("body", "callback_url"))
    spec["rows_file"] = "rows.csv"
    return await queue_csv_batch(runner, rows, spec)


async def queue_csv_batch(runner: JobRunner, rows: UploadFile, spec: dict[str, Any]) -> Job:
    """Stage the uploaded CSV in a folder of its own, check its rows, then queue the batch and
    give it the folder; a refused upload leaves nothing behind."""
    staging = f".upload-{uuid.uuid4().hex}"
    folder = runner.batch_dir(staging)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        # the upload (spooled to disk past 1 MiB while the form was read) is copied in chunks,
        # off the event loop, and refused where it passes the limit: never whole in memory
        if not await asyncio.to_thread(copy_capped, rows.file, folder / "rows.csv", MAX_CSV_BYTES):
            raise SpecError(("body", "rows"), f"the CSV file is over {MAX_CSV_BYTES} bytes")
        # read off the event loop (health checks and other jobs' streams go on), the row cap
        # applied while reading
        pending = await asyncio.to_thread(check_batch, runner, staging, spec, ("body", "rows"))
        if pending["rows"] > MAX_ROWS:  # as many as a JSON batch may have
            raise SpecError(("body", "rows"), f"the CSV file has {pending['rows']} rows; a batch takes at most "
                                              f"{MAX_ROWS}: split it into several batches")
        job = runner.submit("batch", spec)  # its task starts at the next await: the folder is in place
        folder.rename(runner.batch_dir(job.id))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return queued_batch(runner, job, pending)


# ---------------------------------------------------------------------------- reading and cancelling


@jobs.get("/jobs", response_model=JobList, tags=["jobs"])
async def list_jobs(runner: Runner, status: Optional[JobStatus] = None,
                    limit: Annotated[int, Query(ge=1, le=1_000)] = 100) -> JobList:
    """Jobs, newest first."""
    return JobList(jobs=runner.store.list(status, limit))


@jobs.get("/jobs/{job_id}", response_model=Job, tags=["jobs"])
async def get_job(job_id: JobId, runner: Runner) -> Job:
    return job_or_404(runner, job_id)


@jobs.post("/jobs/{job_id}/cancel", response_model=Job, tags=["jobs"],
           responses={409: {"model": ErrorDetail, "description": "the job already ended"}})
async def cancel_job(job_id: JobId, runner: Runner) -> Job:
    """Cancel a queued or running job. A running episode closes as aborted (infra.cancelled)."""
    try:
        return await runner.cancel(job_id)
    except JobNotFound:
        raise HTTPException(404, f"no job {job_id}") from None
    except JobEnded as err:
        raise HTTPException(409, f"job {job_id} already ended ({err.job.status}): nothing to cancel") from None


@jobs.get("/jobs/{job_id}/steps", response_model=StepsPage, tags=["steps"])
async def get_steps(job_id: JobId, runner: Runner,
                    start: Annotated[int, Query(ge=0, description="first step index")] = 0) -> StepsPage:
    """The steps written so far (all of them once the job ended)."""
    job = job_or_404(runner, job_id)
    steps = runner.steps(job_id)
    return StepsPage(job_id=job_id, status=job.status, start=start, steps=steps[start:], next=max(start, len(steps)))


@jobs.get("/jobs/{job_id}/steps/stream", tags=["steps"], response_class=StreamingResponse,
          responses={200: {"content": {"application/x-ndjson": {"schema": {"type": "string"}}},
                           "description": "one JSON object a line: {event: step, index, step}, "
                                          "{event: heartbeat} after 15 s of quiet, and last {event: end, job}"}})
async def stream_steps(job_id: JobId, runner: Runner,
                       start: Annotated[int, Query(ge=0, description="first step index")] = 0) -> StreamingResponse:
    """Each step as it is written, then the ended job (NDJSON)."""
    job_or_404(runner, job_id)
    return StreamingResponse(runner.follow(job_id, start), media_type="application/x-ndjson",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


@jobs.get("/jobs/{job_id}/trajectory", tags=["files"],
          responses={200: {"content": {"application/json": {"schema": {"type": "object"}}},
                           "description": "the run folder's trajectory.json (owrl.trajectory/1), as written so far"}})
async def get_trajectory(job_id: JobId, runner: Runner) -> Response:
    job = job_or_404(runner, job_id)
    data = runner.trajectory_bytes(job)
    if data is None:
        if job.kind == "batch":
            raise HTTPException(404, f"job {job_id} is a batch: each row has its own run folder (batch.results[].run_dir)")
        raise HTTPException(404, f"job {job_id} has no trajectory yet ({job.status})")
    return Response(data, media_type="application/json")


@jobs.get("/jobs/{job_id}/screenshots/{index}", tags=["files"],
          responses={200: {"content": {"image/jpeg": {"schema": {"type": "string", "format": "binary"}}},
                           "description": "the screenshot of step INDEX"}})
async def get_screenshot(job_id: JobId, index: Annotated[int, PathParam(ge=0, le=99_999)], runner: Runner) -> Response:
    job = job_or_404(runner, job_id)
    data = runner.screenshot(job, index)
    if data is None:
        raise HTTPException(404, f"job {job_id} has no screenshot for step {index}")
    return Response(data, media_type="image/png" if data.startswith(b"\x89PNG") else "image/jpeg")


@jobs.get("/jobs/{job_id}/report", tags=["files"],
          responses={200: {"content": {"text/html": {"schema": {"type": "string"}}},
                           "description": "the job's report.html: a run's steps, or a batch's rows and failures"}})
async def get_report(job_id: JobId, runner: Runner) -> Response:
    job = job_or_404(runner, job_id)
    folder = runner.batch_dir(job.id) if job.kind == "batch" else runner.run_dir(job)
    page = folder / "report.html" if folder is not None else None
    if page is None or not page.is_file():
        raise HTTPException(404, f"job {job_id} has no report yet ({job.status})")
    # the page's own policy, as a header too: no script runs, nothing loads from elsewhere
    return Response(page.read_bytes(), media_type="text/html; charset=utf-8",
                    headers={"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff"})


@jobs.get("/jobs/{job_id}/batch.csv", tags=["files"],
          responses={200: {"content": {"text/csv": {"schema": {"type": "string"}}},
                           "description": "a batch job's batch.csv: one line per row, spreadsheet-safe"}})
async def get_batch_csv(job_id: JobId, runner: Runner) -> Response:
    job = job_or_404(runner, job_id)
    if job.kind != "batch":
        raise HTTPException(404, f"job {job_id} is not a batch")
    table = runner.batch_dir(job.id) / "batch.csv"
    if not table.is_file():
        raise HTTPException(404, f"batch {job_id} has no batch.csv yet ({job.status})")
    return Response(table.read_bytes(), media_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition": f'attachment; filename="{job.id}.csv"'})
