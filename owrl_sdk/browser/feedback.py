"""Describing what one call changed on the page, in a few bounded words.

The element diff compares two ``aria_snapshot(mode="ai")`` texts line by line: refs,
focus and cursor marks are dropped, so an element that merely kept its place does not
count, and lines that differ only in state or text (same role and name) are reported as
changed rather than as one gone and one new.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Optional

from owrl_sdk.types import NO_CHANGE as NO_CHANGE  # where the loop reads it too

_NOISE = re.compile(r"\s*\[(?:ref|box)=[^\]]*\]|\s*\[(?:active|cursor=pointer)\]")
_LINE = re.compile(r'^(?P<role>[\w-]+)(?: "(?P<name>(?:[^"\\]|\\.)*)")?(?P<attrs>(?: \[[^\]]*\])*)(?::\s*(?P<text>.*))?$')
#: Containers that say nothing on their own when they come or go without a name or text.
_STRUCTURAL = {"generic", "group", "list", "listitem", "none", "presentation", "region", "rowgroup", "row", "iframe", "document", "main", "section"}


@dataclass(frozen=True)
class Element:
    role: str
    name: str
    attrs: str
    text: str

    @property
    def head(self) -> str:
        return f'{self.role} "{self.name}"' if self.name else self.role

    @property
    def telling(self) -> bool:
        return bool(self.name or self.text) or self.role not in _STRUCTURAL

    def describe(self, width: int = 40) -> str:
        label = self.name or self.text
        label = label if len(label) <= width else label[: width - 1] + "…"
        return f'{self.role} "{label}"' if label else self.role


def parse_line(line: str) -> Optional[Element]:
    text = _NOISE.sub("", line.strip())
    if not text.startswith("- "):
        return None
    text = text[2:].strip()
    if text.startswith("/"):  # a property of the element above (/url, /placeholder)
        return None
    if text.startswith('"'):
        # a bare quoted string child (inline text): '- "Hello"'
        return Element("text", "", "", text.strip('"'))
    m = _LINE.match(text)
    if not m:
        return Element("text", "", "", text)
    role = m.group("role")
    body = (m.group("text") or "").strip()
    if role == "text":
        return Element("text", "", "", body.strip('"'))
    if body.startswith('"') and body.endswith('"') and len(body) > 1:
        body = body[1:-1]
    return Element(role, (m.group("name") or "").replace('\\"', '"'), (m.group("attrs") or "").strip(), body)


#: Roles whose text child is their value (a textbox with a placeholder lists what it holds as a child).
_FIELDS = {"textbox", "searchbox", "combobox", "spinbutton"}


@functools.lru_cache(maxsize=2)
def elements(snapshot: str) -> Counter[Element]:
    """The elements of a snapshot, counted. Remembered for the last two snapshots (a call's
    after-snapshot is the next call's before-snapshot): the result is shared, not to be changed."""
    listed: list[list[Any]] = []  # [indent, element]
    parents: list[int] = []  # indices into listed, by depth
    for line in snapshot.splitlines():
        element = parse_line(line)
        if element is None:
            continue
        indent = len(line) - len(line.lstrip())
        while parents and listed[parents[-1]][0] >= indent:
            parents.pop()
        parent = listed[parents[-1]][1] if parents else None
        if element.role == "text" and parent is not None and parent.role in _FIELDS and not parent.text:
            listed[parents[-1]][1] = Element(parent.role, parent.name, parent.attrs, element.text)
            continue
        listed.append([indent, element])
        parents.append(len(listed) - 1)
    return Counter(element for _, element in listed)


@dataclass
class ElementDiff:
    appeared: list[Element] = field(default_factory=list)
    disappeared: list[Element] = field(default_factory=list)
    changed: list[tuple[Element, Element]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.appeared or self.disappeared or self.changed)

    def describe(self, names: int = 3) -> str:
        parts = []
        if self.appeared:
            parts.append(f"{_count(self.appeared)} appeared{_names(self.appeared, names)}")
        if self.disappeared:
            parts.append(f"{_count(self.disappeared)} disappeared{_names(self.disappeared, names)}")
        if self.changed:
            shown = "; ".join(_change(old, new) for old, new in self.changed[:names])
            more = f" (+{len(self.changed) - names} more)" if len(self.changed) > names else ""
            parts.append(f"changed: {shown}{more}")
        return "; ".join(parts)


def _count(items: list[Element]) -> str:
    return "1 element" if len(items) == 1 else f"{len(items)} elements"


def _names(items: list[Element], limit: int) -> str:
    named = [e.describe() for e in items if e.name or e.text]
    if not named:
        return ""
    more = ", …" if len(named) > limit else ""
    return " (" + ", ".join(named[:limit]) + more + ")"


def _change(old: Element, new: Element) -> str:
    what = []
    if old.attrs != new.attrs:
        what.append(new.attrs or f"no longer {old.attrs}")
    if old.text != new.text:
        shown = new.text if len(new.text) <= 40 else new.text[:39] + "…"
        what.append(f'now "{shown}"')
    return f"{new.head} {' '.join(what)}".strip()


def diff(before: str, after: str) -> ElementDiff:
    if before == after:
        return ElementDiff()
    old, new = elements(before), elements(after)
    gone = [e for e in (old - new).elements() if e.telling]
    came = [e for e in (new - old).elements() if e.telling]
    result = ElementDiff()
    by_head: dict[tuple[str, str], list[Element]] = {}
    for element in gone:
        if element.name:  # only named elements can be told apart well enough to pair
            by_head.setdefault((element.role, element.name), []).append(element)
    unpaired = []
    for element in came:
        partners = by_head.get((element.role, element.name)) if element.name else None
        if partners:
            previous = partners.pop(0)
            gone.remove(previous)
            result.changed.append((previous, element))
        else:
            unpaired.append(element)
    # an unnamed element whose text changed (a status line, a counter): one gone and one new of its role
    for element in unpaired:
        same_role_came = [e for e in unpaired if e.role == element.role and not e.name]
        same_role_gone = [e for e in gone if e.role == element.role and not e.name]
        if not element.name and len(same_role_came) == 1 and len(same_role_gone) == 1:
            gone.remove(same_role_gone[0])
            result.changed.append((same_role_gone[0], element))
        else:
            result.appeared.append(element)
    result.disappeared = gone
    return result


def bounded(parts: list[str], limit: int) -> str:
    """Join non-empty parts with '; ' and cut to ``limit`` characters, ending in '…' if cut."""
    text = "; ".join(p for p in parts if p)
    if len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)].rstrip(" ;,") + "…"


def short(text: str, width: int = 60) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"
