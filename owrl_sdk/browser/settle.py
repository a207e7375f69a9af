"""Settling: after an action, wait until the page has gone quiet before its change is read.

A page often answers an action a moment later: a fetch, a timer, a debounced handler. The
after-snapshot taken at once would credit that change to the next call. So after each
successful call the environment waits until the page it acted on is quiet for
``settle_quiet_ms`` (default 100), at most ``settle_max_ms`` (default 1500; 0: no wait).

What is watched, in every frame of the page (an init script, :data:`QUIET_SCRIPT`, set on
the context so that each document and each iframe gets it before its own scripts run):

- DOM mutations, from a ``MutationObserver`` on the document (and on each shadow root the
  page attaches): the time of the last one;
- ``setTimeout`` timers the page set since the action began that fall due before the
  wait's end (a debounced handler, a delayed reveal): pending until they run or are
  cleared; one-off ``requestAnimationFrame`` callbacks asked for since then; and a frame
  loop whose frames change the DOM (an animation; a loop that only draws on a canvas is
  not waited for);
- ``fetch`` and ``XMLHttpRequest`` calls in flight that began since the action or less
  than a second ago (the page counts them as it makes them: no race with the browser's
  network events; a page that polls has one in flight whenever it is looked at, but on a
  loaded machine that one may have begun well before the action, while a long poll's, older,
  is not waited for), and the time the last one, of any age, ended;
- messages posted (``window.postMessage``, a ``MessageChannel`` port, a ``BroadcastChannel``):
  the time of the last one.

Besides, the environment follows the context's ``request`` / ``requestfinished`` /
``requestfailed`` events (:meth:`SettleMixin._on_request`): requests of the page that
began since the action and are not done yet are pending, and one that ended since then
counts as activity (long-lived kinds, event streams, web sockets and media, are left out).
These are read when the frames' reports are in, so that a request ending meanwhile counts.

"Since the action began" allows 250 ms before it, as a report may be slow to arrive on a
loaded machine. The first report after an action first lets the page's queued tasks run
(a posted message of its own), so that the page's handlers of the action's input have run,
where some may still be queued: when a message was posted since the action began (what a
scheduler such as React's queues its work with), or in a page with iframes (a frame may
post to another unseen); the action is taken to end there. Elsewhere nothing is queued
that the bookkeeping above does not see, and the report is made at once. The page is quiet
when nothing is pending and nothing happened for ``settle_quiet_ms``. What happened while
the action ran (the synchronous effect of a click) does not start that window: the
after-snapshot sees that effect, and whatever it set in motion is pending work above (a
busy page, an animation or polling, keeps setting such work in motion). A request that
ended does start it, whenever it ended: a page that chains its requests (polling) has
none in flight between two of them, and is still not quiet. So a page with nothing pending
is found quiet by the first check, which is made at once (one round trip per frame). A page
still busy at ``settle_max_ms`` (an endless animation, polling) is left as it is: the
call's ``ToolResult.page`` says ``settled: false`` and its feedback ends with a note that
the page was still changing.

Each frame's report also carries a mark: the document's own id and a count of everything
that may change what an aria snapshot shows, DOM mutations and request ends as above, and
besides them the focus moving, a field's value or check set (typed, or by a script through
the element's own setters), a form reset, a popover shown or hidden, a style sheet changed
through the CSSOM, a CSS animation or transition starting or ending. The last report's marks
are kept; where change feedback is read, the next observation asks each frame for its mark
again (:meth:`SettleMixin._unchanged`, one round trip beside the screenshot; the main frame
answers with the page's title too, read with the getter as it was before the page's scripts
ran), and while none moved and no animation runs, the call's after-snapshot stands for the
observation's: a step then takes one snapshot, as without change feedback. A style attribute
that changed in its ``caret-color`` alone (both values read by the CSS parser) moves no mark:
that is how the screenshot hides the caret in each field (and puts it back), and no snapshot
shows it. What no mark sees (a style rule's property set through ``rule.style``, a native
setter taken from a frame the script did not reach) is left as the after-snapshot showed it,
until the next look.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from owrl_sdk.browser.liveness import _is_playwright_error
from owrl_sdk.browser.state import EnvState

if TYPE_CHECKING:  # pragma: no cover
    from playwright.async_api import BrowserContext, Frame, Page, Request

#: The in-page bookkeeping; ``window.__owrlQuiet(args)`` reports on it (see the module doc).
QUIET_SCRIPT = r"""(() => {
  if (Object.prototype.hasOwnProperty.call(window, '__owrlQuiet')) return;
  const now = performance.now.bind(performance);
  // activity (a DOM change, a request ending): the last time; a request's end, also on its own
  let last = -Infinity, ended = -Infinity;
  // and a count of everything that may change what a snapshot shows (this document's own: a
  // frame's next document starts another), read by __owrlSeen
  const doc = Math.random().toString(36).slice(2);
  let seen = 0;
  const active = () => { last = now(); seen++; };
  const timers = new Map(), frames = new Map(), requests = new Set();
  // a frame loop is pending while it asks for its next frame and its last frames changed the DOM
  // (an animation); one that only draws (a canvas) is not waited for
  const looping = new Set();
  let inFrame = false, animated = -Infinity;
  // A style attribute that changed in its caret-color alone shows nothing new to a snapshot:
  // the screenshot hides the caret that way in each field (and puts it back), and is taken
  // beside a look at the marks. Anything else in a batch of mutations is activity.
  // Both values are read by the CSS parser (a detached element's style, with the methods as
  // they were before the page's scripts ran), so a change of their letters that the parser
  // reads otherwise (a semicolon taken out, a space put in a keyword) is activity.
  const getAttr = Element.prototype.getAttribute, setAttr = Element.prototype.setAttribute;
  const styleOf = Object.getOwnPropertyDescriptor(HTMLElement.prototype, 'style').get;
  const cssTextOf = Object.getOwnPropertyDescriptor(CSSStyleDeclaration.prototype, 'cssText').get;
  const removeProp = CSSStyleDeclaration.prototype.removeProperty;
  const scratch = document.createElement('div');
  const parsed = (v) => {
    setAttr.call(scratch, 'style', v || '');
    const style = styleOf.call(scratch);
    removeProp.call(style, 'caret-color');
    return cssTextOf.call(style);
  };
  const caretOnly = (r) => {
    if (r.type !== 'attributes' || r.attributeName !== 'style') return false;
    const now = getAttr.call(r.target, 'style');
    if (!/caret-color/i.test(String(r.oldValue || '') + String(now || ''))) return false;
    try { return parsed(r.oldValue) === parsed(now); } catch (e) { return false; }
  };
  const touched = (records) => { for (const r of records) if (!caretOnly(r)) return true; return false; };
  const observer = new MutationObserver((records) => { if (touched(records)) active(); });
  const watch = (root) => {
    try {
      observer.observe(root, {subtree: true, childList: true, attributes: true, attributeOldValue: true,
                              characterData: true});
    } catch (e) {}
  };
  watch(document);
  // events that move the mark (below)
  const TOUCHING = ['focusin', 'focusout', 'input', 'change', 'reset', 'toggle', 'animationstart', 'animationend',
                    'transitionstart', 'transitionend'];
  let listen = () => {};
  const attach = Element.prototype.attachShadow;
  if (attach) {
    Element.prototype.attachShadow = function () {
      const root = attach.apply(this, arguments);
      watch(root);
      listen(root);
      return root;
    };
  }
  const setT = window.setTimeout, clearT = window.clearTimeout, clearI = window.clearInterval;
  window.setTimeout = function (fn, delay) {
    if (typeof fn !== 'function') return setT.apply(window, arguments);
    const args = Array.prototype.slice.call(arguments);
    const at = now();
    let id;
    args[0] = function () { timers.delete(id); return fn.apply(this, arguments); };
    id = setT.apply(window, args);
    timers.set(id, [at, at + Math.max(0, Number(delay) || 0)]);
    return id;
  };
  window.clearTimeout = function (id) { timers.delete(id); return clearT.apply(window, arguments); };
  window.clearInterval = function (id) { timers.delete(id); return clearI.apply(window, arguments); };
  const raf = window.requestAnimationFrame, caf = window.cancelAnimationFrame;
  if (raf) {
    window.requestAnimationFrame = function (fn) {
      if (typeof fn !== 'function') return raf.apply(window, arguments);
      const looped = inFrame;
      let id;
      id = raf.call(window, function () {
        frames.delete(id);
        looping.delete(id);
        inFrame = true;
        try { return fn.apply(this, arguments); } finally {
          inFrame = false;
          if (touched(observer.takeRecords())) { active(); animated = now(); }
        }
      });
      if (looped) looping.add(id); else frames.set(id, now());
      return id;
    };
    window.cancelAnimationFrame = function (id) { frames.delete(id); looping.delete(id); return caf.apply(window, arguments); };
  }
  const begin = () => { const r = {at: now()}; requests.add(r); return r; };
  const end = (r) => { if (requests.delete(r)) { active(); ended = last; } };
  const fetch = window.fetch;
  if (fetch) {
    window.fetch = function () {
      const r = begin();
      let answer;
      try { answer = fetch.apply(this, arguments); } catch (e) { end(r); throw e; }
      answer.then(() => end(r), () => end(r));
      return answer;
    };
  }
  const XHR = window.XMLHttpRequest;
  if (XHR) {
    const send = XHR.prototype.send;
    XHR.prototype.send = function () {
      const r = begin();
      const done = () => { end(r); this.removeEventListener('loadend', done); };
      this.addEventListener('loadend', done);
      try { return send.apply(this, arguments); } catch (e) { done(); throw e; }
    };
  }
  // a message posted (window.postMessage, a MessageChannel's port, a BroadcastChannel): the
  // last time; the task that delivers it is queued work no other bookkeeping sees
  let posted = -Infinity;
  const Channel = window.MessageChannel, portPost = window.MessagePort && window.MessagePort.prototype.postMessage;
  const marking = (owner, name) => {
    const f = owner && owner[name];
    if (typeof f !== 'function') return;
    try { owner[name] = function () { posted = now(); seen++; return f.apply(this, arguments); }; } catch (e) {}
  };
  marking(window, 'postMessage');
  if (window.MessagePort) marking(window.MessagePort.prototype, 'postMessage');
  if (window.BroadcastChannel) marking(window.BroadcastChannel.prototype, 'postMessage');
  // The first report after an action (a new token) first lets the tasks already queued run
  // when the page may have queued some (a message posted since the action began, or frames
  // that may post to each other unseen): what they do is the action's own effect, and the
  // action is taken to end there. Otherwise the action ended when the report came.
  const SLACK = 250;
  // a request in flight that began this recently (ms) is pending too, whenever the action
  // came: a page that chains its requests (polling) always has one in flight, though on a
  // loaded machine it may have begun well before the action; a long poll's is older
  const RECENT = 1000;
  // read before the page's scripts run: a page may shadow window.length or window.parent
  const nested = window !== window.parent;
  const lengthOf = (Object.getOwnPropertyDescriptor(window, 'length') || {}).get;
  const framed = () => nested || (lengthOf ? lengthOf.call(window) : window.length) > 0;
  let token = null, stop = -Infinity;
  const flush = () => new Promise((resolve) => {
    const channel = new Channel();
    channel.port1.onmessage = resolve;
    portPost.call(channel.port2, 0);
  });
  // since: ms since the action began (the report may take a while to arrive: what began a
  // little earlier, by SLACK ms, counts too); horizon: ms the wait has left. Activity before
  // the action ended is its own effect: only later activity counts, and a request's end.
  const report = async (since, horizon, action) => {
    const asked = now(), start = asked - since - SLACK;
    if (action !== token) {
      if (posted >= start || framed()) await flush();
      token = action;
      stop = now();
    }
    const t = now();
    let pending = 0, due = Infinity;
    for (const [at, when] of timers.values()) {
      if (at >= start && when <= t + horizon) { pending++; due = Math.min(due, when - t); }
    }
    for (const at of frames.values()) if (at >= start) { pending++; due = Math.min(due, 16); }
    if (looping.size && t - animated < 1000) { pending++; due = Math.min(due, 16); }
    for (const r of requests) if (r.at >= start || t - r.at < RECENT) pending++;
    // a request that ended, whenever it did, restarts the quiet window (polling chains one
    // request to the next: between two there is nothing in flight); other activity counts
    // once the action ended
    const recent = Math.max(last > stop ? last : -Infinity, ended);
    const quiet = recent > -Infinity ? t - recent : null;
    return {pending, due: due === Infinity ? null : Math.max(0, due), quiet, seen: doc + ':' + seen};
  };
  // What changes a snapshot with no DOM mutation moves the mark too: the focus, a field's value
  // or check (typed, or set by a script), a form reset, a popover shown or hidden, a style
  // sheet changed, a CSS animation or transition (events that do not leave a shadow root are
  // heard in each root as it is attached, above).
  const touch = () => { seen++; };
  listen = (root) => {
    for (const type of TOUCHING) { try { root.addEventListener(type, touch, true); } catch (e) {} }
  };
  listen(window);
  const wrap = (proto, name) => {
    const d = proto && Object.getOwnPropertyDescriptor(proto, name);
    if (!d || !d.configurable) return;
    try {
      if (d.set) {
        const set = d.set;
        Object.defineProperty(proto, name, {get: d.get, set: function (v) { seen++; return set.call(this, v); },
                                            enumerable: d.enumerable, configurable: true});
      } else if (typeof d.value === 'function') {
        const f = d.value;
        Object.defineProperty(proto, name, {value: function () { seen++; return f.apply(this, arguments); },
                                            enumerable: d.enumerable, configurable: true, writable: true});
      }
    } catch (e) {}
  };
  const touching = {
    HTMLInputElement: ['value', 'checked', 'indeterminate', 'valueAsNumber', 'valueAsDate', 'setRangeText', 'stepUp',
                       'stepDown'],
    HTMLTextAreaElement: ['value', 'setRangeText'], HTMLSelectElement: ['value', 'selectedIndex'],
    HTMLOptionElement: ['selected'], HTMLFormElement: ['reset'],
    HTMLElement: ['showPopover', 'hidePopover', 'togglePopover'],
    // style sheets changed through the CSSOM (what CSS-in-JS libraries do) hide or show elements
    CSSStyleSheet: ['insertRule', 'deleteRule', 'addRule', 'removeRule', 'replace', 'replaceSync'],
    CSSGroupingRule: ['insertRule', 'deleteRule'], CSSStyleDeclaration: ['setProperty', 'removeProperty', 'cssText'],
    StyleSheet: ['disabled'], Document: ['adoptedStyleSheets'], ShadowRoot: ['adoptedStyleSheets'],
  };
  for (const kind of Object.keys(touching)) {
    for (const name of touching[kind]) wrap(window[kind] && window[kind].prototype, name);
  }
  Object.defineProperty(window, '__owrlQuiet', {value: report, enumerable: false, configurable: false, writable: false});
  // while an animation runs (CSS, a transition, the Web Animations API) no mark holds: it may
  // show or hide an element between its start and its end
  const getAnimations = Document.prototype.getAnimations;
  const animating = () => { try { return getAnimations.call(document).length > 0; } catch (e) { return true; } };
  // titled: [mark, the document's title], read with the getter as it was before the page's scripts ran
  const titleOf = (Object.getOwnPropertyDescriptor(Document.prototype, 'title') || {}).get;
  const title = () => { try { return titleOf ? String(titleOf.call(document)) : null; } catch (e) { return null; } };
  const mark = () => (animating() ? null : doc + ':' + seen);
  Object.defineProperty(window, '__owrlSeen', {value: (titled) => (titled ? [mark(), title()] : mark()),
                                               enumerable: false, configurable: false, writable: false});
})();"""

_PROBE = "(a) => (typeof window.__owrlQuiet === 'function' ? window.__owrlQuiet(a[0], a[1], a[2]) : null)"

_actions = itertools.count(1)

#: Request kinds that may stay open for good: they are not waited for.
_LONG_LIVED = {"eventsource", "websocket", "media"}

#: How often a page with pending work is looked at again (seconds), at most and at least.
_POLL_MAX_S = 0.05
_POLL_MIN_S = 0.005


@dataclass
class Settled:
    """How the wait after one action went: ``settled`` False when the page was still busy
    at ``settle_max_ms``; ``ms`` the time waited; ``max_ms`` the maximum it waited for."""

    settled: bool
    ms: float
    max_ms: float

    def note(self) -> str:
        """The words the feedback ends with when the page did not settle ('' when it did). They
        name the maximum, not the time measured (which ``ms`` keeps): a loaded machine overruns
        the maximum by a few tens of ms, and the text the policy reads must not depend on that."""
        return "" if self.settled else f"(the page was still changing after {self.max_ms / 1000:g} s)"


class SettleMixin(EnvState):
    """Waiting for the page to go quiet after an action (see the module doc)."""

    async def _install_settle(self, context: "BrowserContext") -> None:
        """The init script and the request events, once per context (at reset)."""
        self._requests = {}
        self._requests_done = {}
        if self.settings.settle_max_ms <= 0:
            return
        await context.add_init_script(QUIET_SCRIPT)
        context.on("request", self._on_request)
        context.on("requestfinished", self._on_request_done)
        context.on("requestfailed", self._on_request_done)

    def _on_request(self, request: "Request") -> None:
        if request.resource_type in _LONG_LIVED:
            return
        try:
            page: Optional["Page"] = request.frame.page
        except Exception:  # noqa: BLE001 - a service worker's request belongs to no frame
            page = None
        self._requests[request] = (page, time.monotonic())

    def _on_request_done(self, request: "Request") -> None:
        known = self._requests.pop(request, None)
        if known is not None and known[0] is not None:
            self._requests_done[id(known[0])] = time.monotonic()

    def _settling_page(self, acted_on: Optional["Page"]) -> Optional["Page"]:
        """The page to wait for: the one the call acted on while it is open, else the active tab."""
        return acted_on if acted_on is not None and acted_on in self.pages else self._active

    async def _settle_quietly(self, page: Optional["Page"], began: float) -> Optional[Settled]:
        """Wait until ``page`` is quiet (see the module doc). ``began``: when the action
        started (``time.monotonic()``). None when settling is off."""
        max_s = self.settings.settle_max_ms / 1000
        if max_s <= 0 or page is None or page.is_closed():
            return None
        quiet_s = self.settings.settle_quiet_ms / 1000
        action = next(_actions)
        start = time.monotonic()
        deadline = start + max_s
        while True:
            now = time.monotonic()
            left = max(deadline - now, 0.0)
            report = await self._quiet_report(page, began, left, action)
            if report is None:  # a dialog opened: the page is held, and that is the change
                return Settled(True, (time.monotonic() - start) * 1000, max_s * 1000)
            pending, due, quiet_for = report
            if pending == 0 and (quiet_for is None or quiet_for >= quiet_s):
                return Settled(True, (time.monotonic() - start) * 1000, max_s * 1000)
            now = time.monotonic()
            if now >= deadline:
                return Settled(False, (now - start) * 1000, max_s * 1000)
            if pending:
                pause = min(max(due if due is not None else _POLL_MAX_S, _POLL_MIN_S), _POLL_MAX_S)
            else:
                pause = quiet_s - (quiet_for or 0.0)
            await asyncio.sleep(min(max(pause, _POLL_MIN_S), deadline - now))

    async def _quiet_report(self, page: "Page", began: float, left: float,
                            action: int) -> Optional[tuple[int, Optional[float], Optional[float]]]:
        """(pending work, seconds until the next timer falls due, seconds quiet since the last
        activity, None: none since the action) over the page's frames and its requests; None
        when a dialog opened meanwhile. ``began``: when the action started (``time.monotonic()``)."""
        arg = [(time.monotonic() - began) * 1000, left * 1000, action]
        frames = list(page.frames)
        try:
            done, reports = await asyncio.wait_for(
                self._dialogs.gather(*(_probe(frame, arg) for frame in frames)), timeout=max(left, _POLL_MIN_S))
        except asyncio.TimeoutError:  # the page's script is busy: not quiet
            return 1, None, None
        if not done:
            return None
        self._marks = (page, [(frame, report.get("seen") if isinstance(report, dict) else None)
                              for frame, report in zip(frames, reports)])
        # the requests as they stand now that the frames have answered: one that ended while
        # the probes were on their way counts
        now = time.monotonic()
        pending = sum(1 for owner, at in self._requests.values() if owner is page and at >= began)
        net = self._requests_done.get(id(page), float("-inf"))
        quiet_for = now - net if net >= began else None
        due: Optional[float] = None
        for report in reports:
            if report is _BUSY:
                pending += 1
            elif isinstance(report, dict):
                pending += int(report.get("pending") or 0)
                if report.get("due") is not None:
                    when = float(report["due"]) / 1000
                    due = when if due is None else min(due, when)
                if report.get("quiet") is not None:
                    frame_quiet = float(report["quiet"]) / 1000
                    quiet_for = frame_quiet if quiet_for is None else min(quiet_for, frame_quiet)
        return pending, due, quiet_for

    async def _unchanged(self, page: "Page", marks: list[tuple["Frame", Optional[str]]]) -> tuple[bool, Optional[str]]:
        """Whether every frame of ``page`` is the one that gave ``marks`` and nothing that a
        snapshot shows changed in it since: no DOM mutation, request end, posted message, focus
        or input event, no field value or check set by a script (each moves the frame's mark);
        and the page's title, read with its main frame's mark (None where it cannot be read so).
        One round trip per frame; False wherever a frame cannot tell."""
        frames, main = list(page.frames), page.main_frame
        same = len(frames) == len(marks) and all(f is m for f, (m, _) in zip(frames, marks)) \
            and all(mark is not None for _, mark in marks)
        asked = frames if same else [main]
        seen = await asyncio.gather(*(_seen(frame, frame is main) for frame in asked))
        title, now = None, []
        for frame, answer in zip(asked, seen):
            if frame is main and isinstance(answer, list) and len(answer) == 2:
                answer, title = answer[0], answer[1] if isinstance(answer[1], str) else None
            now.append(answer)
        return same and all(isinstance(n, str) and n == mark for n, (_, mark) in zip(now, marks)), title


_BUSY = object()

_SEEN = "(t) => (typeof window.__owrlSeen === 'function' ? window.__owrlSeen(t) : null)"


async def _seen(frame: "Frame", titled: bool = False) -> Any:
    """A frame's mark now (None where it cannot tell: between documents, without the script);
    ``titled``: [mark, the document's title]."""
    try:
        return await frame.evaluate(_SEEN, titled)
    except Exception as err:
        if not _is_playwright_error(err):
            raise
        return None


async def _probe(frame: "Frame", arg: list[float]) -> Any:
    """One frame's report; ``_BUSY`` while it is between documents, None without the script."""
    try:
        return await frame.evaluate(_PROBE, arg)
    except Exception as err:
        if not _is_playwright_error(err):
            raise
        text = str(err).lower()
        if "destroyed" in text or "navigat" in text:
            return _BUSY  # the document is being replaced: not quiet yet
        return None  # a frame detached or closed meanwhile: nothing to wait for there


__all__ = ["QUIET_SCRIPT", "SettleMixin", "Settled"]
