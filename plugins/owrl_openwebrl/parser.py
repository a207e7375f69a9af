"""Reading a model's answer: ``<think>...</think>`` then one or more ``<tool_call>`` blocks.

Models slip; the parser repairs what it safely can (single quotes, trailing commas,
Python literals, a missing closing tag or brace, arguments given as a JSON string, the
OpenAI ``{"function": {...}}`` wrapping) and otherwise says exactly what was wrong, in a
sentence the model can act on next turn.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any, Collection

from owrl_sdk.api import Expectation, ToolCall, Turn

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
_CALL_RE = re.compile(r"<tool_call>(.*?)(?:</tool_call>|(?=<tool_call>)|$)", re.S)
_FENCE_RE = re.compile(r"^```(?:json)?\s*|\s*```$", re.S)


class CallError(ValueError):
    pass


def _loads_lenient(text: str) -> Any:
    text = _FENCE_RE.sub("", text.strip())
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    fixed = re.sub(r",\s*([}\]])", r"\1", text)  # trailing commas
    try:
        return json.loads(fixed)
    except json.JSONDecodeError:
        pass
    # balance braces the model forgot to close (a common slip at the end of an answer)
    opens = fixed.count("{") - fixed.count("}")
    if 0 < opens <= 3:
        try:
            return json.loads(fixed + "}" * opens)
        except json.JSONDecodeError:
            pass
    if opens < 0:  # one brace too many
        try:
            return json.loads(fixed[: fixed.rstrip().rfind("}")])
        except json.JSONDecodeError:
            pass
    try:  # Python-style dict: single quotes, True/False/None
        value = ast.literal_eval(fixed)
        if isinstance(value, dict):
            return value
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    raise CallError("is not valid JSON")


def parse_call(body: str) -> ToolCall:
    data = _loads_lenient(body)
    if not isinstance(data, dict):
        raise CallError("must be a JSON object with name and arguments")
    if "function" in data and isinstance(data["function"], dict):
        data = {**data["function"], **{k: v for k, v in data.items() if k != "function"}}
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise CallError("has no tool name (expected {\"name\": ..., \"arguments\": {...}})")
    args = data.get("arguments", data.get("parameters", {}))
    if isinstance(args, str):
        args = _loads_lenient(args) if args.strip() else {}
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise CallError(f"has arguments that are not an object for {name}")
    expect = data.get("expect", args.pop("expect", None) if isinstance(args, dict) else None)
    try:
        expectation = Expectation.model_validate(expect) if expect else None
    except Exception as err:  # noqa: BLE001 - reported to the model
        raise CallError(f"has an invalid expect for {name}: {str(err).splitlines()[1:2] or err}") from None
    return ToolCall(name=name, arguments=args, expect=expectation)


def parse_turn(text: str) -> Turn:
    """Parse one model answer into a Turn; a Turn with ``parse_error`` set when unreadable."""
    raw = text
    text = text.strip()
    thought = ""
    start = text.find(THINK_OPEN)
    end = text.find(THINK_CLOSE)
    first_call = text.find(CALL_OPEN)
    if end != -1:
        thought = text[(start + len(THINK_OPEN)) if start != -1 and start < end else 0:end]
        rest = text[end + len(THINK_CLOSE):]
    elif first_call != -1:  # missing </think>: the thought runs up to the first call
        thought = text[(start + len(THINK_OPEN)) if start != -1 else 0:first_call]
        rest = text[first_call:]
    else:
        thought = text[len(THINK_OPEN):] if start == 0 else ""
        rest = "" if start == 0 else text
    thought = thought.strip()
    bodies = [m.group(1) for m in _CALL_RE.finditer(rest)]
    if not bodies:
        return Turn(thought=thought, raw=raw,
                    parse_error="no <tool_call> block found. Answer with <think>...</think> and then "
                                '<tool_call>{"name": ..., "arguments": {...}}</tool_call>')
    calls: list[ToolCall] = []
    for i, body in enumerate(bodies, 1):
        try:
            calls.append(parse_call(body))
        except CallError as err:
            return Turn(thought=thought, raw=raw,
                        parse_error=f"tool call {i} {err}: {body.strip()[:120]}")
    return Turn(thought=thought, calls=calls, raw=raw)


#: A block as the official parser (sglang's ``qwen25`` detector) finds it: the newlines after
#: the opening tag and before the closing one are part of its tokens.
_OFFICIAL_CALL_RE = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.S)


def _thought_of(text: str) -> str:
    end = text.find(THINK_CLOSE)
    if end == -1:
        return ""
    start = text.find(THINK_OPEN)
    return text[(start + len(THINK_OPEN)) if start != -1 and start < end else 0:end].strip()


def parse_official(text: str, tools: Collection[str]) -> Turn:
    """Read an answer by the rules of the official OpenWebRL parser (the ``openwebrl`` profile).

    The official loop reads calls with sglang's ``qwen25`` detector: every
    ``<tool_call>\\n...\\n</tool_call>`` block in the whole answer (one written inside
    ``<think>`` too: nothing is stripped) is read with strict JSON; a block that is not JSON is
    dropped and its siblings still run; a block may hold one call or a list of calls; a call
    without a name, or naming a tool not declared, is dropped; the arguments are
    ``parameters``, else ``arguments``. No repair: single quotes, a missing brace or a missing
    newline make a block unreadable. An answer left with no call is a parse failure. What was
    dropped is kept in ``Turn.dropped`` for the trajectory's reader (the model is not told)."""
    raw = text
    if _detector_fails(text):
        return _parse_fallback(text)
    calls: list[ToolCall] = []
    dropped: list[str] = []
    for i, body in enumerate(_OFFICIAL_CALL_RE.findall(text), 1):
        try:
            data = json.loads(body.strip())
        except json.JSONDecodeError:
            dropped.append(f"block {i} is not JSON")
            continue
        for act in data if isinstance(data, list) else [data]:
            if not isinstance(act, dict):
                dropped.append(f"block {i} holds {type(act).__name__}, not a call")
                continue
            name = act.get("name")
            if not name:
                continue
            if not isinstance(name, str) or name not in tools:
                dropped.append(f"block {i} names an undeclared tool {name!r}")
                continue
            args = act.get("parameters") or act.get("arguments", {})
            if not isinstance(args, dict):
                dropped.append(f"block {i} has arguments that are not an object")
                continue
            calls.append(ToolCall(name=name, arguments=args))
    thought = _thought_of(text)
    if not calls:
        why = "; ".join(dropped) if dropped else (
            "no <tool_call> block found" if CALL_OPEN not in text
            else "no block written as <tool_call>\\n{...}\\n</tool_call>")
        return Turn(thought=thought, raw=raw, parse_error=f"no call could be read ({why})")
    return Turn(thought=thought, calls=calls, raw=raw, dropped=dropped)


#: A block as the official fallback reads one (and the official judge history): a JSON object
#: right between the tags.
FALLBACK_BLOCK = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)


def _detector_fails(text: str) -> bool:
    """Whether the official detector gives up on this answer, so that the official parser reads
    it with its fallback instead: a block that is JSON but holds something other than calls
    (a number, a text, a list of those), or a call whose name is a list or an object."""
    for body in _OFFICIAL_CALL_RE.findall(text):
        try:
            data = json.loads(body.strip())
        except json.JSONDecodeError:
            continue  # the detector drops it and goes on
        for act in data if isinstance(data, list) else [data]:
            if not isinstance(act, dict) or isinstance(act.get("name"), (list, dict)):
                return True
    return False


def _parse_fallback(text: str) -> Turn:
    """The official fallback reading: every block that is a JSON object right between the tags,
    any one that is not JSON failing the whole answer; an object with a ``name`` is a call,
    declared or not (the environment says it has no such tool), its arguments ``arguments``,
    else ``parameters``. Arguments that are not an object cannot be a call here: dropped."""
    calls: list[ToolCall] = []
    dropped: list[str] = []
    for i, body in enumerate(FALLBACK_BLOCK.findall(text), 1):
        try:
            data = json.loads(body)
        except json.JSONDecodeError:
            return Turn(thought=_thought_of(text), raw=text, parse_error=f"no call could be read (block {i} is not JSON)")
        if not isinstance(data, dict) or "name" not in data:
            continue
        name = data["name"] if isinstance(data["name"], str) else str(data["name"])
        args = data.get("arguments", data.get("parameters", {}))
        if not isinstance(args, dict):
            dropped.append(f"block {i} has arguments that are not an object")
            continue
        calls.append(ToolCall(name=name, arguments=args))
    if not calls:
        why = "; ".join(dropped) or "no block holds a call"
        return Turn(thought=_thought_of(text), raw=text, parse_error=f"no call could be read ({why})")
    return Turn(thought=_thought_of(text), calls=calls, raw=text, dropped=dropped)


def render_turn(thought: str, calls: list[ToolCall]) -> str:
    """The model-side text of a turn (used for history and SFT targets)."""
    parts = [f"{THINK_OPEN}\n{thought}\n{THINK_CLOSE}"] if thought else []
    for c in calls:
        payload: dict[str, Any] = {"name": c.name, "arguments": c.arguments}
        if c.expect is not None:
            payload["expect"] = c.expect.model_dump(exclude_none=True)
        parts.append(f"{CALL_OPEN}\n{json.dumps(payload, ensure_ascii=False)}\n{CALL_CLOSE}")
    return "\n".join(parts)
