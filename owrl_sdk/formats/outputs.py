"""Outputs: what an episode hands back, by name, and the JSON schema they must match.

An episode's outputs (``Outcome.outputs``) are gathered from its calls, in order:

- a call with ``save_as`` (in a flow) saves its value, ``ToolResult.data["value"]`` (what
  ``extract`` read; null for a tool that gives none), under that name;
- an ``extract`` call with a ``name`` argument saves its value under that name (how a model
  policy hands a value back: it writes no ``save_as``);
- the ``output`` object of a successful ``done`` is merged over them (its keys win a clash).

Only calls that succeeded count. A task or flow may give an ``output_schema`` (a JSON schema,
any draft ``jsonschema`` knows; 2020-12 when it names none): ``done`` is then checked before it
runs, against the outputs so far merged with its own ``output``, and a mismatch fails the call
with a message naming each path that failed, for the policy to correct; a flow cannot, so the
flow stops and the run fails with that message.

A default plugin: its hooks gather each episode's outputs as its calls run (per environment,
reset when an episode starts) and check ``done`` against the schema before it runs.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Optional

from owrl_sdk.rules.outputschema import check_output, check_output_boxed, check_schema
from owrl_sdk.contract.plugins import hookimpl
from owrl_sdk.types import ToolResult

if TYPE_CHECKING:  # pragma: no cover
    from owrl_sdk.types import ToolCall, Trajectory


def record_output(outputs: dict[str, Any], call: "ToolCall", result: Optional["ToolResult"]) -> None:
    """Add what ``call`` (with its ``result``) hands back to ``outputs``, in place."""
    if result is None or not result.ok:
        return
    if call.save_as:
        outputs[call.save_as] = result.data.get("value")
    elif call.name == "extract" and isinstance(result.data.get("name"), str):
        outputs[result.data["name"]] = result.data.get("value")
    output = result.data.get("output")
    if result.ends_episode and isinstance(output, dict):
        outputs.update(output)


def outputs_of(trajectory: "Trajectory") -> dict[str, Any]:
    """The outputs of every call of ``trajectory`` that succeeded (see the module's notes)."""
    outputs: dict[str, Any] = {}
    for step in trajectory.steps:
        for record in step.calls:
            if not record.skipped:
                record_output(outputs, record.call, record.result)
    return outputs


def output_schema_of(task: Any) -> Optional[dict[str, Any]]:
    """The output schema an episode's ``done`` must meet: the task's, else that of the flow the
    task carries (``metadata["flow"]``, a batch row's flow)."""
    schema = getattr(task, "output_schema", None)
    if schema is not None:
        return dict(schema)
    carried = getattr(task, "metadata", {}).get("flow")
    found = carried.get("output_schema") if isinstance(carried, dict) else getattr(carried, "output_schema", None)
    return dict(found) if isinstance(found, dict) else None


#: The outputs gathered so far in each environment's episode (reset when an episode starts).
_gathered: "weakref.WeakKeyDictionary[Any, dict[str, Any]]" = weakref.WeakKeyDictionary()


def _so_far(env: Any) -> dict[str, Any]:
    try:
        return _gathered.setdefault(env, {})
    except TypeError:  # an environment that cannot be weakly referenced: nothing gathered
        return {}


@hookimpl
def episode_start(env: Any) -> None:
    try:
        _gathered[env] = {}
    except TypeError:
        pass


@hookimpl
def after_tool_call(call: "ToolCall", result: ToolResult, env: Any) -> None:
    record_output(_so_far(env), call, result)


@hookimpl
async def before_tool_call(call: "ToolCall", env: Any, task: Any) -> Optional[ToolResult]:
    """Refuse a ``done`` whose output does not match the task's or flow's ``output_schema``;
    the check runs in a child process with a time and memory limit (the schema is untrusted)."""
    if call.name != "done":
        return None
    schema = output_schema_of(task)
    if schema is None:
        return None
    output = call.arguments.get("output")
    merged = {**_so_far(env), **(output if isinstance(output, dict) else {})}
    problem = await check_output_boxed(schema, merged)
    if problem is None:
        return None
    return ToolResult.failure(f"{problem}. Call done again with an output that matches it.",
                              kind="policy.bad_arguments")


__all__ = ["check_output", "check_schema", "output_schema_of", "outputs_of", "record_output"]
