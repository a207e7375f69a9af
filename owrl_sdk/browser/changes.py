"""Change feedback: what one call changed, in a few bounded words and as data.

Before a call the environment keeps the active tab's URL and aria snapshot (a snapshot
taken within :data:`FRESH_SNAPSHOT_S` stands for it); after, it compares: navigation, tabs
opened or closed, dialogs, downloads, refused navigations, and the elements that appeared,
disappeared or changed (:func:`owrl_sdk.browser.feedback.diff`). Nothing to tell is
:data:`~owrl_sdk.browser.feedback.NO_CHANGE`, and ``ToolResult.changed`` False. The same facts
go to ``ToolResult.page`` (:meth:`_facts`). ``configure(settle=...)`` adds a wait after
every action (:meth:`_settle_action`).
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Optional
from urllib.parse import urldefrag

from owrl_sdk.browser.feedback import NO_CHANGE, bounded, diff, short
from owrl_sdk.browser.liveness import _is_playwright_error
from owrl_sdk.browser.state import EnvState, _Snapshot

if TYPE_CHECKING:  # pragma: no cover
    from playwright.async_api import Frame, Page

#: A snapshot taken this recently stands for "before" the next call (saves a round trip).
FRESH_SNAPSHOT_S = 1.0

#: A field line of a snapshot that shows no value: a native field left empty, or an editor
#: (``contenteditable``, a ``role=textbox`` element) whose text the snapshot does not show.
_BARE_FIELD = re.compile(r'^(?P<line>\s*- (?:textbox|searchbox|combobox)\b[^:]*\[ref=(?P<ref>[\w-]+)\][^:"]*):?$')

#: The roles of such lines (a snapshot without any of these words has no such line).
_FIELD_ROLES = ("textbox", "searchbox", "combobox")


def _bare_fields(lines: list[str], natives: set[str]) -> list[tuple[int, "re.Match[str]"]]:
    """The lines (index, match) of fields that show no value, other than known native ones."""
    return [(i, m) for i, line in enumerate(lines) if (m := _BARE_FIELD.match(line)) and m.group("ref") not in natives]


#: Written on an editor's line in place of its text when that text could not be read in time
#: (a page slowed down, an element gone meanwhile): the line is then taken as unchanged.
_UNREAD = "\x00unread"

#: A field line with the value :meth:`ChangeFeedbackMixin._with_values` wrote on it.
_VALUED_FIELD = re.compile(r'^(?P<line>\s*- (?:textbox|searchbox|combobox)\b[^:]*\[ref=(?P<ref>[\w-]+)\][^:"]*): (?P<value>.*)$')


def _unread_as_unchanged(before: str, after: str) -> tuple[str, str]:
    """``before`` and ``after`` with each editor read on one side only given the other side's
    text (a line read on neither side shows none): an editor that could not be read is no news,
    rather than an editor said to be emptied or filled."""
    if _UNREAD not in before and _UNREAD not in after:
        return before, after

    def values(text: str) -> dict[str, str]:
        return {m.group("ref"): m.group("value") for line in text.splitlines() if (m := _VALUED_FIELD.match(line))}

    def filled(text: str, other: dict[str, str]) -> str:
        lines = text.splitlines()
        for i, line in enumerate(lines):
            m = _VALUED_FIELD.match(line)
            if m and m.group("value") == _UNREAD:
                twin = other.get(m.group("ref"), _UNREAD)
                lines[i] = m.group("line") if twin == _UNREAD else f"{m.group('line')}: {twin}"
        return "\n".join(lines)

    return filled(before, values(after)), filled(after, values(before))


#: The text an element holds when it is not a native field (None for a native one).
_EDITOR_TEXT = ("el => (['INPUT', 'TEXTAREA', 'SELECT'].includes(el.tagName) ? null : "
                "(el.innerText ?? el.textContent ?? ''))")

#: Whether a document (its open shadow roots included) holds an element that is not a native
#: field yet has a textbox, searchbox or combobox role: only such an element gives a snapshot
#: line of that role that is not a native field's (a ``contenteditable`` region has no such
#: role of its own). One look per frame, in place of one read per field.
_EDITOR_SCAN = r"""() => {
  const roles = /(?:^|\s)(?:textbox|searchbox|combobox)(?:\s|$)/i;
  const natives = ['INPUT', 'TEXTAREA', 'SELECT'];
  const roots = [document];
  for (let i = 0; i < roots.length; i++) {
    const all = roots[i].querySelectorAll('*');
    for (let j = 0; j < all.length; j++) {
      const el = all[j];
      if (el.shadowRoot) roots.push(el.shadowRoot);
      const role = el.getAttribute('role');
      if (role && roles.test(role) && !natives.includes(el.tagName)) return true;
    }
  }
  return false;
}"""

#: How long that look may take before the fields are read one by one instead (seconds).
_SCAN_S = 1.0


@dataclass
class _Before:
    page: Optional["Page"]
    url: str
    aria: Optional[str]


def _same_document(url: str, other: str) -> bool:
    return urldefrag(url)[0] == urldefrag(other)[0]


class ChangeFeedbackMixin(EnvState):
    """Reading what a call changed."""

    async def _before(self) -> _Before:
        page = self._active
        if page is None:
            return _Before(None, "", None)
        url = page.url
        if not self._changes:  # nothing reads what the call changes: no snapshot to compare
            return _Before(page, url, None)
        snap = self._snapshot
        if self._dialogs.held:
            # the page has been frozen since the action that opened the dialog: its snapshot stands
            known = snap.text if snap is not None and snap.page is page and snap.url == url else None
            return _Before(page, url, known)
        if snap is not None and snap.page is page and snap.url == url and time.monotonic() - snap.at < FRESH_SNAPSHOT_S:
            return _Before(page, url, await self._with_values(page, snap.text))
        return _Before(page, url, await self._with_values(page, await self._aria(page)))

    async def _with_values(self, page: "Page", text: Optional[str]) -> Optional[str]:
        """``text`` (a snapshot) with what each editor holds written on its line, as a native
        field's value is: a ``contenteditable`` region or another element with a textbox role
        shows no text of its own in a snapshot. Native fields found once are not read again,
        and where no frame holds an editor (one look per frame) no field is read at all."""
        if text is None or self._dialogs.held:
            return text
        if not any(role in text for role in _FIELD_ROLES):
            return text
        natives = self._natives.setdefault((id(page), page.url), set())
        lines = text.splitlines()
        bare = _bare_fields(lines, natives)
        if not bare:
            return text
        editors = await self._editors_in(page)
        if editors is None:  # a dialog opened meanwhile
            return text
        if not editors:  # every bare field is a native one, left empty: nothing to read
            natives.update(m.group("ref") for _, m in bare)
            return text

        async def read(ref: str) -> Optional[str]:
            try:
                value: Optional[str] = await page.locator(f"aria-ref={ref}").evaluate(
                    _EDITOR_TEXT, timeout=_SCAN_S * 1000)
            except Exception as err:  # gone meanwhile, or the page too slow to answer: unread
                if not _is_playwright_error(err):
                    raise
                return _UNREAD
            if value is None:
                natives.add(ref)
            return value

        done, values = await self._dialogs.gather(*(read(m.group("ref")) for _, m in bare))
        if not done:
            return text
        for (i, m), value in zip(bare, values):
            flat = value if value == _UNREAD else " ".join((value or "").replace("\x00", "").split())
            if flat:
                lines[i] = f"{m.group('line')}: {flat}"
        return "\n".join(lines)

    async def _sorting_fields(self, page: "Page", snapshot: Awaitable[str]) -> str:
        """``snapshot`` (an aria snapshot being taken), returned once the fields it shows
        without a value are known to be native ones where no frame holds an editor (one look
        per frame, after it): the next call's before-snapshot then needs no look of its own.
        Beside an observation's screenshot, which takes longer, this costs no time."""
        text = await snapshot
        if not any(role in text for role in _FIELD_ROLES):
            return text
        natives = self._natives.setdefault((id(page), page.url), set())
        unknown = [m.group("ref") for _, m in _bare_fields(text.splitlines(), natives)]
        if unknown and not self._dialogs.held and await self._editors_in(page) is False:
            natives.update(unknown)
        return text

    async def _editors_in(self, page: "Page") -> Optional[bool]:
        """Whether any frame of ``page`` holds an editor that is not a native field (True too
        when a frame cannot tell); None when a dialog opened meanwhile."""
        async def scan(frame: "Frame") -> bool:
            try:
                found = await asyncio.wait_for(frame.evaluate(_EDITOR_SCAN), timeout=_SCAN_S)
            except asyncio.TimeoutError:  # the page's script is busy: read the fields one by one
                return True
            except Exception as err:
                if not _is_playwright_error(err):
                    raise
                return True
            return found is not False

        done, found = await self._dialogs.gather(*(scan(frame) for frame in list(page.frames)))
        return any(found) if done else None

    async def _aria(self, page: "Page") -> Optional[str]:
        """An aria snapshot (remembered for ref checks), or None if the page cannot give one now."""
        try:
            done, results = await self._dialogs.gather(page.aria_snapshot(mode="ai"))
        except Exception as err:
            if not _is_playwright_error(err):
                raise
            self._raise_if_dead(err)
            return None
        if not done:
            return None
        text: str = results[0]
        self._snapshot = _Snapshot(page, page.url, text, time.monotonic())
        return text

    async def _describe_change(self, before: _Before, tool_feedback: str) -> tuple[str, Optional[bool]]:
        """The feedback of a successful call, and whether it has anything to tell (False:
        nothing changed and the tool said nothing, the feedback is :data:`NO_CHANGE`; None:
        change feedback is off and nothing else happened, so nobody looked)."""
        parts = [tool_feedback]
        await self._await_new_tabs()
        await self._await_script_addresses()
        origin = before.page if before.page in self.pages else None
        after = None
        if origin is not None and before.aria is not None and not self._dialogs.held and _same_document(origin.url, before.url):
            # taken first: it also gives a popup the call opened time to announce itself
            marks = self._marks[1] if self._marks is not None and self._marks[0] is origin else None
            after = await self._with_values(origin, await self._aria(origin))
            snap = self._snapshot
            if marks is not None and after is not None and snap is not None and snap.page is origin:
                self._after_look = (snap, marks)  # the next observation may stand on it
        if origin is not None and origin.url != before.url:
            parts.append(f"navigated: {short(before.url, 80)} -> {short(origin.url, 80)}")
            if not _same_document(origin.url, before.url):
                await self._settle(origin)
        for kind, obj in list(self._events):
            if kind == "tab_opened" and obj in self.pages:
                await self._settle(obj)
                await self._refuse_new_tab(obj, origin)
        parts.extend(self._event_texts())
        page = self._active
        if page is not None and page is not origin and not self._tabs_opened and not self._dialogs.held:
            if not any(kind == "tab_closed" for kind, _ in self._events):
                parts.append(f"the active tab is now tab {self.pages.index(page)}: {short(page.url, 80)}")
        if after is not None and origin is not None and before.aria is not None and _same_document(origin.url, before.url):
            changes = diff(*_unread_as_unchanged(before.aria, after))
            if changes:
                parts.append(changes.describe())
        if self._dialogs.held:
            parts.append(self._dialogs.note())
        if not any(parts):
            return (NO_CHANGE, False) if self._changes else ("", None)
        return self._bound(parts), True

    def _facts(self, before: _Before) -> dict[str, Any]:
        """The change a call made, as data (see the module doc)."""
        page = self._active
        facts: dict[str, Any] = {
            "url": page.url if page is not None else None,
            "active_tab": self.pages.index(page) if page in self.pages else None,
            "tabs_opened": [self.pages.index(obj) for kind, obj in self._events
                            if kind == "tab_opened" and obj in self.pages],
        }
        origin = before.page
        if origin is not None and origin in self.pages and origin.url != before.url:
            facts["navigated_to"] = origin.url
        return facts

    async def _settle_action(self, tool: str = "") -> None:
        """The wait of ``configure(settle=..., waits=...)`` after ``tool``: network idle
        (bounded), then a pause; the tool's own entry in ``waits`` in place of ``settle``."""
        assert self._settle_after is not None
        wait = self._waits.get(tool, self._settle_after)
        page = self._active
        idle = float(wait.get("network_idle_ms", 0))
        if page is not None and idle > 0:
            try:
                await self._dialogs.gather(page.wait_for_load_state("networkidle", timeout=idle))
            except Exception as err:  # still busy (polling, streaming): the pause still comes
                if not _is_playwright_error(err):
                    raise
                self._raise_if_dead(err)
        await asyncio.sleep(float(wait.get("after_ms", 0)) / 1000)

    def _event_texts(self) -> list[str]:
        texts = []
        for kind, obj in self._events:
            if kind == "tab_opened":
                if obj in self.pages:
                    url = obj.url if obj.url not in ("", "about:blank") else "a blank page"
                    texts.append(f"a new tab opened (tab {self.pages.index(obj)}): {short(url, 80)}; it is the active tab now")
            elif kind == "tab_closed":
                index, url = obj
                now = self.pages.index(self._active) if self._active in self.pages else None
                tail = f"; the active tab is now tab {now}" if now is not None else ""
                texts.append(f"tab {index} ({short(url, 60)}) closed{tail}")
            else:
                texts.append(str(obj))
        return texts

    async def _settle(self, page: "Page") -> None:
        """Wait (bounded) for a page that navigated to have its document."""
        try:
            await self._dialogs.gather(page.wait_for_load_state("domcontentloaded", timeout=self.settings.navigation_timeout * 1000))
        except Exception as err:
            if not _is_playwright_error(err):
                raise
            self._raise_if_dead(err)

    def _bound(self, parts: list[str]) -> str:
        return bounded(parts, self.settings.feedback_chars)

    def _bound_with(self, feedback: str, note: str) -> str:
        """``feedback`` with ``note`` after it, the note kept whole within ``feedback_chars``."""
        room = self.settings.feedback_chars - len(note) - 1
        head = bounded([feedback], room) if room > 0 else ""
        return f"{head} {note}".strip() if head else bounded([note], self.settings.feedback_chars)
