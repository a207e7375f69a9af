"""An output schema is untrusted work: bounded in size when it loads, checked in a box.

A job or a flow brings its own ``output_schema``. A schema whose ``$ref``s fan out doubles the
work per level; a ``pattern`` such as ``^(a|a)+$`` backtracks for a time that doubles per
character. The first is refused when the schema loads; the second runs in a child process
with a time and memory limit while the event loop goes on (a ticker measures its longest
stall).
"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest
from security_support import attack

from owrl_sdk.rules.outputschema import check_output, check_output_boxed, check_schema, expansion


def fan_out(levels: int) -> dict:
    defs = {f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]} for i in range(levels)}
    defs[f"d{levels}"] = {"type": "string"}
    return {"$defs": defs, "type": "object", "properties": {"a": {"$ref": "#/$defs/d0"}}}


EVIL = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a|a)+$"}}}


def test_a_schema_whose_references_fan_out_is_refused_when_it_loads():
    from owrl_sdk.types import Task

    with attack("schemas", "output_schema whose $refs fan out 2^18 (1.5 KB)", "refused when it loads: expansion capped"):
        bomb = fan_out(18)
        started = time.monotonic()
        with pytest.raises(ValueError, match="expands to more than"):
            check_schema(bomb)
        with pytest.raises(ValueError, match="expands to more than"):
            Task(intent="t", start_url="about:blank", output_schema=bomb)
        assert time.monotonic() - started < 1.0
    # a few levels, and a recursive schema (a tree), are ordinary and pass
    assert check_schema(fan_out(6)) and expansion(fan_out(6)) < 5000
    tree = {"$defs": {"node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
            "$ref": "#/$defs/node"}
    assert check_schema(tree)
    assert check_output(tree, {"kids": [{"kids": []}, {"kids": [{"kids": []}]}]}) is None


async def ticking(work):
    """Run ``work`` with a ticker beside it; (its result, the longest gap between ticks)."""
    gaps, done = [0.0], asyncio.Event()

    async def tick():
        last = time.monotonic()
        while not done.is_set():
            await asyncio.sleep(0.02)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    ticker = asyncio.ensure_future(tick())
    try:
        return await work, max(gaps)
    finally:
        done.set()
        await ticker


async def test_a_backtracking_pattern_is_checked_in_a_box_that_stops_it_and_the_loop_goes_on():
    with attack("schemas", "output_schema pattern ^(a|a)+$ against 40 a's and a b",
                "checked in a child process with a time limit; the event loop never waits on it"):
        started = time.monotonic()
        problem, stall = await ticking(check_output_boxed(EVIL, {"s": "a" * 40 + "b"}, seconds=1.0))
        took = time.monotonic() - started
        assert problem and "could not be checked against the output_schema" in problem, problem
        assert took < 10, took  # a 1 s box, on a machine busy with other tests
        assert stall < 1.0, stall  # the bound the server keeps for /health
    # an ordinary check in the box gives what the in-process one gives
    schema = {"type": "object", "required": ["total"], "properties": {"total": {"type": "number"}}}
    assert await check_output_boxed(schema, {"total": 3}) is None
    assert await check_output_boxed(schema, {"total": "x"}) == check_output(schema, {"total": "x"})


async def test_the_box_holds_the_check_to_its_memory_limit():
    """The limit is real: an output of 80 MB does not fit a box of 64 MB, which says so."""
    with attack("schemas", "an output check that needs more memory than its box", "the box's memory limit"):
        problem = await check_output_boxed({"type": "string", "maxLength": 1}, "x" * 80_000_000, megabytes=64)
        assert problem and "within the check's limits" in problem and "64 MB" in problem, problem


def test_a_mismatch_message_is_bounded_whatever_the_output_holds():
    schema = {"type": "array", "uniqueItems": True}
    problem = check_output(schema, ["x" * 1000] * 200)
    assert problem and "non-unique" in problem and len(problem) < 1500, len(problem or "")


async def test_done_is_refused_with_the_boxed_reason_not_hung():
    from owrl_sdk.formats import outputs
    from owrl_sdk.types import Task, ToolCall

    task = Task(intent="t", start_url="about:blank", output_schema=EVIL)
    env = SimpleNamespace()
    call = ToolCall(name="done", arguments={"response": "ok", "output": {"s": "a" * 40 + "b"}})
    result, stall = await ticking(outputs.before_tool_call(call, env, task))
    assert result is not None and not result.ok and "output_schema" in result.error, result
    assert stall < 1.0, stall
