"""The data that flows through an episode, and the trajectory document built from it.

Every model here is a pydantic model, so one definition gives validation, the JSON
schema and the JSON form. The trajectory (`owrl.trajectory/1`) is the one format that
runtime, judges, rewards, trainers and reports share.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import uuid
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from owrl_sdk.safety.domains import normalize_domain
from owrl_sdk.rules.inputs import DeclaredInputs, OutputSchema, check_condition

TRAJECTORY_SCHEMA: Literal["owrl.trajectory/1"] = "owrl.trajectory/1"

#: A call's feedback when it changed nothing on the page and its tool said nothing either: the
#: change description's word, which the loop also counts (the same call made in a row with it).
NO_CHANGE = "no visible change"


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------------------- targets


class Target(_Model):
    """Where an element-targeting tool acts: exactly one of three ways.

    - ``point_2d``: ``[x, y]`` on the 0-1000 grid of the viewport (OpenWebRL's form);
    - ``ref``: a ref from the latest aria snapshot (``e12``, ``f1e6`` inside a frame);
    - ``selector``: a Playwright selector (``role=button[name="Go"]``, ``text=Go``, CSS).
    """

    point_2d: Optional[list[float]] = Field(
        default=None, description="[x, y] on the 0-1000 grid of the viewport"
    )
    ref: Optional[str] = Field(default=None, description="element ref from the latest page snapshot, e.g. e12")
    selector: Optional[str] = Field(
        default=None, description='Playwright selector, e.g. role=button[name="Go"], text=Go or CSS'
    )

    @field_validator("point_2d")
    @classmethod
    def _check_point(cls, v: Optional[list[float]]) -> Optional[list[float]]:
        if v is None:
            return v
        if len(v) != 2:
            raise ValueError("point_2d must be [x, y], two numbers")
        for c in v:
            if not 0 <= c <= 1000:
                raise ValueError(f"point_2d coordinates must lie within 0..1000, got {c:g}")
        return v

    @model_validator(mode="after")
    def _exactly_one(self) -> "Target":
        given = [k for k in ("point_2d", "ref", "selector") if getattr(self, k) is not None]
        if len(given) != 1:
            named = ", ".join(given) if given else "none"
            raise ValueError(f"give exactly one of point_2d, ref or selector (got {named})")
        return self

    def describe(self) -> str:
        if self.point_2d is not None:
            return f"point ({self.point_2d[0]:g}, {self.point_2d[1]:g})"
        if self.ref is not None:
            return f"ref {self.ref}"
        return f"selector {self.selector}"


class ElementRef(_Model):
    """An element named by ref or selector (no coordinates): used by expectations."""

    ref: Optional[str] = None
    selector: Optional[str] = None

    @model_validator(mode="after")
    def _exactly_one(self) -> "ElementRef":
        if (self.ref is None) == (self.selector is None):
            raise ValueError("give exactly one of ref or selector")
        return self


class ValueEquals(ElementRef):
    value: str


# ---------------------------------------------------------------------------- calls


class Expectation(_Model):
    """What a call is expected to bring about; every key given must hold."""

    url_contains: Optional[str] = None
    url_matches: Optional[str] = Field(default=None, description="regular expression searched in the URL")
    title_contains: Optional[str] = None
    text_visible: Optional[str] = None
    text_absent: Optional[str] = None
    element_visible: Optional[ElementRef] = None
    value_equals: Optional[ValueEquals] = None
    new_tab: Optional[bool] = None

    @field_validator("element_visible", mode="before")
    @classmethod
    def _element_shorthand(cls, v: Any) -> Any:
        # "e12" or a selector string are accepted as shorthand.
        if isinstance(v, str):
            return {"ref": v} if _looks_like_ref(v) else {"selector": v}
        return v

    def keys(self) -> list[str]:
        return [k for k, v in self if v is not None]


def _looks_like_ref(text: str) -> bool:
    return re.fullmatch(r"(f\d+)?e\d+", text) is not None


class ToolCall(_Model):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    expect: Optional[Expectation] = None
    #: In a flow: the name under which the call's value (``ToolResult.data["value"]``, what
    #: ``extract`` read) is saved in the episode's outputs (``Outcome.outputs``).
    save_as: Optional[str] = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    #: In a flow: the call runs only when this condition holds (``{{input:NAME}}``,
    #: ``not {{output:NAME}}``, ``{{input:NAME}} == TEXT``: :mod:`owrl_sdk.rules.conditions`);
    #: true or false once the inputs are filled in.
    when: Optional[Union[bool, str]] = None
    #: In a flow: the point of no return (the call that creates a record, pays, sends). A batch
    #: row that fails or is cut short once this call has started is ``needs_review`` and is
    #: never re-run automatically (:mod:`owrl_sdk.flows.batch`).
    commit: Optional[bool] = None

    _when = field_validator("when")(classmethod(lambda cls, v: check_condition(v)))

    def describe(self) -> str:
        args = json.dumps(self.arguments, ensure_ascii=False, separators=(", ", ": "))
        return f"{self.name}({args})"


class ToolResult(_Model):
    """What running one tool call gave. ``error`` is phrased for the model to correct itself;
    ``error_kind`` says the same for programs, as a failure kind (``action.covered``)."""

    ok: bool = True
    feedback: str = ""
    error: Optional[str] = None
    #: The failure kind of a failed call (``category.code`` of ``owrl_sdk.failures.KINDS``:
    #: ``action.covered``, ``network.dns``, ``policy.unknown_tool``), set where the error is
    #: raised or caught; None on success, or when whoever failed the call gave no kind.
    error_kind: Optional[str] = None
    answer: Optional[str] = None
    ends_episode: bool = False
    data: dict[str, Any] = Field(default_factory=dict)
    #: What a successful call did to the browser, set by the browser environment: the active
    #: tab's ``url`` and index (``active_tab``), ``navigated_to`` when the page acted on went
    #: elsewhere, and ``tabs_opened`` (indices). None outside a browser.
    page: Optional[dict[str, Any]] = None
    #: Whether the call changed anything the policy is told of, set by the browser environment:
    #: False when its feedback is "no visible change" (nothing on the page changed and the tool
    #: had nothing to report), True otherwise; None when unknown (a failed call, outside a browser).
    changed: Optional[bool] = None

    @classmethod
    def failure(cls, error: str, kind: Optional[str] = None, **kw: Any) -> "ToolResult":
        return cls(ok=False, error=error, error_kind=kind, **kw)


class Check(_Model):
    key: str
    ok: bool
    detail: str = ""


class Verdict(_Model):
    """The result of checking one call's expectation against the page."""

    ok: bool
    checks: list[Check] = Field(default_factory=list)
    waited_ms: float = 0.0
    #: When the expectation failed: what the page says about it, quoted (its alerts and status
    #: lines, the messages of fields marked invalid), at most a few short lines.
    page_says: list[str] = Field(default_factory=list)

    def describe(self) -> str:
        failed = [c for c in self.checks if not c.ok]
        if not failed:
            return "expectation met"
        said = "; the page says: " + "; ".join(f'"{t}"' for t in self.page_says) if self.page_says else ""
        return "expectation failed: " + "; ".join(f"{c.key}: {c.detail}" for c in failed) + said


# ---------------------------------------------------------------------------- observation


class Tab(_Model):
    index: int
    url: str
    title: str = ""
    active: bool = False


class Observation(_Model):
    url: str = ""
    title: str = ""
    tabs: list[Tab] = Field(default_factory=list)
    aria: Optional[str] = None
    #: The whole snapshot's length when ``aria`` was cut to the ``observation_chars`` budget; None: it is whole.
    aria_total_chars: Optional[int] = None
    screenshot_file: Optional[str] = None
    extras: dict[str, Any] = Field(default_factory=dict)
    # The image itself travels in memory only; the run store writes it to a file.
    screenshot: Optional[bytes] = Field(default=None, exclude=True, repr=False)


# ---------------------------------------------------------------------------- turns and steps


class Turn(_Model):
    """One policy answer: a thought and the calls to run in order.

    ``parse_error`` is set (and ``calls`` empty) when the model's text could not be read;
    ``end`` is set by a policy that gives up or has nothing more to do (a flow that ran out).
    ``truncated``: the model's answer was cut at the generation limit; its calls are not
    run and the episode ends as ``policy.length_limit``.
    """

    thought: str = ""
    calls: list[ToolCall] = Field(default_factory=list)
    raw: Optional[str] = None
    parse_error: Optional[str] = None
    end: Optional[str] = None
    truncated: bool = False
    #: Calls the policy's parser read past and dropped (the ``openwebrl`` profile drops a block
    #: that is not JSON or names an undeclared tool, as the official parser does), each a reason.
    dropped: list[str] = Field(default_factory=list)
    usage: dict[str, Any] = Field(default_factory=dict)


class CallRecord(_Model):
    call: ToolCall
    result: Optional[ToolResult] = None
    verdict: Optional[Verdict] = None
    skipped: bool = False
    skip_reason: Optional[str] = None
    duration_ms: float = 0.0


class Step(_Model):
    index: int
    started_at: str = Field(default_factory=utc_now)
    observation: Observation
    turn: Turn
    calls: list[CallRecord] = Field(default_factory=list)
    feedback: str = ""
    timings: dict[str, float] = Field(default_factory=dict)


# ---------------------------------------------------------------------------- task and outcome


AnswerMatch = Literal["exact", "contains", "number", "regex"]


class Task(_Model):
    id: str = Field(default_factory=lambda: uuid.uuid4().hex[:12])
    intent: str
    start_url: str
    suite: Optional[str] = None
    checks: list[dict[str, Any]] = Field(default_factory=list)
    answer: Optional[str] = None
    answer_match: AnswerMatch = "contains"
    difficulty: Optional[int] = None
    allowed_domains: list[str] = Field(default_factory=list)
    max_steps: Optional[int] = None
    #: The inputs the task takes (``{{input:NAME}}`` in its strings): see :mod:`owrl_sdk.rules.inputs`.
    inputs: DeclaredInputs = Field(default_factory=dict)
    #: A JSON schema the ``output`` argument of ``done`` must validate against.
    output_schema: OutputSchema = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("allowed_domains")
    @classmethod
    def _domains(cls, value: list[str]) -> list[str]:
        for entry in value:
            normalize_domain(entry)  # a port, path or scheme is refused where the task loads
        return value


FailureCategory = Literal["network", "page", "action", "policy", "infra", "task"]


class Failure(_Model):
    """Why an episode did not succeed: a category, a specific code and the detail."""

    category: FailureCategory
    code: str
    detail: str = ""

    @property
    def kind(self) -> str:
        return f"{self.category}.{self.code}"


OutcomeStatus = Literal["success", "fail", "aborted", "infra_error"]


class Outcome(_Model):
    status: OutcomeStatus
    answer: Optional[str] = None
    failure: Optional[Failure] = None
    #: What the episode handed back, by name: each flow call's ``save_as`` value and the
    #: ``output`` object of ``done`` (its keys, merged over the saved values).
    outputs: dict[str, Any] = Field(default_factory=dict)


class Judgement(_Model):
    judge: str
    score: float
    success: Optional[bool] = None
    reason: str = ""
    details: dict[str, Any] = Field(default_factory=dict)


class PolicyInfo(_Model):
    name: str
    model: Optional[str] = None
    revision: Optional[str] = None
    #: The interface profile a model policy spoke (``openwebrl``, ``owrl``); None for others.
    profile: Optional[str] = None


class Trajectory(_Model):
    schema_: Literal["owrl.trajectory/1"] = Field(default=TRAJECTORY_SCHEMA, alias="schema")
    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    task: Task
    policy: PolicyInfo
    started_at: str = Field(default_factory=utc_now)
    ended_at: Optional[str] = None
    steps: list[Step] = Field(default_factory=list)
    outcome: Optional[Outcome] = None
    judgements: list[Judgement] = Field(default_factory=list)
    reward: Optional[float] = None
    warnings: list[str] = Field(default_factory=list)
    #: The input values the episode ran with (``{{input:NAME}}``), typed, scrubbed of secrets.
    inputs: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
