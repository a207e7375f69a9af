"""Bounded observations: an aria snapshot cut to a character budget, saying what it left out.

A page of 50,000 elements gives an aria snapshot of about a million characters; a small
model's context holds a few thousand tokens. :func:`bound_snapshot` keeps, within the
budget (the ``observation_chars`` setting), in this order:

1. the interactive elements in the viewport (links, buttons, fields, anything with a
   pointer cursor), the focused element and the page's search box;
2. everything else in the viewport;
3. what is near it (within one viewport height above or below), interactive first;
4. the interactive elements further away, nearest first; then the rest, nearest first.

A kept line keeps its ancestors, so the indentation still reads as a tree, and its
``[ref=...]`` intact, so a tool can act on it. Each run of lines left out becomes one
marker line (``- [… 24,944 elements below the viewport left out: scroll down]``; where
markers between kept lines would crowd the budget, only the larger runs get one) and the
first line of the text says what was cut, how much, and how to reach the rest (scrolling,
or the page's search box by its ref). A line longer than an eighth of the budget (a huge
text node, a huge name) is cut short with the number of characters left out.

Positions come from Playwright's ``aria_snapshot(boxes=True)``: each element's bounding
box as ``[box=x,y,width,height]``, relative to its frame's viewport (the boxes inside an
iframe are offset by the iframe's). :func:`strip_boxes` removes them again: the text the
policy reads, and the one the environment keeps for refs and change feedback, is the plain
snapshot, byte for byte. A text without boxes is cut the same way with every element
counted as off-screen, from the top: interactive elements first.

Under budget (or with a budget of 0) the text is returned unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

#: Budgets below this count as this: the first line and a few elements must fit.
MIN_BUDGET = 1000

#: Roles a policy acts on.
INTERACTIVE_ROLES = frozenset({
    "link", "button", "textbox", "searchbox", "checkbox", "radio", "switch", "combobox", "listbox",
    "option", "tab", "menuitem", "menuitemcheckbox", "menuitemradio", "slider", "spinbutton", "treeitem",
})

# indent, "- ", an optional YAML quote around the key, the role, the JSON-quoted name, then the
# key's attributes ([ref=e2] [cursor=pointer] [box=...]); the box is always the key's last one
_KEY = re.compile(r'^(?P<indent> *)- \'?(?P<role>[A-Za-z][\w-]*)(?P<name> "(?:[^"\\]|\\.)*")?(?P<attrs>(?: \[[^\]\n]*\])*)')
_BOX = re.compile(r" \[box=(-?\d+),(-?\d+),(-?\d+),(-?\d+)\]$")
_SEARCHY = re.compile(r"search|find|query|look ?up", re.I)

Box = tuple[int, int, int, int]


@dataclass
class Bounded:
    """A snapshot after the budget: ``text`` (what the policy reads), ``total_chars`` (the
    whole snapshot's length), ``cut`` (whether anything was left out), ``whole`` (the whole
    snapshot without boxes) and ``left_out`` (elements left out by place: ``above``,
    ``below``, ``beside``, ``in`` the viewport, ``unknown``; ``shortened``: long lines cut)."""

    text: str
    total_chars: int
    cut: bool = False
    left_out: dict[str, int] = field(default_factory=dict)
    whole: str = ""


@dataclass
class _Line:
    text: str
    depth: int
    parent: int
    box: Optional[Box]
    role: Optional[str]
    name: str
    interactive: bool
    focused: bool
    ref: Optional[str]


def strip_boxes(text: str) -> str:
    """``text`` without the ``[box=...]`` marks of ``aria_snapshot(boxes=True)``: what the
    same snapshot without boxes reads."""
    if "[box=" not in text:
        return text
    out = []
    for line in text.split("\n"):
        m = _KEY.match(line) if "[box=" in line else None
        if m is not None:
            b = _BOX.search(m.group("attrs"))
            if b is not None:
                end = m.end("attrs")
                line = line[: end - len(b.group(0))] + line[end:]
        out.append(line)
    return "\n".join(out)


def _parse(text: str) -> list[_Line]:
    lines: list[_Line] = []
    stack: list[tuple[int, int, tuple[int, int]]] = []  # (depth, index, offset for children)
    for raw in text.split("\n"):
        indent = len(raw) - len(raw.lstrip(" "))
        depth = indent // 2
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parent = stack[-1][1] if stack else -1
        offset = stack[-1][2] if stack else (0, 0)
        m = _KEY.match(raw)
        box: Optional[Box] = None
        role = name = None
        attrs = ""
        line = raw
        if m is not None:
            role = m.group("role")
            name = m.group("name") or ""
            attrs = m.group("attrs")
            b = _BOX.search(attrs)
            if b is not None:
                x, y, w, h = (int(v) for v in b.groups())
                box = (x + offset[0], y + offset[1], w, h)
                end = m.end("attrs")
                line = raw[: end - len(b.group(0))] + raw[end:]
                attrs = attrs[: -len(b.group(0))]
        if box is None and parent >= 0:
            box = lines[parent].box
        ref_m = re.search(r"\[ref=([^\]]+)\]", attrs) if attrs else None
        interactive = role is not None and (role in INTERACTIVE_ROLES or "[cursor=pointer]" in attrs)
        lines.append(_Line(line, depth, parent, box, role, (name or "").strip(), interactive,
                           "[active]" in attrs and role != "generic", ref_m.group(1) if ref_m else None))
        child_offset = (box[0], box[1]) if role == "iframe" and box is not None else offset
        stack.append((depth, len(lines) - 1, child_offset))
    return lines


def _where(box: Optional[Box], width: int, height: int) -> tuple[str, int]:
    """(``in``, ``above``, ``below``, ``beside`` or ``unknown``; distance in pixels)."""
    if box is None:
        return "unknown", 1 << 30
    x, y, w, h = box
    if y + h <= 0 and h >= 0:
        return "above", -(y + h)
    if y >= height:
        return "below", y - height
    if x + w <= 0:
        return "beside", -(x + w)
    if x >= width:
        return "beside", x - width
    return "in", 0


def _search_box(lines: list[_Line]) -> Optional[int]:
    best: Optional[int] = None
    for i, line in enumerate(lines):
        if line.ref is None or line.role not in ("searchbox", "textbox", "combobox"):
            continue
        if line.role == "searchbox":
            return i
        if best is None and _SEARCHY.search(line.name):
            best = i
    return best


def _cut_line(line: str, cap: int) -> tuple[str, int]:
    """A line cut to about ``cap`` characters, its key (role, ref) kept; (line, characters cut)."""
    if len(line) <= cap:
        return line, 0
    m = _KEY.match(line)
    if m is None:
        head, rest = line[:cap], line[cap:]
        return f"{head}… [{len(rest):,} characters left out]", len(rest)
    cut = 0
    name = m.group("name") or ""
    if len(name) > cap:
        cut += len(name) - cap
        name = name[:cap] + '…"'
    after = line[m.end("attrs"):]
    if len(after) > cap:
        head = after[:cap]
        space = head.rfind(" ")
        if space > cap - 40:  # at a word's end when one is near
            head = head[:space]
        cut += len(after) - len(head)
        after = head + f"… [{len(after) - len(head):,} characters left out]"
    return line[: m.start("name") if m.group("name") else m.end("role")] + name + m.group("attrs") + after, cut


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


_HOW = {"above": "scroll up", "below": "scroll down", "beside": "scroll sideways",
        "unknown": "scroll to reach them", "in": "they are in view but did not fit"}


def bound_snapshot(text: Optional[str], budget: int, viewport: tuple[int, int] = (1280, 1000)) -> Bounded:
    """``text`` (an aria snapshot, with or without boxes) within ``budget`` characters.

    ``budget`` 0: no bound (the text without boxes). ``viewport``: its width and height in
    CSS pixels, for the boxes."""
    if text is None:
        return Bounded("", 0)
    plain = strip_boxes(text)
    if budget <= 0 or len(plain) <= budget:
        return Bounded(plain, len(plain), whole=plain)
    budget = max(budget, MIN_BUDGET)
    if len(plain) <= budget:
        return Bounded(plain, len(plain), whole=plain)
    cutter = _Cutter(text, plain, budget, viewport)
    room, min_run = budget - 400, 1
    for _ in range(12):
        body, counts, markers = cutter.assemble(max(room, 0), min_run)
        result = cutter.headline(counts, len(body)) + "\n" + body
        over = len(result) - budget
        if over <= 0:
            return Bounded(result, len(plain), True, counts, plain)
        if markers > room // 4:  # many small runs left out between kept lines: mark only the larger ones
            min_run *= 4
        else:
            room -= over + 32
    result = result[:budget]  # not reached in practice: the text outgrew the room twelve times
    return Bounded(result, len(plain), True, counts, plain)


class _Cutter:
    """One snapshot's lines ranked for keeping: the search box, the focused element and what
    is interactive in view first; then the rest of the viewport; then what is near it
    (interactive first); then everything else (interactive first)."""

    def __init__(self, text: str, plain: str, budget: int, viewport: tuple[int, int]):
        self.plain, self.budget = plain, budget
        self.lines = _parse(text)
        width, self.height = viewport
        self.search = _search_box(self.lines)
        self.places: list[tuple[str, int]] = [_where(line.box, width, self.height) for line in self.lines]
        if all(place == "unknown" for place, _ in self.places):  # no boxes: from the top, in document order
            self.places = [("unknown", i) for i in range(len(self.lines))]
        self.order = sorted(range(len(self.lines)), key=lambda i: (self._tier(i), self.places[i][1], i))
        cap = max(200, budget // 8)
        self.texts: list[str] = []
        self.was_cut: list[bool] = []
        for line in self.lines:
            short, cut = _cut_line(line.text, cap)
            self.texts.append(short)
            self.was_cut.append(cut > 0)

    def _tier(self, i: int) -> int:
        line, (place, distance) = self.lines[i], self.places[i]
        if i == self.search or line.focused or (place == "in" and line.interactive):
            return 0
        if place == "in":
            return 1
        if distance <= self.height and place != "unknown":
            return 2 if line.interactive else 3
        return 4 if line.interactive else 5

    def _keep(self, room: int) -> list[bool]:
        """Lines in rank order, each with the ancestors it needs, while they fit ``room``."""
        lines, kept, used = self.lines, [False] * len(self.lines), 0
        for i in self.order:
            if kept[i]:
                continue
            chain = []
            j = i
            while j >= 0 and not kept[j]:
                chain.append(j)
                j = lines[j].parent
            cost = sum(len(self.texts[k]) + 1 for k in chain)
            if used + cost > room:
                continue
            for k in chain:
                kept[k] = True
            used += cost
        return kept

    def assemble(self, room: int, min_run: int) -> tuple[str, dict[str, int], int]:
        """The kept lines within ``room`` characters, a marker for each run of at least
        ``min_run`` elements left out (smaller runs are counted in the first line only);
        (text, counts, characters the markers take)."""
        lines, kept = self.lines, self._keep(room)
        out: list[str] = []
        markers = 0
        counts: dict[str, int] = {"shortened": sum(1 for k, cut in enumerate(self.was_cut) if cut and kept[k])}
        i = 0
        while i < len(lines):
            if kept[i]:
                out.append(self.texts[i])
                i += 1
                continue
            start = i
            run: dict[str, int] = {}
            while i < len(lines) and not kept[i]:
                if lines[i].role is not None:
                    run[self.places[i][0]] = run.get(self.places[i][0], 0) + 1
                i += 1
            n = sum(run.values())
            for place, count in run.items():
                counts[place] = counts.get(place, 0) + count
            if not n or n < min_run:
                continue
            out.append(f"{'  ' * lines[start].depth}- [… {_plural(n, 'element')} {_left_out(run)}]")
            markers += len(out[-1]) + 1
        return "\n".join(out), counts, markers

    def headline(self, counts: dict[str, int], shown: int) -> str:
        parts = []
        for place in ("above", "below", "beside", "in", "unknown"):
            if counts.get(place):
                label = {"in": "in the viewport", "unknown": "elsewhere"}.get(place, f"{place} the viewport")
                parts.append(f"{_plural(counts[place], 'element')} {label}")
        if counts.get("shortened"):
            parts.append(f"{_plural(counts['shortened'], 'long text')} cut short")
        how = [_HOW[p] for p in ("above", "below", "beside") if counts.get(p)]
        if how:
            reach = " or ".join(how)
        elif counts.get("unknown"):
            reach = "scroll"
        else:  # all in view: scrolling does not help, narrowing the page does
            reach = "narrow the page (a search or a filter)"
        if self.search is not None:
            s = self.lines[self.search]
            reach += f', or use the search box {s.name or s.role} [ref={s.ref}]'
        left = "; ".join(parts) or "nothing"
        return (f"[owrl: page snapshot cut to {shown:,} of {len(self.plain):,} characters (observation budget "
                f"{self.budget:,}): the viewport, what is near it and interactive elements are kept; left out: "
                f"{left}. To see more: {reach}.]")


def _left_out(run: dict[str, int]) -> str:
    """Where a run of left-out elements is, and how to reach it."""
    where = [p for p in ("above", "below", "beside", "in", "unknown") if p in run]
    if where == ["in"]:
        return "in the viewport left out (they did not fit)"
    if set(where) <= {"above", "below", "beside"}:
        return " and ".join(where) + " the viewport left out: " + " or ".join(_HOW[p] for p in where)
    return "elsewhere on the page left out: scroll to reach them"
