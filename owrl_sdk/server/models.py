"""The request and answer bodies of ``owrl serve``'s API, and its size limits."""

from __future__ import annotations

from typing import Annotated, Any, Optional, Union

from fastapi import Path as PathParam
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from owrl_sdk.formats.documents import FLOW_SCHEMA, Flow
from owrl_sdk.server.jobs import Job, JobStatus

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

# ---------------------------------------------------------------------------- bodies


#: The fields every job request has: where its end is announced, and its own saved log-in.
CallbackUrl = Annotated[Optional[str], Field(
    min_length=1, max_length=2_048, description="POSTed a signed summary when the job ends (see serve.md: inside "
                                                "the server's allowed domains, with OWRL_SERVE_WEBHOOK_KEY set)")]
StorageState = Annotated[Optional[dict[str, Any]], Field(
    description="a saved log-in for this job only: a Playwright storage state (cookies and origins, as "
                "owrl run --save-storage writes it). Held in the server's memory, never stored; its "
                "values are secrets (redacted wherever they would show)")]


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
    callback_url: CallbackUrl = None
    storage_state: StorageState = None


class FlowJobRequest(BaseModel):
    """A flow and the values of its inputs (``{{input:NAME}}``)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"flow": INPUTS_FLOW_EXAMPLE, "inputs": {"category": "shoes"}}]})

    flow: Flow = Field(description="the owrl.flow/1 document")
    inputs: dict[str, InputValue] = Field(
        default_factory=dict, max_length=1_000,
        description="a value for each input the flow takes (declared, or used by a placeholder); the flow's "
                    "defaults fill the rest. Values are typed as declared; {{secret:...}} is refused")
    callback_url: CallbackUrl = None
    storage_state: StorageState = None


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
    callback_url: CallbackUrl = None
    storage_state: StorageState = None


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
