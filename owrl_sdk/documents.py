"""Reading and writing owrl's JSON documents: trajectories and flows.

A bad file raises :class:`DocumentError` whose message names the file and the first bad
field by its path in the document (``steps[3].calls[0].call.name``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional, TypeVar, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import DocumentError
from .types import ToolCall, Trajectory

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


def _read_data(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DocumentError(f"{path}: no such file") from None
    except OSError as err:
        raise DocumentError(f"{path}: cannot read ({err.strerror})") from None
    if path.suffix in (".yaml", ".yml"):
        import yaml

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise DocumentError(f"{path}: not valid YAML ({err})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise DocumentError(f"{path}: not valid JSON (line {err.lineno}, column {err.colno}: {err.msg})") from None


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
    tmp = p.with_suffix(p.suffix + ".tmp")
    from .secrets import redact

    # the last line of defence: no secret value reaches a file, whatever put it in the trajectory
    tmp.write_text(redact(trajectory_to_json(traj)) or "", encoding="utf-8")
    tmp.replace(p)  # atomic: a crash never leaves half a trajectory


# ---------------------------------------------------------------------------- flow


class FlowTurn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    thought: str = ""
    calls: list[ToolCall] = Field(min_length=1)


class Flow(BaseModel):
    """Scripted turns played by the ``scripted`` policy; also the deterministic RPA flow."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    schema_: str = Field(default=FLOW_SCHEMA, alias="schema")
    task: str = ""
    start_url: Optional[str] = None
    turns: list[FlowTurn]

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json", by_alias=True, exclude_none=True), indent=2)

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
        return cls(task=traj.task.intent, start_url=start, turns=turns)


def flow_from_data(data: Any, source: str = "flow") -> Flow:
    if isinstance(data, dict) and data.get("schema", FLOW_SCHEMA) != FLOW_SCHEMA:
        raise DocumentError(f"{source}: schema {data.get('schema')!r} is not {FLOW_SCHEMA}")
    return parse_document(Flow, data, source)


def load_flow(path: Union[str, Path]) -> Flow:
    p = Path(path)
    return flow_from_data(_read_data(p), str(p))


__all__ = [
    "Flow",
    "FlowTurn",
    "load_flow",
    "load_trajectory",
    "save_trajectory",
    "trajectory_to_json",
    "format_validation_error",
]
