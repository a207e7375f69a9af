"""Reading and writing owrl's JSON documents: trajectories and flows.

A bad file raises :class:`DocumentError` whose message names the file and the first bad
field by its path in the document (``steps[3].calls[0].call.name``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Optional, TypeVar, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from owrl_sdk.errors import DocumentError
from owrl_sdk.support.files import write_atomic
from owrl_sdk.rules.inputs import DeclaredInputs, OutputSchema, check_condition
from owrl_sdk.safety.secrets import dumps
from owrl_sdk.contract.tools import ToolArgumentError
from owrl_sdk.types import ToolCall, Trajectory

FLOW_SCHEMA = "owrl.flow/1"

M = TypeVar("M", bound=BaseModel)


def format_validation_error(err: ValidationError, limit: int = 3) -> str:
    parts = []
    for e in err.errors()[:limit]:
        loc = ""
        for item in e["loc"]:
            loc += f"[{item}]" if isinstance(item, int) else (f".{item}" if loc else str(item))
        parts.append(f"{loc or '(document)'}: {e['msg']}")
    more = len(err.errors()) - limit
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)


def parse_document(model: type[M], data: Any, source: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise DocumentError(f"{source}: {format_validation_error(err)}") from None


def not_utf8(path: Union[str, Path], err: UnicodeDecodeError) -> str:
    """The one-line message for a file whose bytes are not UTF-8: where the first bad byte is."""
    line = err.object[: err.start].count(b"\n") + 1
    return f"{path}: not UTF-8 text (byte 0x{err.object[err.start]:02x} on line {line}); save it as UTF-8"


def too_deep(path: Union[str, Path]) -> str:
    """The one-line message for a document nested deeper than a parser can follow."""
    return f"{path}: nested too deeply to read (lists or objects inside each other thousands of levels down)"


def read_text(path: Path) -> str:
    """A document's text; a missing, unreadable or non-UTF-8 file raises :class:`DocumentError`."""
    try:
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise DocumentError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise DocumentError(f"{path}: is a folder, not a file") from None
    except OSError as err:
        raise DocumentError(f"{path}: cannot read ({err.strerror})") from None
    except UnicodeDecodeError as err:
        raise DocumentError(not_utf8(path, err)) from None


def json_lines(text: str) -> list[str]:
    """The lines of a JSON Lines text: cut at ``\n`` only (a ``\r`` before it dropped), never
    at U+2028, U+2029 or U+0085, which ``str.splitlines`` also cuts at and which JSON keeps
    raw inside a string (a scraped value, an answer)."""
    return [line.removesuffix("\r") for line in text.split("\n")]


def _read_data(path: Path) -> Any:
    text = read_text(path)
    if path.suffix in (".yaml", ".yml"):
        import yaml

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise DocumentError(f"{path}: not valid YAML ({err})") from None
        except RecursionError:
            raise DocumentError(too_deep(path)) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise DocumentError(f"{path}: not valid JSON (line {err.lineno}, column {err.colno}: {err.msg})") from None
    except RecursionError:
        raise DocumentError(too_deep(path)) from None


# ---------------------------------------------------------------------------- trajectory


def trajectory_to_json(traj: Trajectory, indent: Optional[int] = 2) -> str:
    return json.dumps(traj.model_dump(mode="json", by_alias=True), indent=indent, ensure_ascii=False)


def trajectory_from_data(data: Any, source: str = "trajectory") -> Trajectory:
    if isinstance(data, dict) and data.get("schema") not in (None, "owrl.trajectory/1"):
        raise DocumentError(f"{source}: schema {data.get('schema')!r} is not owrl.trajectory/1")
    return parse_document(Trajectory, data, source)


def load_trajectory(path: Union[str, Path]) -> Trajectory:
    """Load a trajectory file, or the ``trajectory.json`` inside a run folder."""
    p = Path(path)
    if p.is_dir():
        p = p / "trajectory.json"
    return trajectory_from_data(_read_data(p), str(p))


def save_trajectory(traj: Trajectory, path: Union[str, Path]) -> None:
    p = Path(path)

    # the last line of defence: every string is scrubbed (secrets.scrub), whatever put it in the
    # trajectory, so no secret value (nor a prefix, an escaped or an encoded form) reaches a file
    text = dumps(traj.model_dump(mode="json", by_alias=True), indent=2, ensure_ascii=False)
    write_atomic(p, text)  # a crash never leaves half a trajectory


# ---------------------------------------------------------------------------- flow


class FlowTurn(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    thought: str = ""
    calls: list[ToolCall] = Field(min_length=1)
    #: The turn is played only when this condition holds (see ``ToolCall.when``).
    when: Optional[Union[bool, str]] = None
    #: The calls played instead when ``when`` does not hold (``"else"`` in the file).
    else_: Optional[list[ToolCall]] = Field(default=None, alias="else", min_length=1)

    _when = field_validator("when")(classmethod(lambda cls, v: check_condition(v)))

    @model_validator(mode="after")
    def _else_needs_when(self) -> "FlowTurn":
        if self.else_ is not None and self.when is None:
            raise ValueError("'else' is played when 'when' does not hold: give the turn a 'when'")
        return self

    def all_calls(self) -> list[ToolCall]:
        """Every call the turn may play: its calls, then those of its ``else``."""
        return [*self.calls, *(self.else_ or [])]


class SessionSign(BaseModel):
    """What shows the log-in is gone, read on the page the flow is on (its address, title and
    text; any one of the keys given holds): ``{"url_contains": "/login"}``."""

    model_config = ConfigDict(extra="forbid")
    url_contains: Optional[str] = None
    url_matches: Optional[str] = Field(default=None, description="regular expression searched in the URL")
    title_contains: Optional[str] = None
    text_visible: Optional[str] = None

    @model_validator(mode="after")
    def _one_at_least(self) -> "SessionSign":
        if not any(v for v in (self.url_contains, self.url_matches, self.title_contains, self.text_visible)):
            raise ValueError("give url_contains, url_matches, title_contains or text_visible")
        if self.url_matches is not None:
            try:
                re.compile(self.url_matches)
            except re.error as err:
                raise ValueError(f"url_matches {self.url_matches!r} is not a regular expression: {err}") from None
        return self

    def shows(self, url: str, title: str, text: str) -> Optional[str]:
        """The sign that holds on a page with this ``url``, ``title`` and ``text``, or None."""
        if self.url_contains and self.url_contains in url:
            return f"the address holds {self.url_contains!r}"
        if self.url_matches and re.search(self.url_matches, url):
            return f"the address matches {self.url_matches!r}"
        if self.title_contains and self.title_contains in title:
            return f"the title holds {self.title_contains!r}"
        if self.text_visible and self.text_visible in text:
            return f"the page says {self.text_visible!r}"
        return None


class SessionRule(BaseModel):
    """A flow's log-in that renews itself: when the page shows ``gone``, the flow plays ``login``
    (a flow: in a file, a path next to it) and starts again from its start address, unless a
    call of the point of no return already ran."""

    model_config = ConfigDict(extra="forbid")
    login: "Flow"
    gone: SessionSign

    @model_validator(mode="after")
    def _login_has_no_rule(self) -> "SessionRule":
        if self.login.session is not None:
            raise ValueError("the log-in flow has a session rule of its own: a log-in does not renew itself")
        return self


class Flow(BaseModel):
    """Scripted turns played by the ``scripted`` policy; also the deterministic RPA flow."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    schema_: str = Field(default=FLOW_SCHEMA, alias="schema")
    task: str = ""
    start_url: Optional[str] = None
    #: The inputs the flow takes (``{{input:NAME}}`` in its strings), by name: see :mod:`owrl_sdk.rules.inputs`.
    inputs: DeclaredInputs = Field(default_factory=dict)
    #: A JSON schema the ``output`` of the flow's ``done`` must validate against; a flow whose
    #: output does not fails the run.
    output_schema: OutputSchema = None
    turns: list[FlowTurn]
    #: Renew the log-in when the session is gone (:class:`SessionRule`).
    session: Optional[SessionRule] = None


    def to_json(self) -> str:
        data = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        if not data.get("inputs"):
            data.pop("inputs", None)
        return json.dumps(data, indent=2)

    @classmethod
    def from_trajectory(cls, traj: Trajectory) -> "Flow":
        """The calls a recorded trajectory ran, as a flow that replays them.

        A call that failed (an error: it did not act on the page) is left out, and a call whose
        expectation was not met keeps its action but not that expectation: the flow replays
        what the episode did, so a repaired flow does not stop again where the old one broke."""
        turns = []
        for step in traj.steps:
            ran = []
            for r in step.calls:
                if r.skipped or (r.result is not None and not r.result.ok):
                    continue
                failed_expectation = r.verdict is not None and not r.verdict.ok
                ran.append(r.call.model_copy(update={"expect": None}) if failed_expectation else r.call)
            if ran:
                turns.append(FlowTurn(thought=step.turn.thought, calls=ran))
        if not turns:
            raise DocumentError("trajectory has no calls to replay")
        # a plugin scheme (demo:shop) as the user gave it: the resolved address was this run's
        start = traj.task.metadata.get("given_start_url") or traj.task.start_url
        # the outputs the run was checked against stay required of the replay
        return cls(task=traj.task.intent, start_url=start, output_schema=traj.task.output_schema, turns=turns)


SessionRule.model_rebuild()


def flow_from_data(data: Any, source: str = "flow") -> Flow:
    if isinstance(data, dict) and data.get("schema", FLOW_SCHEMA) != FLOW_SCHEMA:
        raise DocumentError(f"{source}: schema {data.get('schema')!r} is not {FLOW_SCHEMA}")
    return parse_document(Flow, data, source)


def load_flow(path: Union[str, Path]) -> Flow:
    p = Path(path)
    data = _read_data(p)
    login = data.get("session", {}).get("login") if isinstance(data, dict) and isinstance(data.get("session"), dict) else None
    if isinstance(login, str):  # the log-in flow's file, next to this one
        where = (p.parent / login) if not Path(login).is_absolute() else Path(login)
        data = {**data, "session": {**data["session"], "login": _read_data(where)}}
    return flow_from_data(data, str(p))


#: ``{{secret:NAME}}``, ``{{input:NAME}}`` and the like: text whose value is known only later.
_PLACEHOLDER = re.compile(r"\{\{.*?\}\}", re.S)


def _holds_placeholder(value: Any) -> bool:
    """Whether a string in ``value`` (or in its lists and objects) holds a ``{{...}}`` placeholder."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if _PLACEHOLDER.search(item):
                return True
        elif isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def _placeholders_explain(tool: Any, arguments: dict[str, Any]) -> bool:
    """Whether every problem in ``arguments`` may come from an argument holding a placeholder:
    such a value can only be judged once it is filled in, so the check lets it through."""
    held = {k for k, v in arguments.items() if _holds_placeholder(v)}
    args_model = getattr(tool, "Args", None)
    if not held or not (isinstance(args_model, type) and issubclass(args_model, BaseModel)):
        return False
    try:
        args_model.model_validate(arguments)
    except ValidationError as err:
        errors = err.errors()
    else:
        return False  # the tool's own parse_args objected, not its arguments' model
    if any(e["type"] == "extra_forbidden" for e in errors):
        return False  # a misspelt argument is wrong whatever its value
    if all(e["loc"] and e["loc"][0] in held for e in errors):
        return True
    # a check of the arguments together (press_keys' key names): try them without the placeholders
    try:
        args_model.model_validate({k: v for k, v in arguments.items() if k not in held})
    except ValidationError as err:
        return all(e["loc"] and e["loc"][0] in held for e in err.errors())
    return True


def check_flow_tools(flow: Flow, tools: dict[str, Any], source: str = "flow") -> None:
    """Every call of ``flow`` names a tool of ``tools`` (the catalogue's, by name) and gives it
    arguments its ``parse_args`` accepts; else :class:`DocumentError` naming the turn and call
    (counted from 1). Run before an episode starts, so a typo does not cost a browser."""
    if flow.session is not None:
        check_flow_tools(flow.session.login, tools, f"{source}: session.login")
    for t, turn in enumerate(flow.turns, 1):
        for c, call in enumerate(turn.all_calls(), 1):
            n = len(turn.calls)
            where = f"{source}: turn {t}, call {c}" if c <= n else f"{source}: turn {t}, else call {c - n}"
            tool = tools.get(call.name)
            if tool is None:
                raise DocumentError(f"{where}: unknown tool '{call.name}' (tools: {', '.join(sorted(tools))})")
            try:
                tool.parse_args(call.arguments)
            except ToolArgumentError as err:
                if not _placeholders_explain(tool, call.arguments):
                    raise DocumentError(f"{where}: {err}") from None


__all__ = [
    "Flow",
    "FlowTurn",
    "check_flow_tools",
    "json_lines",
    "load_flow",
    "load_trajectory",
    "save_trajectory",
    "trajectory_to_json",
    "format_validation_error",
]
