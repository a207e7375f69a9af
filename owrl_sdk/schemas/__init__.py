"""JSON Schemas of owrl's documents, generated from their pydantic models.

``flow.schema.json`` (``owrl.flow/1``), ``trajectory.schema.json`` (``owrl.trajectory/1``) and
``task.schema.json`` ship in this package, written by ``python -m owrl_sdk.docgen`` and checked
against the models by the tests; ``owrl schema KIND`` prints one. An editor that reads JSON
Schema (VS Code, yaml-language-server) checks a flow as it is typed against the first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from owrl_sdk.formats.documents import Flow
from owrl_sdk.types import Task, Trajectory

HERE = Path(__file__).resolve().parent
KINDS = ("flow", "trajectory", "task")
DRAFT = "https://json-schema.org/draft/2020-12/schema"


def _model(kind: str) -> Any:
    if kind == "flow":
        return Flow

    return {"trajectory": Trajectory, "task": Task}[kind]


def schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of a document kind (``flow``, ``trajectory`` or ``task``), from its model."""
    if kind not in KINDS:
        raise ValueError(f"no schema named {kind!r}: {', '.join(KINDS)}")
    body: dict[str, Any] = _model(kind).model_json_schema(mode="validation")
    title = {"flow": "owrl.flow/1", "trajectory": "owrl.trajectory/1", "task": "owrl task"}[kind]
    return {"$schema": DRAFT, "$id": f"{kind}.schema.json", **body, "title": title}


def text(kind: str) -> str:
    return json.dumps(schema(kind), indent=2, sort_keys=True) + "\n"


def path(kind: str) -> Path:
    """Where the shipped copy lies."""
    return HERE / f"{kind}.schema.json"
