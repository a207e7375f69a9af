"""Interface profiles: the contract a model was trained on, rendered and parsed.

A profile decides what the model is told (system text, declared tools, history layout,
feedback lines), how its answer is read, and how its tool calls map onto owrl's one set of
builtin tools. The environment stays one: a profile only renders, parses and converts units.

- ``openwebrl``: the released OpenWebRL-4B's contract, as its official code shows it
  (``docs/openwebrl-compat.md`` is the table of record): thirteen declared tools with their
  own argument names, units and defaults (``scroll.amount`` is a fraction of the viewport);
  one user turn per step holding the calls' status lines and the next observation in a
  ``<tool_response>`` block; only the latest screenshot sent; past reasoning kept verbatim;
  greedy decoding with up to 2048 new tokens. The official prompt sentences are never part
  of owrl: they are read from files fetched with ``owrl model fetch openwebrl`` (or named by
  the ``system_prompt_file`` / ``tool_list_file`` settings); without them owrl's own wording
  stands in and the trajectory says the interface is approximate.
- ``owrl``: owrl's richer contract (expectations, refs, selectors, ``select_option``,
  ``handle_dialog``, change feedback) for models trained with owrl.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from owrl_sdk.api import CallRecord, Context, Observation, Step, ToolCall, Turn, UsageError

from . import official
from .parser import THINK_CLOSE, THINK_OPEN, parse_official, parse_turn, render_turn
from .prompt import Prompt, build_prompt, tools_block

PROFILES = ("openwebrl", "owrl")

#: The settings the official environment runs under and that these facts assume.
SCREEN = (1280, 1000)
#: How many of the latest screenshots the model sees (the official runs keep one).
SCREENSHOTS = 1
#: Evaluation decoding (official run_evaluate): greedy, up to 2048 new tokens.
EVAL_SAMPLING = {"temperature": 0.0, "max_new_tokens": 2048}
#: Training rollouts (official RL launch script): temperature 0.8, 1024 new tokens per turn.
ROLLOUT_SAMPLING = {"temperature": 0.8, "top_p": 1.0, "top_k": 0, "max_new_tokens": 1024}
#: What the official environment does after an action before it looks again: network idle
#: (at most 5 s) then 1 s, after click, write, scroll, press_keys and go_back; the tools in
#: WAITS wait their own way.
SETTLE = {"network_idle_ms": 5000, "after_ms": 1000}
#: The official per-tool pauses: hover 2 s, drag and the tab tools 0.5 s, goto_url 1 s after
#: its page loaded, wait only its own sleep.
WAITS = {"hover": {"after_ms": 2000}, "drag": {"after_ms": 500}, "new_tab": {"after_ms": 500},
         "switch_tab": {"after_ms": 500}, "close_tab": {"after_ms": 500}, "goto_url": {"after_ms": 1000},
         "wait": {"after_ms": 0}}
#: Longest status line per call without the fetched files: the official feedback helpers'
#: tool-response limit (``feedback_utils.py``; the fetched truncation rule carries it too).
FEEDBACK_CHARS = 512

APPROXIMATE = ("the openwebrl interface is approximate: the official {what} was not found, owrl's own "
               "wording stands in (fetch it with `owrl model fetch openwebrl`, or set {setting})")


def _point(desc: str, items: str = "number") -> dict[str, Any]:
    return {"type": "array", "items": {"type": items}, "minItems": 2, "maxItems": 2, "description": desc}


def _tool(name: str, description: str, properties: dict[str, Any],
          required: Optional[Sequence[str]] = None) -> dict[str, Any]:
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:  # the official list leaves the key out where nothing is required
        parameters["required"] = list(required)
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


GRID = "[x, y] on a 0-1000 grid over the screenshot"

#: The official ``tool_list.json``'s tools as far as they are facts: its thirteen names in its
#: order, each tool's argument names, types (``hover``'s point takes integers, the others'
#: numbers), defaults and bounds, and which tools carry a ``required`` key. Descriptions are
#: owrl's own words; ``owrl model fetch openwebrl`` brings the official file, which replaces
#: this list. The official list has no ``call_user`` (its environment still handles one).
OPENWEBRL_TOOLS: list[dict[str, Any]] = [
    _tool("click", "Click at a point of the screen.", {
        "point_2d": _point(GRID),
        "clicks": {"type": "integer", "default": 1, "description": "how many clicks (2: a double click)"},
        "button": {"type": "string", "enum": ["left", "right", "middle"], "default": "left"}}, ["point_2d"]),
    _tool("write", "Type text into the focused field; what it held is replaced.", {
        "message": {"type": "string", "description": "the text to type"}}, ["message"]),
    _tool("press_keys", "Press keys one after another, or together as a hotkey.", {
        "keys": {"type": "array", "items": {"type": "string"}, "description": "key names, e.g. [\"Enter\"]"},
        "is_hotkey": {"type": "boolean", "default": False, "description": "press them together"},
        "presses": {"type": "integer", "default": 1, "description": "how many times each"}}, ["keys"]),
    _tool("scroll", "Scroll the page, or the scrollable area under point_2d.", {
        "direction": {"type": "string", "enum": ["up", "down", "left", "right"], "default": "down"},
        "amount": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.5,
                   "description": "how far, as a fraction of the screen (0.5: half a screen)"},
        "point_2d": _point(GRID + "; optional")}),
    _tool("wait", "Wait for the page.", {
        "seconds": {"type": "integer", "default": 3}}),
    _tool("done", "Finish: give the answer or a short report.", {
        "response": {"type": "string"}}, ["response"]),
    _tool("goto_url", "Open an address in the current tab.", {"url": {"type": "string"}}, ["url"]),
    _tool("go_back", "Go back one page.", {}),
    _tool("drag", "Press at one point, move to another and release.", {
        "start_point_2d": _point(GRID), "end_point_2d": _point(GRID),
        "steps": {"type": "integer", "default": 10, "description": "intermediate mouse moves"}},
        ["start_point_2d", "end_point_2d"]),
    _tool("hover", "Move the mouse to a point.", {"point_2d": _point(GRID, items="integer")}, ["point_2d"]),
    _tool("new_tab", "Open a blank tab and make it active.", {}),
    _tool("switch_tab", "Make another tab active.", {"tab_index": {"type": "integer"}}, ["tab_index"]),
    _tool("close_tab", "Close the active tab.", {}),
]
#: Tools a fetched list may declare beyond these: an older list's ``call_user`` (runs are
#: unattended, so its call comes back as a ``Failed:`` line).
MAPPABLE = {t["function"]["name"] for t in OPENWEBRL_TOOLS} | {"call_user"}

#: owrl's fallback system text for the openwebrl contract (used when the official one is absent).
OPENWEBRL_SYSTEM = """You operate a web browser to complete the user's request.
Each turn shows the screen size, the open tabs and a screenshot of the active tab.
Points are point_2d [x, y] on a 0-1000 grid over the screenshot: [0, 0] is the top left \
corner, [1000, 1000] the bottom right.
Think first inside <think>...</think>, then give one or more calls, each as
<tool_call>{"name": "<tool>", "arguments": {...}}</tool_call>
The calls run in order; each one answers with a line that starts with Succeed: or Failed:.
When the request is fulfilled, call done with the answer in response."""


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _short(text: str, n: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."


# ------------------------------------------------------------------------ call mapping


class UnknownToolCall(ValueError):
    pass


def to_builtin(call: ToolCall, viewport: tuple[int, int], keys: Optional[dict[str, Any]] = None) -> ToolCall:
    """One openwebrl-profile call as the builtin tool call that does the same.

    Units and defaults become owrl's: a scroll ``amount`` (a fraction of the viewport,
    clamped to 0..1 as the official environment does) becomes 100-px units of this
    viewport, scrolled by script as the official environment scrolls; ``press_keys`` presses each key ``presses`` times before the next, as
    the official environment does; ``wait`` defaults to 3 s. Unknown names pass through
    unchanged (the loop reports them)."""
    a = dict(call.arguments)
    name = call.name
    width, height = viewport
    if name == "scroll":
        direction = a.get("direction", "down")
        try:
            fraction = max(0.0, min(1.0, float(a.get("amount", 0.5))))
        except (TypeError, ValueError):
            fraction = 0.5
        span = height if direction in ("up", "down") else width
        out: dict[str, Any] = {"direction": direction, "amount": max(fraction * span, 1.0) / 100}
        if a.get("point_2d") is not None:
            out["point_2d"] = a["point_2d"]
        out["by"] = "script"  # scrollBy on the area under the point or the window: no wheel event
        return ToolCall(name="scroll", arguments=out)
    if name == "press_keys":
        given = a.get("keys", [])
        given = [given] if isinstance(given, str) else list(given or [])
        presses = a.get("presses", 1)
        hotkey = bool(a.get("is_hotkey", False))
        # the official environment drops key names it does not know (failing only when none is
        # left) and pauses 100 ms between keys pressed one after another; with its key names
        # fetched, it is their check that keeps or drops a key, and the names it gives are pressed
        if keys:
            names = [n for n in (official.official_key(k, keys) for k in given) if n]
            official_args: dict[str, Any] = {"unknown": "as_given", "gap_ms": 100}
        else:
            names, official_args = given, {"unknown": "skip", "gap_ms": 100}
        keys_out = names
        if not hotkey and isinstance(presses, int) and presses > 1 and len(keys_out) > 1:
            return ToolCall(name="press_keys", arguments={"keys": [k for k in keys_out for _ in range(presses)],
                                                          **official_args})
        out = {"keys": keys_out, "is_hotkey": hotkey}
        if presses != 1:
            out["presses"] = presses
        return ToolCall(name="press_keys", arguments={**out, **official_args})
    if name == "wait":
        return ToolCall(name="wait", arguments={"seconds": a.get("seconds", 3)})
    if name == "write":
        if not a.get("message"):  # the official handler refuses an empty message and types nothing
            return ToolCall(name="write", arguments={"message": None})
        return ToolCall(name="write", arguments={"message": a.get("message", ""), "clear": True})
    if name == "click":
        out = {k: a[k] for k in ("point_2d", "clicks", "button") if k in a}
        return ToolCall(name="click", arguments=out)
    if name == "drag":
        out = {k: a[k] for k in ("start_point_2d", "end_point_2d") if k in a}
        out["steps"] = a.get("steps", 10)
        return ToolCall(name="drag", arguments=out)
    if name == "go_back":  # the official environment reports success when there is nothing to go back to
        return ToolCall(name=name, arguments={"no_history": "ignore"})
    if name == "goto_url":  # opened as written: no https:// added to a bare host
        return ToolCall(name=name, arguments={**a, "as_given": True})
    if name in ("new_tab", "close_tab"):
        return ToolCall(name=name, arguments={})
    return ToolCall(name=name, arguments=a)


# ------------------------------------------------------------------------ feedback lines


def _element(data: Optional[dict[str, Any]]) -> str:
    """``<tag> type=.. role=.. checked "label or text"`` as the official lines name an element."""
    if not data or not data.get("tag"):
        return ""
    out = f"<{data['tag']}>"
    if data.get("type"):
        out += f" type={data['type']}"
    if data.get("role"):
        out += f" role={data['role']}"
    if data.get("checked") is not None:
        out += " checked" if data["checked"] else " unchecked"
    # the text as the page holds it, cut at 30 characters before its whitespace is collapsed (the
    # line's truncation collapses it), as the official environment quotes it
    name = data.get("label") or data.get("raw_text") or data.get("text") or ""
    if name:
        out += f' "{name}"'
    return out


def status_line(record: CallRecord, viewport: tuple[int, int] = SCREEN, raw: Optional[ToolCall] = None) -> str:
    """What the openwebrl profile tells the model after one call: ``Succeed:`` or ``Failed:``,
    the call, and only the facts the official environment reports (the element under the
    point, a navigation, a new tab, a scroll that did not move, the field's value when it
    differs from the text typed), read from ``result.page`` and the builtin tools' ``data``.
    ``raw`` is the call as the model wrote it."""
    call = raw or record.call
    name = call.name
    if record.skipped:
        return f"Failed: `{name}` was not run ({record.skip_reason})."
    result = record.result
    if result is None:
        return f"Failed: `{name}` did not run."
    if not result.ok:
        return _short(f"Failed: `{name}`: {result.error}", FEEDBACK_CHARS)
    data = result.data or {}
    page = result.page or {}
    a = call.arguments
    if name == "done":
        return _short(f"Succeed: the task is finished. Response: {result.answer or ''}", FEEDBACK_CHARS)
    if name in ("click", "hover"):
        el = _element(data.get("element"))
        where = ""
        if data.get("point"):
            x, y = data["point"]
            where = f" at ({x:.0f}, {y:.0f})"
        text = f"Succeed: `{name}`{where}" + (f" on {el}" if el else "") + "."
    elif name == "write":
        el = _element(data.get("element"))
        text = f'Succeed: `write` typed "{a.get("message", "")}"' + (f" into {el}" if el else "") + "."
    elif name == "scroll":
        direction = a.get("direction", "down")
        amount = a.get("amount", 0.5)
        try:
            share = f" {max(0.0, min(1.0, float(amount))):.0%}"
        except (TypeError, ValueError):
            share = ""
        at = ""
        if isinstance(a.get("point_2d"), list) and len(a["point_2d"]) == 2:
            x, y = a["point_2d"]
            at = f" at ({float(x) / 1000 * viewport[0]:.0f}, {float(y) / 1000 * viewport[1]:.0f})"
        text = f"Succeed: `scroll` {direction} by{share}{at}."
        moved = (data.get("scroll") or {}).get("moved")
        if moved == 0 and a.get("point_2d") is None:
            text += " The page did not move: it may be at its edge."
    elif name == "press_keys":
        text = f"Succeed: `press_keys` {json.dumps(_pressed(a, data))}."
    elif name == "wait":
        text = f"Succeed: waited {a.get('seconds', 3)} seconds."
    elif name == "goto_url":
        text = f"Succeed: `goto_url` opened {a.get('url', '')}."
    elif name == "switch_tab":
        text = f"Succeed: `switch_tab` to tab {a.get('tab_index')}" + (f" ({page['url']})" if page.get("url") else "") + "."
    elif name == "new_tab":
        text = "Succeed: `new_tab` opened a blank tab" + (f" (tab {page['active_tab']})" if page.get("active_tab") is not None else "") + "."
    elif name == "close_tab":
        text = "Succeed: `close_tab` closed the tab" + (f"; tab {page['active_tab']} is active" if page.get("active_tab") is not None else "") + "."
    else:
        text = f"Succeed: `{name}`."
    if name in ("click", "write", "press_keys", "scroll") and page.get("navigated_to"):
        text += f" The page navigated to {page['navigated_to']}."
    if name == "click":
        opened = page.get("tabs_opened") or []
        if opened:
            text += f" A new tab opened (tab {opened[-1]})."
        if not page.get("navigated_to") and not opened:
            text += " No navigation and no new tab followed."
    if name == "write" and data.get("value") and data["value"] != a.get("message"):
        text += f' The field holds "{_short(data["value"], 200)}", which is not the text typed.'
    return _short(text, FEEDBACK_CHARS)


def _pressed(arguments: dict[str, Any], data: dict[str, Any]) -> list[str]:
    """press_keys' keys as the line names them: the names pressed, after the key-name
    corrections and without the unknown ones (``enter`` is ``Enter``), as the tool recorded them;
    the keys as written where it recorded none. A sequence pressed ``presses`` times apiece is
    listed once per key, as the official line lists it."""
    keys = data.get("keys")
    if not isinstance(keys, list):
        written = arguments.get("keys", [])
        return [written] if isinstance(written, str) else list(written or [])
    presses = arguments.get("presses", 1)
    if isinstance(presses, int) and presses > 1 and not arguments.get("is_hotkey") and len(keys) % presses == 0:
        keys = keys[::presses]  # the profile expanded [a, b] x2 into [a, a, b, b]
    return [str(k) for k in keys]


#: The notes each tool's official line may append, in the order its handler appends them.
_NOTE_ORDER = {"click": ("navigated", "tab_opened", "no_change"), "write": ("navigated", "value_differs"),
               "press_keys": ("navigated",), "scroll": ("no_move",)}


def _handler_locals(name: str, a: dict[str, Any], data: dict[str, Any], tabs: int) -> dict[str, Any]:
    """The locals an official handler checks its arguments with, as this call's arguments (as
    the model wrote them) make them: what :func:`.official.refused` evaluates the handler's
    own tests on. ``legal_keys``: the keys owrl found among those given (none when it refused
    them all); ``pages``: the tabs open before the call."""
    keys = a.get("keys", [])
    return {"point_2d": a.get("point_2d"), "message": a.get("message", ""),
            "keys": [keys] if isinstance(keys, str) else keys, "legal_keys": list(data.get("keys") or []),
            "start_point": a.get("start_point_2d"), "end_point": a.get("end_point_2d"), "url": a.get("url"),
            "tab_index": a.get("tab_index"), "pages": [None] * max(tabs, 1)}


def official_status_line(record: CallRecord, templates: dict[str, Any], viewport: tuple[int, int] = SCREEN,
                         raw: Optional[ToolCall] = None, tabs: int = 1) -> Optional[str]:
    """The line the official environment writes for this call, from its own templates
    (:mod:`.official`, fetched with ``owrl model fetch openwebrl``), filled with the facts
    owrl recorded; None where a template is missing or cannot be filled (owrl's wording
    stands in). Not yet cut to length (:meth:`OpenWebRLProfile.feedback` does that)."""
    call = raw or record.call
    name = call.name
    result = record.result
    if record.skipped or result is None:
        return None
    tool = (templates.get("tools") or {}).get(name)
    try:
        if not result.ok:
            if result.error_kind == "policy.unknown_tool" or tool is None:
                parts = templates.get("unsupported")
                return official.render(parts, {"action_type": name}) if parts else None
            # the handler's own refusal of its arguments, where one of its checks fails them
            own = official.refused(tool.get("refusals") or [], _handler_locals(name, call.arguments, result.data or {}, tabs))
            if own is not None:
                return own
            # {e}: the browser's own words where the call failed in the browser, else owrl's sentence
            said = (result.data or {}).get("exception") or result.error
            return official.render(tool["error"], {"e": said}) if tool.get("error") else None
        if tool is None or not tool.get("ok"):
            return None
        data, info, a = result.data or {}, result.page or {}, call.arguments
        ns = _success_locals(name, a, data, info, tool, viewport)
        text = official.render(tool["ok"], ns)
        notes = tool.get("notes") or {}
        opened = info.get("tabs_opened") or []
        # the official environment follows a tab a click opened: its page is then the new tab's,
        # so the line says it navigated there before it says a tab opened
        followed = info.get("url") if opened and info.get("active_tab") == opened[-1] else None
        facts = {
            "navigated": bool(info.get("navigated_to") or followed),
            "tab_opened": bool(opened),
            "no_change": not info.get("navigated_to") and not opened,
            "value_differs": bool(data.get("value")) and data.get("value") != a.get("message"),
            "no_move": (data.get("scroll") or {}).get("moved") == 0 and a.get("point_2d") is None,
        }
        ns.update(post_url=info.get("navigated_to") or followed, post_tab_count=(opened[-1] + 1) if opened else 0)
        if facts["value_differs"]:
            rule = templates.get("truncation")
            value = str(data["value"])
            ns["displayed_value"] = official.truncate(value, {**rule, "max_chars": 512}) if rule else value
        for key in _NOTE_ORDER.get(name, ()):
            if facts[key] and key in notes:
                text += official.render(notes[key], ns)
        return text
    except (official.TemplateError, KeyError, TypeError, ValueError):
        return None


def _success_locals(name: str, a: dict[str, Any], data: dict[str, Any], info: dict[str, Any], tool: dict[str, Any],
                    viewport: tuple[int, int]) -> dict[str, Any]:
    """The locals an official handler fills its success line with, from what owrl recorded of
    the call (``a``: its arguments as written, ``data``: the tool's facts, ``info``: the page's)."""
    ns: dict[str, Any] = {}
    if name in ("click", "hover", "write"):
        elem = _element(data.get("element"))
        if data.get("point"):
            ns["x"], ns["y"] = (float(v) for v in data["point"])
        outside = _outside(a.get("point_2d"), viewport)
        if outside is not None:  # the official point, off the page: no element there (owrl's lands inside)
            ns["x"], ns["y"] = outside
            elem = ""
        ns["elem_desc"] = elem
        ns["target"] = official.render(tool["target"], ns) if elem and tool.get("target") else ""
        ns["message"] = a.get("message", "")
    elif name == "scroll":
        ns["direction"] = a.get("direction", "down")
        try:
            ns["amount"] = max(0.0, min(1.0, float(a.get("amount", 0.5))))
        except (TypeError, ValueError):
            ns["amount"] = 0.5
        point = a.get("point_2d")
        ns["point_2d"] = ([float(point[0]) / 1000 * viewport[0], float(point[1]) / 1000 * viewport[1]]
                          if isinstance(point, list) and len(point) == 2 else None)
        ns["target"] = official.render(tool["target"], ns) if ns["point_2d"] and tool.get("target") else ""
    elif name == "press_keys":
        ns["legal_keys"] = _pressed(a, data)
    elif name == "wait":
        ns["seconds"] = a.get("seconds", 3)
    elif name == "done":
        ns["response"] = a.get("response", "")
    elif name == "goto_url":
        ns["url"] = a.get("url", "")
    elif name == "new_tab":
        ns["tab_index"] = info.get("active_tab")
    elif name == "switch_tab":
        ns["tab_index"] = a.get("tab_index")
        ns["self"] = official.page(info.get("url") or "")
    elif name == "close_tab":
        ns["current_index"], ns["new_index"] = data.get("closed"), info.get("active_tab")
    return ns


def _outside(point: Any, viewport: tuple[int, int]) -> Optional[tuple[float, float]]:
    """The pixels of a 0-1000 ``point`` as the official environment reads it, where they fall
    off the viewport (at 1000 or beyond: ``[1000, 1000]`` is (1280, 1000) on 1280 x 1000, where
    no element is); None for a point on the page (or none)."""
    if not (isinstance(point, (list, tuple)) and len(point) == 2):
        return None
    try:
        x, y = float(point[0]) / 1000 * viewport[0], float(point[1]) / 1000 * viewport[1]
    except (TypeError, ValueError):
        return None
    return (x, y) if not (0 <= x < viewport[0] and 0 <= y < viewport[1]) else None


def raw_calls(step: Step, parse: Callable[[str], Turn] = parse_turn) -> list[ToolCall]:
    """The calls as the model wrote them (before unit conversion), aligned with ``step.calls``;
    ``parse`` reads the answer as the policy did."""
    if step.turn.raw is not None:
        parsed = parse(step.turn.raw)
        if not parsed.parse_error and len(parsed.calls) == len(step.calls):
            return parsed.calls
    return [r.call for r in step.calls]


# ------------------------------------------------------------------------ rendering


SCREENSHOT_MARK = "screenshot:\n"


def observation_parts(obs: Observation, screen: tuple[int, int], image: Optional[bytes]) -> list[dict[str, Any]]:
    """The ``<observation>`` block: screen size, tabs and (for the latest turns) the screenshot.

    An observation whose screenshot is no longer sent keeps its text and loses the
    screenshot line, as the official history does."""
    lines = ["<observation>", f"screen size: {screen[0]} x {screen[1]}"]
    active = next((t for t in obs.tabs if t.active), None)
    if active is not None:
        lines += [f"Current tab: {active.index}", "Available tabs:"]
        for t in obs.tabs:
            title = (t.title or "")[:50]
            lines.append(f"- Tab {t.index}{' (active)' if t.active else ''}: {t.url}" + (f" - {title}" if title else ""))
    else:
        lines.append(f"url: {obs.url}")
    head = "\n".join(lines)
    if image is None:
        return [_text(head + "\n\n</observation>")]
    return [_text(head + "\n" + SCREENSHOT_MARK), {"type": "image", "image": image}, _text("\n</observation>")]


def restore_think(raw: str) -> str:
    """A past answer with its opening ``<think>`` (absent when the template opened the block)."""
    text = raw.strip()
    if THINK_CLOSE in text and not text.startswith(THINK_OPEN):
        return f"{THINK_OPEN}\n{raw}"
    return raw


def _merge(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in parts:
        if out and p["type"] == "text" and out[-1]["type"] == "text":
            out[-1] = _text(out[-1]["text"] + p["text"])
        else:
            out.append(p)
    return out


@dataclass
class OpenWebRLProfile:
    """The released models' contract (see the module doc)."""

    system_prompt: Optional[str] = None
    tool_list: Optional[list[dict[str, Any]]] = None
    screen: tuple[int, int] = SCREEN
    screenshots: int = SCREENSHOTS
    warnings: list[str] = field(default_factory=list)
    name: str = "openwebrl"
    #: The official status-line templates (:mod:`.official`); None: owrl's wording.
    templates: Optional[dict[str, Any]] = None

    @classmethod
    def from_options(cls, conf: dict[str, Any], screen: tuple[int, int], found: Optional[dict[str, Path]] = None) -> "OpenWebRLProfile":
        """Read the official prompt files: the settings' paths first, then those ``owrl model
        fetch openwebrl`` put in the cache (``found``). A missing one is owrl's wording, with a warning."""
        found = found or {}
        system_path = conf.get("system_prompt_file") or found.get("system_prompt")
        tools_path = conf.get("tool_list_file") or found.get("tool_list")
        warnings = []
        system = tools = None
        if system_path:
            system = Path(system_path).expanduser().read_text(encoding="utf-8")
        else:
            warnings.append(APPROXIMATE.format(what="system prompt", setting="system_prompt_file"))
        if tools_path:
            tools = load_tool_list(Path(tools_path).expanduser())
        else:
            warnings.append(APPROXIMATE.format(what="tool list", setting="tool_list_file"))
        templates = None
        templates_path = conf.get("status_templates_file") or found.get("status_templates")
        if templates_path:
            templates = load_templates(Path(templates_path).expanduser())
        else:
            warnings.append(APPROXIMATE.format(what="status lines", setting="status_templates_file"))
        return cls(system_prompt=system, tool_list=tools, screen=screen,
                   screenshots=int(conf.get("screenshots", SCREENSHOTS)), warnings=warnings, templates=templates)

    @property
    def tools(self) -> list[dict[str, Any]]:
        return self.tool_list if self.tool_list is not None else OPENWEBRL_TOOLS

    def render(self, context: Context, tools_in_system: bool = True) -> Prompt:
        system = self.system_prompt if self.system_prompt is not None else OPENWEBRL_SYSTEM
        if tools_in_system:
            system += "\n\n# Tools\n" + tools_block(self.tools)
        observations = [s.observation for s in context.history] + [context.observation]
        keep = min(self.screenshots, len(context.screenshots))
        images: list[Optional[bytes]] = [None] * len(observations)
        if keep:
            images[-keep:] = list(context.screenshots[-keep:])
        messages: list[dict[str, Any]] = [{"role": "system", "content": [_text(system)]}]
        first = [_text(f"<user_request>\n{context.task.intent}\n</user_request>\n\n")]
        messages.append({"role": "user", "content": _merge(first + observation_parts(observations[0], self.screen, images[0]))})
        for i, step in enumerate(context.history):
            said = step.turn.raw if step.turn.raw is not None else render_turn(step.turn.thought, step.turn.calls)
            messages.append({"role": "assistant", "content": [_text(restore_think(said))]})
            lines = self.feedback(step)
            head = _text("<tool_response>\n" + "\n".join(lines) + "\n\n")
            # an answer with no call ran nothing: the official loop answers it with the observation
            # it had already sent, text and screenshot (the latest look, of the same page, only
            # where the step no longer holds its own)
            unread = bool(step.turn.parse_error or not step.calls)
            image = images[i + 1]
            if unread and image is not None and observations[i].screenshot:
                image = observations[i].screenshot
            body = observation_parts(observations[i] if unread else observations[i + 1], self.screen, image)
            messages.append({"role": "user", "content": _merge([head, *body, _text("\n</tool_response>")])})
        return Prompt(messages=messages, tools=self.tools, keep_assistant_text=True)

    def feedback(self, step: Step) -> list[str]:
        """The status lines of one step, one per call (or why the answer could not be used):
        the official templates' words when they were fetched, else owrl's; each line cut as
        the official adapter cuts it (owrl: at 512 characters)."""
        t = self.templates
        if step.turn.parse_error or not step.calls:
            if t and t.get("parse_failure"):
                return [t["parse_failure"]]
            if step.turn.parse_error:
                return [f"Failed: the answer could not be read: {step.turn.parse_error}"]
            return ["Failed: the answer held no tool call."]
        raws = raw_calls(step, self.parse)
        lines = []
        tabs = len(step.observation.tabs) or 1
        for record, raw in zip(step.calls, raws):
            line = official_status_line(record, t, self.screen, raw, tabs) if t else None
            if line is None:
                lines.append(status_line(record, self.screen, raw))
            elif t and t.get("truncation"):
                lines.append(official.truncate(line, t["truncation"]))
            else:
                lines.append(_short(line, FEEDBACK_CHARS))
        return lines

    def parse(self, text: str) -> Turn:
        """The model's answer read by the official parser's rules (:func:`.parser.parse_official`)
        against the tools this profile declares."""
        return parse_official(text, {(t.get("function") or t)["name"] for t in self.tools})

    def to_builtin(self, calls: list[ToolCall]) -> list[ToolCall]:
        keys = (self.templates or {}).get("keys")
        return [to_builtin(c, self.screen, keys) for c in calls]


def load_tool_list(path: Path) -> list[dict[str, Any]]:
    """A tool list file (OpenAI function form); each tool must be one the profile can map."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise UsageError(f"cannot read the tool list {path}: {err}") from None
    known = MAPPABLE
    if not isinstance(data, list) or not all(isinstance(t, dict) for t in data):
        raise UsageError(f"{path} is not a list of tools")
    names = [(t.get("function") or t).get("name") for t in data]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"{path} declares tools owrl cannot map: {', '.join(map(str, unknown))}")
    return data


def load_templates(path: Path) -> dict[str, Any]:
    """``status_templates.json`` (written by ``owrl model fetch openwebrl``)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise UsageError(f"cannot read the status-line templates {path}: {err}") from None
    if not isinstance(data, dict) or not isinstance(data.get("tools", {}), dict):
        raise UsageError(f"{path} is not a status-line templates file")
    return data


@dataclass
class OwrlProfile:
    """owrl's own contract: the prompt of :mod:`.prompt`, calls passed through."""

    text_mode: bool = False
    warnings: list[str] = field(default_factory=list)
    name: str = "owrl"

    def render(self, context: Context, tools_in_system: bool = True) -> Prompt:
        return build_prompt(context, text_mode=self.text_mode, tools_in_system=tools_in_system)

    def parse(self, text: str) -> Turn:
        """owrl's lenient parser: small slips repaired, one unreadable block fails the answer."""
        return parse_turn(text)

    def to_builtin(self, calls: list[ToolCall]) -> list[ToolCall]:
        return calls


_OPENWEBRL_NAME = re.compile(r"openwebrl", re.I)


def default_profile(model_id: Optional[str]) -> str:
    """``openwebrl`` for OpenWebRL checkpoints (by name, weights fetched by ``owrl model
    fetch openwebrl``, or a checkpoint that says so in ``owrl_profile.txt``), ``owrl`` for
    everything else."""
    if not model_id:
        return "owrl"
    path = Path(str(model_id)).expanduser()
    marker = path / "owrl_profile.txt"
    if marker.is_file():
        return marker.read_text().strip() or "owrl"
    if path.name == "weights" and (path.parent / "interface" / "manifest.json").is_file():
        return "openwebrl"
    return "openwebrl" if _OPENWEBRL_NAME.search(path.name if path.exists() else str(model_id)) else "owrl"


def check_profile(name: str) -> str:
    if name not in PROFILES:
        raise UsageError(f"unknown interface profile '{name}': profiles are {', '.join(PROFILES)}")
    return name
