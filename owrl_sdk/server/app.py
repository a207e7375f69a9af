"""The FastAPI application of ``owrl serve``.

Every route under ``/v1`` needs ``Authorization: Bearer TOKEN`` (checked in constant time
by :class:`BearerAuth`, before the request is read); ``/health`` and ``/openapi.json`` are
public: they hold no job data. Bad input is a 4xx with a ``detail`` that says what is
wrong: 422 for a body, query or path value that does not validate (FastAPI's shape,
``[{"loc": [...], "msg": "..."}]``), 404 for an unknown job or file, 409 for cancelling a
job that already ended.
"""

from __future__ import annotations

import asyncio

import hmac
import json
import os
import shutil
import uuid
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, AsyncIterator, Optional, Union

from fastapi import APIRouter, Body, Depends, FastAPI, File, Form, HTTPException, Path as PathParam, Query, Request, UploadFile
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import JSONResponse, Response, StreamingResponse
from fastapi.security import HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__
from ..config import Settings, load_settings
from ..documents import FLOW_SCHEMA, Flow
from ..errors import UsageError
from ..flowplayer import FLOW_POLICY
from ..plugins import Plugins
from .jobs import Job, JobStatus, JobStore
from .runner import InputsError, JobEnded, JobNotFound, JobRunner, SpecError, resolve_job_inputs

PUBLIC_PATHS = frozenset({"/health", "/openapi.json"})

#: Set to 1 (true, yes) to let jobs open local files and the browser's own pages (off by default).
ALLOW_LOCAL_FILES_ENV = "OWRL_SERVE_ALLOW_LOCAL_FILES"

Domain = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")]
JobId = Annotated[str, PathParam(description="the job's id", max_length=64)]

#: The flow the OpenAPI document shows (and test tools send): a one-page walk on the demo shop.
FLOW_EXAMPLE = {
    "schema": FLOW_SCHEMA, "task": "List the demo shop's shirts", "start_url": "demo:shop/",
    "turns": [
        {"thought": "Answer the cookie banner, then open the Shirts category.",
         "calls": [{"name": "click", "arguments": {"selector": "role=button[name=\"Accept cookies\"]"}},
                   {"name": "click", "arguments": {"selector": "role=link[name=\"Shirts\"]"},
                    "expect": {"url_contains": "category=shirts"}}]},
        {"thought": "The shirts are listed.", "calls": [{"name": "done", "arguments": {"response": "shirts listed"}}]},
    ],
}

#: A flow with an input and an output: the category to open is the input, the page's heading
#: is saved as an output.
INPUTS_FLOW_EXAMPLE: dict[str, Any] = {
    "schema": FLOW_SCHEMA, "task": "Read the heading of a category of the demo shop",
    "start_url": "demo:shop/products?category={{input:category}}",
    "inputs": {"category": {"type": "string", "default": "shirts", "description": "a category of the shop"}},
    "turns": [
        {"calls": [{"name": "extract", "arguments": {"selector": "h1"}, "save_as": "heading"},
                   {"name": "done", "arguments": {"response": "read"}}]},
    ],
}

#: Most rows a batch job takes, and the largest CSV upload (bytes).
MAX_ROWS = 10_000
MAX_CSV_BYTES = 5_000_000
#: The largest request body (bytes): room for a CSV upload's two files, or a JSON batch of
#: MAX_ROWS rows; a bigger one is a 413, read no further than the limit.
MAX_BODY_BYTES = 16 * 1024 * 1024

InputValue = Union[str, int, float, bool, None]


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


# ---------------------------------------------------------------------------- bodies


class TaskJobRequest(BaseModel):
    """A task for a policy (a model, or a baseline) to carry out from a start page."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"task": "What does the Canvas Tote Bag cost?", "start_url": "demo:shop/", "max_steps": 3}]})

    task: str = Field(min_length=1, max_length=20_000, description="what the agent should do")
    start_url: str = Field(min_length=1, max_length=8_192,
                           description="http(s) URL, or a plugin scheme such as demo:shop")
    policy: Optional[str] = Field(None, min_length=1, max_length=200,
                                  description="policy plugin (default: the server's 'policy' setting)")
    policy_options: dict[str, Any] = Field(default_factory=dict,
                                           description="keyword options for the policy; kept out of the job's public view")
    model: Optional[str] = Field(None, min_length=1, max_length=4_096, description="model id or local path, for model policies")
    max_steps: Optional[int] = Field(None, ge=1, le=1_000, description="steps before the episode ends as failed")
    allowed_domains: list[Domain] = Field(default_factory=list, max_length=100,
                                          description="hosts the episode may visit (within the server's own list)")
    callback_url: Optional[str] = Field(None, min_length=1, max_length=2_048,
                                        description="POSTed a signed summary when the job ends (see serve.md: inside "
                                                    "the server's allowed domains, with OWRL_SERVE_WEBHOOK_KEY set)")
    storage_state: Optional[dict[str, Any]] = Field(
        None, description="a saved log-in for this job only: a Playwright storage state (cookies and origins, as "
                          "owrl run --save-storage writes it). Held in the server's memory, never stored; its "
                          "values are secrets (redacted wherever they would show)")


class FlowJobRequest(BaseModel):
    """A flow and the values of its inputs (``{{input:NAME}}``)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"flow": INPUTS_FLOW_EXAMPLE, "inputs": {"category": "shoes"}}]})

    flow: Flow = Field(description="the owrl.flow/1 document")
    inputs: dict[str, InputValue] = Field(
        default_factory=dict, max_length=1_000,
        description="a value for each input the flow takes (declared, or used by a placeholder); the flow's "
                    "defaults fill the rest. Values are typed as declared; {{secret:...}} is refused")
    callback_url: Optional[str] = Field(None, min_length=1, max_length=2_048,
                                        description="POSTed a signed summary when the job ends (see serve.md: inside "
                                                    "the server's allowed domains, with OWRL_SERVE_WEBHOOK_KEY set)")
    storage_state: Optional[dict[str, Any]] = Field(
        None, description="a saved log-in for this job only: a Playwright storage state (cookies and origins, as "
                          "owrl run --save-storage writes it). Held in the server's memory, never stored; its "
                          "values are secrets (redacted wherever they would show)")


class BatchJobRequest(BaseModel):
    """A flow played once per row of input values: one job, one row after another (``workers`` at a time)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"flow": INPUTS_FLOW_EXAMPLE, "rows": [{"category": "shirts"}, {"category": "shoes"}], "workers": 1}]})

    flow: Flow = Field(description="the owrl.flow/1 document")
    rows: list[dict[str, InputValue]] = Field(
        min_length=1, max_length=MAX_ROWS,
        description="one object of input values per row; a row whose values do not make the flow's inputs "
                    "ends failed (task.bad_inputs) and the others run")
    inputs: dict[str, InputValue] = Field(default_factory=dict, max_length=1_000,
                                          description="values every row gets (a row's own value wins)")
    workers: int = Field(1, ge=1, le=64, description="rows at a time (each takes one of the server's job slots)")
    start_url: Optional[str] = Field(None, min_length=1, max_length=8_192,
                                     description="start URL (default: the flow's start_url)")
    max_steps: Optional[int] = Field(None, ge=1, le=1_000, description="steps before a row's episode ends")
    allowed_domains: list[Domain] = Field(default_factory=list, max_length=100,
                                          description="hosts the rows may visit (within the server's own list)")
    callback_url: Optional[str] = Field(None, min_length=1, max_length=2_048,
                                        description="POSTed a signed summary when the job ends (see serve.md: inside "
                                                    "the server's allowed domains, with OWRL_SERVE_WEBHOOK_KEY set)")
    storage_state: Optional[dict[str, Any]] = Field(
        None, description="a saved log-in for this job only: a Playwright storage state (cookies and origins, as "
                          "owrl run --save-storage writes it). Held in the server's memory, never stored; its "
                          "values are secrets (redacted wherever they would show)")


class JobList(BaseModel):
    jobs: list[Job]


class StepsPage(BaseModel):
    job_id: str
    status: JobStatus
    start: int = Field(description="index of the first step in steps")
    steps: list[dict[str, Any]] = Field(description="steps as in the trajectory file (owrl.trajectory/1), secrets redacted")
    next: int = Field(description="the start to ask for next time")


class Health(BaseModel):
    status: str
    version: str


class ErrorDetail(BaseModel):
    detail: Any


ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorDetail, "description": "missing or wrong bearer token"},
    404: {"model": ErrorDetail, "description": "no such job (or no such file yet)"},
    413: {"model": ErrorDetail, "description": "a request body over MAX_BODY_BYTES (16 MiB)"},
    422: {"model": ErrorDetail, "description": "a value that does not validate"},
}


class RequestValidationErrorOf(Exception):
    """A pydantic error in a form field (the flow of a CSV upload), in FastAPI's 422 shape."""

    def __init__(self, err: ValidationError, loc: tuple[str, ...]):
        super().__init__(str(err))
        self.errors = [{"loc": [*loc, *e["loc"]], "msg": e["msg"], "type": e["type"]}
                       for e in err.errors(include_url=False, include_input=False)]


# ---------------------------------------------------------------------------- auth


class BearerAuth:
    """ASGI middleware: every path but the public ones needs the bearer token."""

    def __init__(self, app: Any, token: str):
        self.app = app
        self.token = token.encode("utf-8")

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] in PUBLIC_PATHS or self._authorised(scope):
            await self.app(scope, receive, send)
            return
        body = json.dumps({"detail": "missing or wrong bearer token: send 'Authorization: Bearer TOKEN'"}).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", b"Bearer")]})
        await send({"type": "http.response.body", "body": body})

    def _authorised(self, scope: dict[str, Any]) -> bool:
        given = b""
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                given = value
        scheme, _, credentials = given.partition(b" ")
        # compare_digest takes as long whatever the token's content: nothing to learn by timing
        return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(), self.token)


#: The header a client without a token sends on requests that change something (``--no-auth``).
CLIENT_HEADER = "x-owrl-client"
_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


class LocalOnly:
    """ASGI middleware for ``--no-auth`` (a server on 127.0.0.1 without a token). Without it,
    any web page the user opens could use the server: a page's form or ``no-cors`` fetch sends
    a multipart POST with no preflight, and a DNS-rebound name reads the answers.

    - the ``Host`` header must name the loopback address (``127.0.0.1``, ``localhost`` or
      ``[::1]``, any port): a rebound name is refused with 421;
    - a request that is not a GET, HEAD or OPTIONS must be JSON (``Content-Type:
      application/json``) or carry ``X-Owrl-Client`` (any value): a browser sends neither
      across origins without a preflight, which this server never allows. Else 403."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        host = headers.get(b"host", b"").decode("latin-1").strip().lower()
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        if name not in _LOOPBACK_HOSTS:
            await self._refuse(send, 421, f"this server answers to 127.0.0.1 only, not to Host {host!r}")
            return
        content_type = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        if scope.get("method", "GET") not in ("GET", "HEAD", "OPTIONS") and content_type != b"application/json" \
                and CLIENT_HEADER.encode() not in headers:
            await self._refuse(send, 403, "without a token, a request that changes something must be JSON or send "
                                          "the header X-Owrl-Client (what a web page cannot send)")
            return
        await self.app(scope, receive, send)

    @staticmethod
    async def _refuse(send: Any, status: int, detail: str) -> None:
        body = json.dumps({"detail": detail}).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


class BodyLimit:
    """ASGI middleware: a request whose body is over ``max_bytes`` gets a 413. A declared
    ``Content-Length`` over it is answered before the body is read; a body sent in chunks is
    counted as it arrives and the request stops where it passes the limit."""

    def __init__(self, app: Any, max_bytes: int = MAX_BODY_BYTES):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length", b"0")
        if not declared.isdigit() or int(declared) > self.max_bytes:
            body = json.dumps({"detail": self.message}).encode()
            await send({"type": "http.response.start", "status": 413,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                    (b"connection", b"close")]})
            await send({"type": "http.response.body", "body": body})
            return
        received = 0

        async def counted() -> dict[str, Any]:
            nonlocal received
            message: dict[str, Any] = await receive()
            received += len(message.get("body", b""))
            if received > self.max_bytes:  # an HTTPException: FastAPI passes it on as it is, not as a 400
                raise HTTPException(413, self.message)
            return message

        await self.app(scope, counted, send)

    @property
    def message(self) -> str:
        return f"the request body is over {self.max_bytes} bytes, the most this server reads"


# ---------------------------------------------------------------------------- app


def create_app(data_dir: Path, token: Optional[str], max_concurrent: int = 1,
               settings: Optional[Settings] = None, plugins: Optional[Plugins] = None,
               allow_local_files: Optional[bool] = None) -> FastAPI:
    """The application; ``token`` None serves without authentication (loopback only, checked by
    the command). Jobs may not open local files (``file:``, ``view-source:``, ``chrome:``, ...)
    unless ``allow_local_files`` is true; None reads ``OWRL_SERVE_ALLOW_LOCAL_FILES``."""
    data_dir = Path(data_dir)
    settings = settings or load_settings()
    plugins = plugins or Plugins()
    store = JobStore(data_dir / "jobs.sqlite3")
    if allow_local_files is None:
        allow_local_files = os.environ.get(ALLOW_LOCAL_FILES_ENV, "").strip().lower() in ("1", "true", "yes")
    runner = JobRunner(store, data_dir, settings, plugins, max_concurrent=max_concurrent,
                       allow_local_files=allow_local_files)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await runner.start()
        try:
            yield
        finally:
            await runner.stop()
            store.close()

    app = FastAPI(title="owrl serve", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="Runs owrl tasks and flows as jobs. See docs/serve.md.")
    app.state.runner = runner
    # the bearer scheme, declared so the OpenAPI document shows it; BearerAuth enforces it
    security = [Depends(HTTPBearer(auto_error=False, description="the server's OWRL_SERVE_TOKEN"))] if token else []
    v1 = APIRouter(prefix="/v1", dependencies=security, responses=ERRORS)

    @app.exception_handler(SpecError)
    async def spec_error(request: Request, err: SpecError) -> JSONResponse:
        return JSONResponse({"detail": [{"loc": list(err.loc), "msg": err.message, "type": "value_error"}]}, status_code=422)

    @app.exception_handler(InputsError)
    async def inputs_error(request: Request, err: InputsError) -> JSONResponse:
        return JSONResponse({"detail": err.errors}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, err: StarletteHTTPException) -> Response:
        multipart = request.headers.get("content-type", "").lower().startswith("multipart/")
        if err.status_code == 400 and multipart:  # the form itself could not be read (a field over 1 MiB, ...)
            return JSONResponse({"detail": [{"loc": ["body"], "msg": f"the form could not be read: {err.detail} "
                                             "(send a flow over 1 MiB as a file: -F flow=@flow.json)",
                                             "type": "value_error"}]}, status_code=422)
        if err.status_code == 400:  # a body FastAPI could not even decode: as bad as invalid JSON
            return JSONResponse({"detail": [{"loc": ["body"], "msg": "the body is not JSON in UTF-8",
                                             "type": "json_invalid"}]}, status_code=422)
        return await http_exception_handler(request, err)

    def job_or_404(job_id: str) -> Job:
        job = store.get(job_id)
        if job is None:
            raise HTTPException(404, f"no job {job_id}")
        return job

    @app.get("/health", response_model=Health, tags=["server"])
    async def health() -> Health:
        """Liveness; needs no token."""
        return Health(status="ok", version=__version__)

    @v1.post("/jobs/task", response_model=Job, status_code=201, tags=["jobs"])
    async def submit_task(body: TaskJobRequest) -> Job:
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

    def session_of(state: Optional[dict[str, Any]], loc: tuple[str, ...]) -> dict[str, Any]:
        """A job's own storage state, checked (its values made secrets), as a spec entry."""
        if state is None:
            return {}
        from ..browser.storage import checked_state

        try:
            return {"storage_state": checked_state(state, "storage_state")}
        except UsageError as err:
            raise SpecError(loc, str(err)) from None

    def flow_spec(flow: Flow, inputs: dict[str, Any], start_url: Optional[str], task: Optional[str],
                  max_steps: Optional[int], allowed_domains: list[str], loc: tuple[str, ...]) -> dict[str, Any]:
        from ..inputs import fill

        if flow.schema_ != FLOW_SCHEMA:
            raise SpecError(loc + ("schema",), f"schema {flow.schema_!r} is not {FLOW_SCHEMA}")
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
        # request as given (owrl_sdk.runrequest, as every door does), so nothing is filled in twice
        return {"task": fill(text, values) if values else text, "start_url": url, "policy": FLOW_POLICY,
                "max_steps": steps, "allowed_domains": allowed, "inputs": values,
                "request": {"url": start_url or flow.start_url, "task": task or flow.task or "play the flow"},
                "flow": flow.model_dump(mode="json", by_alias=True, exclude_none=True)}

    @v1.post("/jobs/flow", response_model=Job, status_code=201, tags=["jobs"])
    async def submit_flow(
        body: Annotated[Union[FlowJobRequest, Flow], Body(openapi_examples={
            "demo": {"summary": "a one-turn flow on the demo shop", "value": FLOW_EXAMPLE},
            "inputs": {"summary": "a flow and its inputs", "value": {"flow": INPUTS_FLOW_EXAMPLE,
                                                                     "inputs": {"category": "shoes"}}}})],
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
        spec = flow_spec(flow, inputs, start_url, task, max_steps, list(allowed_domains), loc)
        spec["callback_url"] = runner.check_callback(given or callback_url, where)
        if isinstance(body, FlowJobRequest):
            spec.update(session_of(body.storage_state, ("body", "storage_state")))
        return runner.submit("flow", spec)

    def batch_spec(flow: Flow, rows: Optional[list[dict[str, Any]]], inputs: dict[str, Any], workers: int,
                   start_url: Optional[str], max_steps: Optional[int], allowed_domains: list[str],
                   loc: tuple[str, ...]) -> dict[str, Any]:
        if flow.schema_ != FLOW_SCHEMA:
            raise SpecError(loc + ("schema",), f"schema {flow.schema_!r} is not {FLOW_SCHEMA}")
        url = start_url or flow.start_url
        if not url:
            raise SpecError(("body", "start_url"), "the flow has no start_url: put one in the flow or give start_url")
        allowed = runner.check_domains(list(allowed_domains), ("body", "allowed_domains"))
        from ..inputs import placeholders

        if not placeholders(url):  # one with an input is checked per row, by the browser
            runner.check_start_url(url, allowed, ("body", "start_url"))
        return {"task": flow.task or "play the flow once per row", "start_url": url, "url": start_url,
                "policy": FLOW_POLICY, "max_steps": max_steps, "allowed_domains": allowed, "inputs": inputs,
                "workers": workers, "rows": rows, "flow": flow.model_dump(mode="json", by_alias=True, exclude_none=True)}

    def check_batch(job_id: str, spec: dict[str, Any], loc: tuple[str, ...]) -> dict[str, Any]:
        """What would stop the whole batch (a CSV header against the flow's inputs, ...) is a 422;
        else the batch's rows, all pending."""
        try:
            return runner.make_batch(job_id, spec).summary()  # type: ignore[no-any-return]
        except UsageError as err:
            message = str(err).replace(str(runner.batch_dir(job_id)) + "/", "")
            raise SpecError(loc, message) from None

    @v1.post("/jobs/batch", response_model=Job, status_code=201, tags=["jobs"])
    async def submit_batch(body: BatchJobRequest) -> Job:
        """Queue a batch: the flow once per row of input values, as one job. ``GET`` of the job
        shows each row's status, inputs, outputs and failure as the rows end (``batch``)."""
        spec = batch_spec(body.flow, [dict(r) for r in body.rows], dict(body.inputs), body.workers, body.start_url,
                          body.max_steps, list(body.allowed_domains), ("body", "flow"))
        spec["callback_url"] = runner.check_callback(body.callback_url, ("body", "callback_url"))
        spec.update(session_of(body.storage_state, ("body", "storage_state")))
        rows = await asyncio.to_thread(check_batch, "check", spec, ("body", "rows"))  # off the event loop
        return queued_batch(runner.submit("batch", spec), rows)

    def queued_batch(job: Job, rows: dict[str, Any]) -> Job:
        """The queued job, showing its rows pending (before its task writes them)."""
        runner.store.set_batch(job.id, rows)
        return runner.store.get(job.id) or job

    @v1.post("/jobs/batch/csv", response_model=Job, status_code=201, tags=["jobs"],
             openapi_extra={"requestBody": {"content": {"multipart/form-data": {"encoding": {
                 "flow": {"contentType": "application/json"}, "rows": {"contentType": "text/csv"}}}}}})
    async def submit_batch_csv(
        flow: Annotated[Union[UploadFile, str], Form(description="the owrl.flow/1 document (JSON): a field "
                                                                  "(curl -F 'flow=<f.json') or a file (-F flow=@f.json)")],
        rows: Annotated[UploadFile, File(description="a CSV file: a header of input names, then one row per run "
                                                     "(UTF-8; , ; or tab separated; an empty cell takes the default)")],
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
        spec = batch_spec(parsed, None, {}, workers, start_url, max_steps, [], ("body", "flow"))
        spec["callback_url"] = runner.check_callback(callback_url, ("body", "callback_url"))
        spec["rows_file"] = "rows.csv"
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
            pending = await asyncio.to_thread(check_batch, staging, spec, ("body", "rows"))
            if pending["rows"] > MAX_ROWS:  # as many as a JSON batch may have
                raise SpecError(("body", "rows"), f"the CSV file has {pending['rows']} rows; a batch takes at most "
                                                  f"{MAX_ROWS}: split it into several batches")
            job = runner.submit("batch", spec)  # its task starts at the next await: the folder is in place
            folder.rename(runner.batch_dir(job.id))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return queued_batch(job, pending)

    @v1.get("/jobs", response_model=JobList, tags=["jobs"])
    async def list_jobs(status: Optional[JobStatus] = None,
                        limit: Annotated[int, Query(ge=1, le=1_000)] = 100) -> JobList:
        """Jobs, newest first."""
        return JobList(jobs=store.list(status, limit))

    @v1.get("/jobs/{job_id}", response_model=Job, tags=["jobs"])
    async def get_job(job_id: JobId) -> Job:
        return job_or_404(job_id)

    @v1.post("/jobs/{job_id}/cancel", response_model=Job, tags=["jobs"],
             responses={409: {"model": ErrorDetail, "description": "the job already ended"}})
    async def cancel_job(job_id: JobId) -> Job:
        """Cancel a queued or running job. A running episode closes as aborted (infra.cancelled)."""
        try:
            return await runner.cancel(job_id)
        except JobNotFound:
            raise HTTPException(404, f"no job {job_id}") from None
        except JobEnded as err:
            raise HTTPException(409, f"job {job_id} already ended ({err.job.status}): nothing to cancel") from None

    @v1.get("/jobs/{job_id}/steps", response_model=StepsPage, tags=["steps"])
    async def get_steps(job_id: JobId, start: Annotated[int, Query(ge=0, description="first step index")] = 0) -> StepsPage:
        """The steps written so far (all of them once the job ended)."""
        job = job_or_404(job_id)
        steps = runner.steps(job_id)
        return StepsPage(job_id=job_id, status=job.status, start=start, steps=steps[start:], next=max(start, len(steps)))

    @v1.get("/jobs/{job_id}/steps/stream", tags=["steps"], response_class=StreamingResponse,
            responses={200: {"content": {"application/x-ndjson": {"schema": {"type": "string"}}},
                             "description": "one JSON object a line: {event: step, index, step}, "
                                            "{event: heartbeat} after 15 s of quiet, and last {event: end, job}"}})
    async def stream_steps(job_id: JobId,
                           start: Annotated[int, Query(ge=0, description="first step index")] = 0) -> StreamingResponse:
        """Each step as it is written, then the ended job (NDJSON)."""
        job_or_404(job_id)
        return StreamingResponse(runner.follow(job_id, start), media_type="application/x-ndjson",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    @v1.get("/jobs/{job_id}/trajectory", tags=["files"],
            responses={200: {"content": {"application/json": {"schema": {"type": "object"}}},
                             "description": "the run folder's trajectory.json (owrl.trajectory/1), as written so far"}})
    async def get_trajectory(job_id: JobId) -> Response:
        job = job_or_404(job_id)
        data = runner.trajectory_bytes(job)
        if data is None:
            if job.kind == "batch":
                raise HTTPException(404, f"job {job_id} is a batch: each row has its own run folder (batch.results[].run_dir)")
            raise HTTPException(404, f"job {job_id} has no trajectory yet ({job.status})")
        return Response(data, media_type="application/json")

    @v1.get("/jobs/{job_id}/screenshots/{index}", tags=["files"],
            responses={200: {"content": {"image/jpeg": {"schema": {"type": "string", "format": "binary"}}},
                             "description": "the screenshot of step INDEX"}})
    async def get_screenshot(job_id: JobId, index: Annotated[int, PathParam(ge=0, le=99_999)]) -> Response:
        job = job_or_404(job_id)
        data = runner.screenshot(job, index)
        if data is None:
            raise HTTPException(404, f"job {job_id} has no screenshot for step {index}")
        return Response(data, media_type="image/png" if data.startswith(b"\x89PNG") else "image/jpeg")

    @v1.get("/jobs/{job_id}/report", tags=["files"],
            responses={200: {"content": {"text/html": {"schema": {"type": "string"}}},
                             "description": "the job's report.html: a run's steps, or a batch's rows and failures"}})
    async def get_report(job_id: JobId) -> Response:
        from ..report import CSP

        job = job_or_404(job_id)
        folder = runner.batch_dir(job.id) if job.kind == "batch" else runner.run_dir(job)
        page = folder / "report.html" if folder is not None else None
        if page is None or not page.is_file():
            raise HTTPException(404, f"job {job_id} has no report yet ({job.status})")
        # the page's own policy, as a header too: no script runs, nothing loads from elsewhere
        return Response(page.read_bytes(), media_type="text/html; charset=utf-8",
                        headers={"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff"})

    @v1.get("/jobs/{job_id}/batch.csv", tags=["files"],
            responses={200: {"content": {"text/csv": {"schema": {"type": "string"}}},
                             "description": "a batch job's batch.csv: one line per row, spreadsheet-safe"}})
    async def get_batch_csv(job_id: JobId) -> Response:
        job = job_or_404(job_id)
        if job.kind != "batch":
            raise HTTPException(404, f"job {job_id} is not a batch")
        table = runner.batch_dir(job.id) / "batch.csv"
        if not table.is_file():
            raise HTTPException(404, f"batch {job_id} has no batch.csv yet ({job.status})")
        return Response(table.read_bytes(), media_type="text/csv; charset=utf-8",
                        headers={"Content-Disposition": f'attachment; filename="{job.id}.csv"'})

    @app.exception_handler(RequestValidationErrorOf)
    async def form_error(request: Request, err: RequestValidationErrorOf) -> JSONResponse:
        return JSONResponse({"detail": err.errors}, status_code=422)

    app.include_router(v1)
    app.add_middleware(BodyLimit)
    if token:  # added last, so outermost: a request without the token is refused before its body is read
        app.add_middleware(BearerAuth, token=token)
    else:  # --no-auth, loopback only: what stands in for the token against the user's own browser
        app.add_middleware(LocalOnly)
    return app
