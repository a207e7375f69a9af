"""Playwright selectors for an element, as people would write them: by role and name, or the
iframe on the way to it. Shared by ``owrl inspect`` (which proposes selectors for a page) and
the recorder (which writes them into a flow)."""

from __future__ import annotations

import re
from typing import Any, Optional

#: The index of an element among a selector's matches, and their number (``evaluate_all``).
_INDEX_OF = "(els, target) => [els.indexOf(target), els.length]"


def quote(value: str) -> str:
    """``value`` for the inside of a quoted selector attribute."""
    return value.replace("\\", "\\\\").replace('"', '\\"')


def role_selector(role: str, name: str = "", exact: bool = False) -> str:
    """``role=ROLE[name="NAME"]`` (``"..."s``: case-sensitive, whole name), or ``role=ROLE``."""
    if not name:
        return f"role={role}"
    return f'role={role}[name="{quote(name)}"{"s" if exact else ""}]'


async def position(scope: Any, selector: str, handle: Any) -> tuple[int, int]:
    """(index of ``handle`` among the matches of ``selector`` in ``scope`` or -1, number of matches)."""
    try:
        index, count = await scope.locator(selector).evaluate_all(_INDEX_OF, handle)
    except Exception:  # noqa: BLE001 - a selector the engine refuses matches nothing here
        return -1, 0
    return int(index), int(count)


async def iframe_selector(parent: Any, iframe: Any) -> Optional[str]:
    """A selector that finds ``iframe`` alone in the frame ``parent``: by id, name or title when
    one is unique there, else by its position; None when it is not found at all."""
    attrs = await iframe.evaluate("el => [el.id, el.getAttribute('name'), el.getAttribute('title')]")
    candidates = []
    if attrs[0] and re.fullmatch(r"[A-Za-z][\w-]*", attrs[0]):
        candidates.append(f"iframe#{attrs[0]}")
    for attr, value in (("name", attrs[1]), ("title", attrs[2])):
        if value:
            candidates.append(f'iframe[{attr}="{quote(value)}"]')
    for candidate in candidates:
        index, count = await position(parent, candidate, iframe)
        if index == 0 and count == 1:
            return candidate
    index, count = await position(parent, "iframe", iframe)
    return f"iframe >> nth={index}" if index >= 0 else None
