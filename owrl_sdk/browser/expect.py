"""Checking an :class:`~owrl_sdk.types.Expectation` against the page, once.

:meth:`BrowserEnv.verify` polls :func:`evaluate` until every check holds or time runs out.
Each failing :class:`~owrl_sdk.types.Check` says what was seen instead.
"""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Optional, Protocol

from owrl_sdk.types import Check, ElementRef, Expectation
from owrl_sdk.browser.errors import ActionError, explain
from owrl_sdk.browser.feedback import short

if TYPE_CHECKING:  # pragma: no cover
    from playwright.async_api import Dialog, Locator, Page

    from owrl_sdk.browser.state import _Snapshot


class BrowserEnv(Protocol):
    """What the checks read of an episode's environment (:class:`~owrl_sdk.browser.env.BrowserEnv`,
    which calls them: this module does not import it)."""

    pages: list["Page"]
    _snapshot: Optional["_Snapshot"]
    _tabs_opened: int

    @property
    def page(self) -> "Page": ...

    @property
    def dialog(self) -> Optional["Dialog"]: ...

    async def _aria(self, page: "Page") -> Optional[str]: ...

    def element(self, ref: Optional[str] = None, selector: Optional[str] = None) -> "Locator": ...

    def _raise_if_dead(self, error: BaseException) -> None: ...

#: [the value, whether it is a field's own]: an editor (contenteditable, role textbox) holds its text.
_READ_VALUE = ("el => (['INPUT', 'TEXTAREA', 'SELECT'].includes(el.tagName) || "
               "('value' in el && typeof el.value === 'string' && !el.isContentEditable)) "
               "? [el.value, true] : [el.innerText ?? el.textContent ?? '', false]")

#: Keys that can be read while a dialog blocks the page.
_WITHOUT_PAGE = {"url_contains", "url_matches", "new_tab"}


async def evaluate(env: "BrowserEnv", expect: Expectation) -> list[Check]:
    page = env.page if env.pages else None
    checks = []
    for key in expect.keys():
        value = getattr(expect, key)
        if page is None and key != "new_tab":
            checks.append(Check(key=key, ok=False, detail="no tab is open"))
            continue
        if env.dialog is not None and key not in _WITHOUT_PAGE:
            checks.append(Check(key=key, ok=False, detail=f"{'an' if env.dialog.type[:1] in 'aeiou' else 'a'} {env.dialog.type} dialog blocks the page"))
            continue
        check = _CHECKS[key]
        try:
            ok, detail = await check(env, page, value)
        except ActionError as err:
            ok, detail = False, str(err)
        except Exception as err:
            from playwright.async_api import Error as PlaywrightError

            if not isinstance(err, PlaywrightError):
                raise
            env._raise_if_dead(err)
            ok, detail = False, explain(err, f"checking {key}")
        checks.append(Check(key=key, ok=ok, detail="" if ok else detail))
    return checks


async def _url_contains(env: "BrowserEnv", page: "Page", text: str) -> tuple[bool, str]:
    return text in page.url, f"the URL is {short(page.url, 120)}"


async def _url_matches(env: "BrowserEnv", page: "Page", pattern: str) -> tuple[bool, str]:
    try:
        found = re.search(pattern, page.url)
    except re.error as err:
        return False, f"'{pattern}' is not a valid regular expression ({err})"
    return found is not None, f"the URL is {short(page.url, 120)}"


async def _title_contains(env: "BrowserEnv", page: "Page", text: str) -> tuple[bool, str]:
    title = await page.title()
    return text in title, f'the title is "{short(title, 80)}"'


async def _visible_text_count(page: "Page", text: str) -> tuple[int, int]:
    """(visible, all) elements holding ``text`` across the page's frames (open shadow roots included)."""

    async def count(frame: Any) -> tuple[int, int]:
        found = frame.get_by_text(text)
        try:
            return await found.filter(visible=True).count(), await found.count()
        except Exception as err:  # a frame that navigated away meanwhile
            from playwright.async_api import Error as PlaywrightError

            if isinstance(err, PlaywrightError) and "detached" in str(err).lower():
                return 0, 0
            raise

    results = await asyncio.gather(*(count(frame) for frame in page.frames))
    return sum(r[0] for r in results), sum(r[1] for r in results)


async def _text_visible(env: "BrowserEnv", page: "Page", text: str) -> tuple[bool, str]:
    visible, present = await _visible_text_count(page, text)
    if visible:
        return True, ""
    if present:
        return False, f'"{short(text, 60)}" is on the page but hidden'
    return False, f'"{short(text, 60)}" is not on the page'


async def _text_absent(env: "BrowserEnv", page: "Page", text: str) -> tuple[bool, str]:
    visible, _ = await _visible_text_count(page, text)
    return visible == 0, f'"{short(text, 60)}" is still visible ({visible} place{"s" if visible != 1 else ""})'


async def _element(env: "BrowserEnv", target: ElementRef) -> Any:
    if target.ref is not None:
        snap = env._snapshot
        if snap is None or snap.page is not env.page or f"[ref={target.ref}]" not in snap.text:
            # refs are given out by snapshots: take one, the element may have come since
            await env._aria(env.page)
    return env.element(ref=target.ref, selector=target.selector)


def _named(target: ElementRef) -> str:
    return f"ref {target.ref}" if target.ref is not None else f"selector {target.selector}"


async def _element_visible(env: "BrowserEnv", page: "Page", target: ElementRef) -> tuple[bool, str]:
    try:
        locator = await _element(env, target)
    except ActionError:
        return False, f"{_named(target)} is not on the page"
    total = await locator.count()
    if total == 0:
        return False, f"no element matches {_named(target)}"
    if await locator.filter(visible=True).count():
        return True, ""
    return False, f"{_named(target)} is on the page but hidden"


async def _value_equals(env: "BrowserEnv", page: "Page", target: Any) -> tuple[bool, str]:
    try:
        locator = await _element(env, target)
    except ActionError:
        return False, f"{_named(target)} is not on the page"
    if await locator.count() == 0:
        return False, f"no element matches {_named(target)}"
    value, native = await locator.first.evaluate(_READ_VALUE)
    # an editor's lines are markup (paragraphs, <br>): its text is compared with spacing evened out
    ok = value == target.value or (not native and " ".join(value.split()) == " ".join(target.value.split()))
    return ok, f'{_named(target)} holds "{short(value, 80)}"'


async def _new_tab(env: "BrowserEnv", page: Any, expected: bool) -> tuple[bool, str]:
    opened = env._tabs_opened > 0
    if opened:
        return opened == expected, f"a new tab was opened ({len(env.pages)} tabs)"
    return opened == expected, "no new tab was opened"


_CHECKS: dict[str, Callable[..., Awaitable[tuple[bool, str]]]] = {
    "url_contains": _url_contains,
    "url_matches": _url_matches,
    "title_contains": _title_contains,
    "text_visible": _text_visible,
    "text_absent": _text_absent,
    "element_visible": _element_visible,
    "value_equals": _value_equals,
    "new_tab": _new_tab,
}


#: What a page says about a failure: its alerts and live regions, and the messages of the
#: fields it marks invalid (``aria-invalid`` with ``aria-errormessage`` / ``aria-describedby``,
#: or a native field the person's input made invalid, ``:user-invalid``, by its
#: ``validationMessage``). Read without side effects: ``checkValidity()`` would fire events.
_PAGE_SAYS = """(limit) => {
  const out = [], seen = new Set();
  const shown = (el) => el.checkVisibility ? el.checkVisibility({visibilityProperty: true}) : el.getClientRects().length > 0;
  const add = (text, label) => {
    text = (text || '').replace(/\\s+/g, ' ').trim();
    if (!text || seen.has(text)) return;
    seen.add(text);
    if (text.length > 200) text = text.slice(0, 199) + '…';
    out.push(label ? label + ': ' + text : text);
  };
  const labelOf = (el) => ((el.labels && el.labels[0] && el.labels[0].innerText) || el.getAttribute('aria-label')
                           || el.name || el.id || '').replace(/\\s+/g, ' ').trim();
  for (const el of document.querySelectorAll('[role=alert], [role=alertdialog], [role=status], [aria-live=assertive], [aria-live=polite], output'))
    if (shown(el)) add(el.innerText);
  for (const el of document.querySelectorAll('input, select, textarea, [aria-invalid=true]')) {
    let userInvalid = false;
    try { userInvalid = el.matches(':user-invalid'); } catch (e) {}
    if (el.getAttribute('aria-invalid') !== 'true' && !userInvalid) continue;
    const ids = (el.getAttribute('aria-errormessage') || el.getAttribute('aria-describedby') || '').split(/\\s+/);
    for (const id of ids) { const m = id && document.getElementById(id); if (m && shown(m)) add(m.innerText, labelOf(el)); }
    if (el.validationMessage) add(el.validationMessage, labelOf(el));
  }
  return out.slice(0, limit);
}"""


async def page_says(page: "Page", limit: int = 5) -> list[str]:
    """Up to ``limit`` short lines the page shows about a failure (see :data:`_PAGE_SAYS`); none
    when the page cannot be read (closed, navigating, blocked by a dialog)."""
    try:
        said = await asyncio.wait_for(page.evaluate(_PAGE_SAYS, limit), timeout=2.0)
    except Exception:  # noqa: BLE001 - a page that cannot be read says nothing
        return []
    return [str(t) for t in said][:limit] if isinstance(said, list) else []
