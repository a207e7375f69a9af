"""A scripted oracle for MiniWoB++ that sees what a text policy sees.

It reads the utterance and the accessibility tree of the current observation and answers
with calls on the tree's refs (``{"ref": "e5"}``): exactly the kind of answer a text-only
model can learn to produce from the same input. Most families take one turn (one call or
several); two take several turns, each decided on what the page shows now: click-tab-2
(open the next tab until the link shows, then click it) and use-autocomplete (type the
prefix, then pick the suggestion that fits and submit). Its thought names each
target as the tree shows it (``button "Cancel" [ref=e21]``) before the call uses the
ref: a small model then copies the label from the task and the ref from the tree,
instead of having to guess a ref with nothing written to ground it. The
miniwob plugin's own oracle uses CSS selectors the model never sees; this one exists to
record demonstrations for SFT (bench/bench_learning.py). With ``expect=True`` each ``write``
states what it will leave in its field (``value_equals``), so that a policy trained on the
demonstrations learns to say what its calls will do, and the SDK checks it after each one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

from owrl_sdk.contract.memory import Context
from owrl_sdk.contract.policy import Policy
from owrl_sdk.types import ToolCall, Turn

_NODE = re.compile(r"^\s*-\s+'?([a-z]+)(?:\s+\"((?:[^\"\\]|\\.)*)\")?([^\n]*?)\[ref=([a-z0-9]+)\]([^\n]*)$", re.M)
_QUOTED = re.compile(r'"([^"]*)"')
_ORDINAL = re.compile(r"(\d+)(?:st|nd|rd|th)")
_MOVIE = re.compile(r"Search for (?P<genre>.+) movies directed by (?P<director>.+) from year (?P<year>\d+)\.")


@dataclass
class Node:
    role: str
    name: str
    ref: str
    text: str = ""  # what the line shows after the ref (``generic [ref=e17]: Chad``)
    flags: str = ""  # ``[selected]``, ``[active]``... between the name and the ref


def nodes(aria: str) -> list[Node]:
    """The elements of an ``ai``-mode snapshot that carry a ref, in document order."""
    out = []
    for m in _NODE.finditer(aria or ""):
        tail = m.group(5).split(":", 1)
        out.append(Node(m.group(1), m.group(2) or "", m.group(4), tail[1].strip().strip('"') if len(tail) == 2 else "",
                        m.group(3)))
    return out


def _first(items: list[Node], role: str, name: Optional[str] = None) -> Node:
    for n in items:
        if n.role == role and (name is None or n.name == name):
            return n
    raise LookupError(f"no {role} {name!r} in the page")


def _of(items: list[Node], role: str) -> list[Node]:
    return [n for n in items if n.role == role]


def grounding(node: Node) -> str:
    """The target as one line of the tree: role, name when it has one, ref (and the text it
    shows when it has no name)."""
    if node.name:
        return f'{node.role} "{node.name}" [ref={node.ref}]'
    return f"{node.role} [ref={node.ref}]" + (f": {node.text}" if node.text else "")


def target(items: list[Node], ref: str) -> Node:
    """The node ``ref`` names; a textbox with no name of its own takes its row header's."""
    i = next(k for k, n in enumerate(items) if n.ref == ref)
    node = items[i]
    if node.role == "textbox" and not node.name:
        header = next((n for n in reversed(items[:i]) if n.role == "rowheader"), None)
        if header is not None:
            return Node(node.role, header.name, node.ref, node.text, node.flags)
    return node


def _click(node: Node) -> dict[str, Any]:
    return {"name": "click", "arguments": {"ref": node.ref}}


def _write(node: Node, text: str) -> dict[str, Any]:
    return {"name": "write", "arguments": {"ref": node.ref, "message": text}}


#: Families solved over several turns: each turn's calls depend on what the last one showed.
MULTI_TURN = ("click-tab-2", "use-autocomplete")


def solve(family: str, utterance: str, aria: str) -> Optional[list[dict[str, Any]]]:
    """The calls of the next turn of one MiniWoB episode of ``family`` from what the page
    shows now (every family but :data:`MULTI_TURN` is solved in its first turn), or None."""
    items = nodes(aria)
    quoted = _QUOTED.findall(utterance)
    if family == "click-tab-2":
        for n in items:
            if n.role == "link" and n.name == quoted[0]:
                return [_click(n)]
        tabs = [n for n in items if n.role == "link" and n.name.startswith("Tab #")]
        selected = [i for i, n in enumerate(items) if n.role == "tab" and "[selected]" in n.flags]
        after = [t for t in tabs if selected and items.index(t) > selected[0] + 1]
        return [_click(after[0])] if after else None
    if family == "multi-orderings":
        m = _MOVIE.match(utterance)
        wanted = {"Director": m.group("director"), "Year": m.group("year"), "Genre": m.group("genre")}
        calls = []
        for i, n in enumerate(items):  # each row: its header, then its textbox
            if n.role == "rowheader" and n.name in wanted:
                box = next(b for b in items[i + 1:] if b.role == "textbox")
                calls.append(_write(box, wanted[n.name]))
        submit = next(n for n in items if n.text == "Submit")
        return calls + [_click(submit)]
    if family == "use-autocomplete":
        prefix, suffix = quoted[0], (quoted[1] if len(quoted) > 1 else "")
        box = _first(items, "textbox")
        picks = [n for n in items if n.role == "generic" and n.text.startswith(prefix) and n.text.endswith(suffix)]
        if picks:
            return [_click(picks[0]), _click(_first(items, "button", "Submit"))]
        return [_write(box, prefix)]
    if family == "click-test":
        return [_click(_first(items, "button"))]
    if family in ("click-test-2", "click-test-transfer"):
        label = utterance.rstrip(".").split()[-1]
        return [_click(_first(items, "button", label))]
    if family in ("click-button", "unicode-test", "click-dialog-2"):
        label = "Close" if family == "click-dialog-2" and quoted[0] == "x" else quoted[0]  # the x is named Close
        return [_click(_first(items, "button", label))]
    if family == "click-dialog":
        return [_click(_first(items, "button", "Close"))]
    if family == "click-button-sequence":
        return [_click(_first(items, "button", "ONE")), _click(_first(items, "button", "TWO"))]
    if family == "focus-text":
        return [_click(_first(items, "textbox"))]
    if family == "focus-text-2":
        nth = int(_ORDINAL.search(utterance).group(1))
        return [_click(_of(items, "textbox")[nth - 1])]
    if family in ("enter-text", "enter-text-dynamic", "enter-text-2"):
        text = quoted[0].upper() if family == "enter-text-2" else quoted[0]
        return [_write(_first(items, "textbox"), text), _click(_first(items, "button", "Submit"))]
    if family == "enter-password":
        first, second = _of(items, "textbox")[:2]
        return [_write(first, quoted[0]), _write(second, quoted[0]), _click(_first(items, "button", "Submit"))]
    if family == "login-user":
        user, password = _of(items, "textbox")[:2]
        return [_write(user, quoted[0]), _write(password, quoted[1]), _click(_first(items, "button", "Login"))]
    if family in ("click-checkboxes", "click-option"):
        m = re.match(r"Select (.*) and click Submit\.", utterance)
        wanted = [] if m.group(1) == "nothing" else [w.strip() for w in re.split(r",\s*|\s+and\s+", m.group(1)) if w.strip()]
        role = "checkbox" if family == "click-checkboxes" else "radio"
        return [_click(_first(items, role, w)) for w in wanted] + [_click(_first(items, "button", "Submit"))]
    if family == "click-tab":
        return [_click(_first(items, "link", utterance.removeprefix("Click on ").rstrip(".")))]
    return None


class RefOracle(Policy):
    """Plays :func:`solve` each turn (one turn, unless the family is in :data:`MULTI_TURN`);
    the page ends the episode when it is done."""

    name = "miniwob-ref-oracle"

    def __init__(self, settings: Any, expect: bool = False, **options: Any):
        super().__init__(settings, **options)
        self.expect = expect

    async def act(self, context: Context) -> Turn:
        family = context.task.metadata.get("miniwob", context.task.id)
        if context.history and family not in MULTI_TURN:
            return Turn(end="the oracle answers in one turn")
        try:
            calls = solve(family, context.task.intent, context.observation.aria or "")
        except (LookupError, AttributeError, IndexError) as err:
            return Turn(end=f"the oracle cannot read this page: {err}")
        if calls is None:
            return Turn(end=f"the oracle has no solution for {family}")
        items = nodes(context.observation.aria or "")
        thought = "\n".join(grounding(target(items, c["arguments"]["ref"])) for c in calls)
        if self.expect:
            for c in calls:
                if c["name"] == "write":
                    c["expect"] = {"value_equals": {"ref": c["arguments"]["ref"], "value": c["arguments"]["message"]}}
        return Turn(thought=thought, calls=[ToolCall.model_validate(c) for c in calls])
