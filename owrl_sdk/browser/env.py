"""The browser environment: one episode at a time in a fresh context of a shared Chromium.

:class:`BrowserEnv` implements :class:`owrl_sdk.env.Environment`. Besides the protocol it
offers what tools need: the active page, targets resolved to points or locators, tabs,
and the answer to a JavaScript dialog.

A JavaScript dialog is held open and reported (see :mod:`.dialogs`): the observation
shows it drawn over the last screenshot, and page tools are refused until ``handle_dialog``
(or Enter / Escape through ``press_keys``) answers it. :meth:`BrowserEnv.configure` changes
that for a policy whose model was trained otherwise: ``dialogs="accept"`` accepts each
dialog on arrival and shows its message in the page as a box with an OK button, and
``settle`` waits after every action (network idle, bounded, then a fixed pause) before
the change is read and the next screenshot taken.

Besides its feedback sentence, every successful call's result carries the facts in
``ToolResult.page``: the active tab's ``url`` and index (``active_tab``), ``navigated_to``
when the page the call acted on went elsewhere, and ``tabs_opened`` (indices); and
``ToolResult.changed`` says whether there was anything to tell (False: "no visible change").
A failed call carries its failure kind in ``ToolResult.error_kind`` (see :mod:`.errors`).

The domain policy (:class:`owrl_sdk.domains.DomainPolicy`) is enforced here. When it checks
hosts (an allowlist or a blocklist), every request of the episode's context, of any type,
is routed: one to a refused address is answered with an empty 204 before it leaves;
redirect hops, which Playwright's routing does not see, are held by the host
(:meth:`BrowserHost.guard_hops`); WebSockets to a refused host are closed before they
connect; service workers are blocked (their requests would bypass routing); a new tab that
ends on a refused address, or whose opening navigation was refused, is closed; a document
that a ``javascript:`` address replaced is left for about:blank. Navigations that never
reach the network (``data:``, ``file:``, ...) are checked when they commit. Without a list,
nothing is routed and none of this costs anything.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Optional, Sequence
from urllib.parse import urldefrag

import re

from .. import secrets
from ..domains import DomainPolicy
from ..errors import InfraError
from ..types import Expectation, Observation, Tab, Target, Task, ToolCall, ToolResult, Verdict
from . import expect as expectations
from .dialogs import Dialogs
from .errors import ActionError, describe, is_closed_error
from .feedback import NO_CHANGE, bounded, diff, short
from .geometry import box_center, grid_to_pixels

if TYPE_CHECKING:  # pragma: no cover
    from playwright.async_api import BrowserContext, Dialog, Download, Locator, Page

    from .host import BrowserHost

#: Context options that lower safety defaults; each one set puts a warning in the trajectory.
UNSAFE_CONTEXT_OPTIONS = ("ignore_https_errors", "bypass_csp")

#: A snapshot taken this recently stands for "before" the next call (saves a round trip).
FRESH_SNAPSHOT_S = 1.0
POLL_S = 0.1

#: How long a call's feedback waits for a ``javascript:`` address it scheduled to show whether
#: it replaced the document; one that has not after SCRIPT_URL_FORGET seconds is forgotten.
SCRIPT_URL_WAIT = 0.3
SCRIPT_URL_FORGET = 5.0
#: ``javascript:`` addresses that evaluate to nothing and so can never replace a document.
_HARMLESS_SCRIPT = re.compile(r"^javascript:\s*(void\s*\(\s*0\s*\)|void\s+0|undefined|null|false|)\s*;?\s*$", re.I)


def _is_playwright_error(error: BaseException) -> bool:
    from playwright.async_api import Error as PlaywrightError

    return isinstance(error, PlaywrightError)


@dataclass
class Located:
    """A resolved target: a viewport point or a locator, and how to name it in messages."""

    description: str
    point: Optional[tuple[float, float]] = None
    locator: Optional["Locator"] = None


@dataclass
class _Snapshot:
    page: "Page"
    url: str
    text: str
    at: float


@dataclass
class _Before:
    page: Optional["Page"]
    url: str
    aria: Optional[str]


@dataclass
class _Blocked:
    """A navigation the domain policy refused, and where it was going to happen (when known)."""

    url: str
    reason: str
    page: Optional["Page"] = None
    frame_id: Optional[str] = None
    hop: bool = False

    def __str__(self) -> str:
        how = " (a redirect)" if self.hop else ""
        scheme = self.url.split(":", 1)[0].lower()
        # a script or a whole page in the address: its text is the page's, not worth repeating
        where = f"a {scheme}: address" if scheme in ("javascript", "data") else short(self.url, 80)
        return f"navigation to {where}{how} blocked: {self.reason}"


#: The box an accepted dialog leaves in the page (owrl's own markup).
_DIALOG_BOX = """({kind, message}) => {
  const old = document.getElementById('owrl-dialog-box');
  if (old) old.remove();
  const shade = document.createElement('div');
  shade.id = 'owrl-dialog-box';
  shade.setAttribute('style', 'position:fixed;inset:0;z-index:2147483647;background:rgba(0,0,0,.45);' +
    'display:flex;align-items:center;justify-content:center;font:15px system-ui,sans-serif');
  const box = document.createElement('div');
  box.setAttribute('role', 'dialog');
  box.setAttribute('aria-label', kind);
  box.setAttribute('style', 'background:#fff;color:#222;border-radius:6px;padding:18px 20px;min-width:300px;' +
    'max-width:80vw;box-shadow:0 6px 24px rgba(0,0,0,.3)');
  const text = document.createElement('p');
  text.textContent = message;
  text.setAttribute('style', 'margin:0 0 16px;white-space:pre-wrap;word-break:break-word');
  const ok = document.createElement('button');
  ok.textContent = 'OK';
  ok.setAttribute('style', 'float:right;padding:6px 18px;border:0;border-radius:4px;background:#1a5fd0;color:#fff');
  const close = () => { shade.remove(); document.removeEventListener('keydown', onKey, true); };
  const onKey = (e) => { if (e.key === 'Escape') close(); };
  ok.addEventListener('click', close);
  shade.addEventListener('click', (e) => { if (e.target === shade) close(); });
  document.addEventListener('keydown', onKey, true);
  box.append(text, ok);
  shade.append(box);
  (document.body || document.documentElement).append(shade);
}"""

_ROLE_NAME = re.compile(r'\s*-\s+([a-z]+)\s+"((?:[^"\\]|\\.)*)"')


class BrowserEnv:
    """An :class:`~owrl_sdk.env.Environment` on Playwright. Made by :meth:`BrowserHost.new_env`."""

    def __init__(
        self,
        host: "BrowserHost",
        run_dir: Optional[Path] = None,
        trace: bool = False,
        unsafe: Optional[dict[str, Any]] = None,
        context_options: Optional[dict[str, Any]] = None,
        deny_local: bool = False,
    ):
        self.host = host
        #: Refuse local files and the browser's own pages in every navigation (``owrl serve``).
        self.deny_local = deny_local
        self.settings = host.settings
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.trace = trace
        self._unsafe = dict(unsafe or {})
        self._context_options = dict(context_options or {})
        self._own_warnings = [
            f"unsafe browser option {key}={value!r} is on for this run"
            for key, value in {**self._context_options, **self._unsafe}.items()
            if key in self._unsafe or (key in UNSAFE_CONTEXT_OPTIONS and value)
        ]
        self.warnings: list[str] = [*host.warnings, *self._own_warnings]
        self.context: Optional["BrowserContext"] = None
        self.pages: list["Page"] = []
        self._active: Optional["Page"] = None
        self._generation = 0
        self._titles: dict[int, str] = {}
        self._events: list[tuple[str, Any]] = []
        self._dialogs = Dialogs(spawn=self._spawn, report=lambda text: self._events.append(("dialog", text)),
                                shown=self._show_dialog_box)
        self._settle_after: Optional[dict[str, float]] = None
        self._tabs_opened = 0
        self._snapshot: Optional[_Snapshot] = None
        self._last_screenshot: Optional[bytes] = None
        self._crashed: set[int] = set()
        self.domains = DomainPolicy()
        #: Where secrets come from besides OWRL_SECRET_* (the resolve_secret hook, set by the runner).
        self.secret_lookup: Optional[Any] = None
        self._background: set[asyncio.Task] = set()
        self._closing = False
        self._traces = 0
        self._context_id: Optional[str] = None
        self._pages_before_call = 0
        # the domain policy's helpers (see _watch): each tab's CDP session task, its target id,
        # javascript: addresses scheduled per frame, refused documents being left, tabs closed quietly
        self._watches: dict[int, asyncio.Future] = {}
        self._targets: dict[int, str] = {}
        self._scripts: dict[str, tuple[str, float]] = {}
        self._leaving: set[asyncio.Future] = set()
        self._quiet: set[int] = set()

    # ================================================================== protocol

    def configure(self, dialogs: str = "hold", settle: Optional[dict[str, float]] = None) -> None:
        """How this environment treats the episodes that follow.

        ``dialogs``: ``hold`` (report, wait for ``handle_dialog``) or ``accept`` (accept on
        arrival and show the message in the page). ``settle``: after every action, wait up to
        ``network_idle_ms`` for the network to be idle, then ``after_ms`` more; None: no wait."""
        if dialogs not in ("hold", "accept"):
            raise ValueError(f"dialogs must be 'hold' or 'accept', not {dialogs!r}")
        self._dialogs.auto_accept = dialogs == "accept"
        self._settle_after = dict(settle) if settle else None

    async def reset(self, task: Task) -> None:
        """A fresh context and page, on the task's start page."""
        await self._close_context()
        browser, note = await self.host.browser_for_episode()
        self.warnings = [*self.host.warnings, *self._own_warnings]
        if note:
            self.warnings.append(note)
        s = self.settings
        self.domains = DomainPolicy.for_task(task.allowed_domains, s.allowed_domains, s.blocked_domains, task.start_url,
                                             deny_local=self.deny_local)
        options: dict[str, Any] = {
            "viewport": {"width": self.settings.viewport_width, "height": self.settings.viewport_height},
            "accept_downloads": True,
            # a service worker's requests bypass routing: none under a policy that checks hosts
            **({"service_workers": "block"} if self.domains.routes else {}),
            **self._context_options,
            **self._unsafe,
        }
        if self.domains.routes and options.get("service_workers") != "block":
            self.warnings.append("service workers are allowed: their requests are not held to the domain policy")
        try:
            context = await browser.new_context(**options)
        except Exception as err:
            raise self._infra(err, "could not open a browser context") from None
        self.context = context
        self._generation = self.host.generation
        self._closing = self._dialogs.closing = False
        context.set_default_timeout(self.settings.action_timeout * 1000)
        context.set_default_navigation_timeout(self.settings.navigation_timeout * 1000)
        context.on("page", self._on_page)
        context.on("dialog", self._dialogs.on_dialog)
        if self.domains.routes:
            await context.route("**/*", self._guard)
            await context.route_web_socket(self._refuses_socket, self._refuse_socket)
        if self.trace:
            await context.tracing.start(screenshots=True, snapshots=True, sources=False)
        try:
            page = await context.new_page()
        except Exception as err:
            raise self._infra(err, "could not open a page") from None
        self._on_page(page)
        self._context_id = await self._find_context_id(context, page)
        if self.domains.routes:
            if not await self.host.guard_hops(self, self._context_id):
                self.warnings.append("redirect hops are not checked against the domain policy "
                                     "(this browser gives no browser-level CDP session)")
            watch = self._watches.get(id(page))
            if watch is not None:
                await asyncio.wait({watch}, timeout=self.settings.action_timeout)
        self._events.clear()
        self._tabs_opened = 0
        failure: Optional[str] = None
        try:
            await self._dialogs.until(page.goto(task.start_url, wait_until="load"))
        except Exception as err:
            if not _is_playwright_error(err):
                raise
            self._raise_if_dead(err)
            if "Timeout" in str(err) and page.url not in ("", "about:blank"):
                self.warnings.append(f"the start page was still loading after {self.settings.navigation_timeout:g} s")
            else:
                failure, kind = describe(err, f"opening the start page {task.start_url}")
        # the start page's own navigation (or a hop of it) refused; a refused iframe does not count
        refused = [obj for kind, obj in self._events if kind == "blocked" and obj.frame_id != ""]
        if refused and (failure is not None or page.url in ("", "about:blank")):
            raise InfraError(f"the start page {task.start_url} was refused: {refused[-1]}",
                             code="start_page_unreachable")
        if failure is not None:
            unreachable = InfraError(failure, code="start_page_unreachable")
            unreachable.kind = kind  # what went wrong, as a failure kind (the classifier reads it)
            raise unreachable
        self._events.clear()
        self._tabs_opened = 0

    async def observe(self) -> Observation:
        self._check_alive()
        page = self._active
        if page is None:
            return Observation(url="", title="", tabs=[], aria="(no tab is open)")
        if self._dialogs.held:
            return self._dialog_observation(page)
        titles = [self._title(p) for p in self.pages]
        for attempt in range(2):
            try:
                slow = self.settings.navigation_timeout * 1000  # a heavy page is not an action gone wrong
                done, results = await self._dialogs.gather(
                    page.screenshot(type="jpeg", quality=self.settings.screenshot_quality, timeout=slow),
                    page.aria_snapshot(mode="ai", timeout=slow),
                    *titles,
                )
            except Exception as err:
                if not _is_playwright_error(err):
                    raise
                self._raise_if_dead(err)
                if attempt == 1:
                    raise InfraError(f"could not observe the page: {short(str(err), 200)}", code="observe_failed") from None
                await self._settle(page)
                titles = [self._title(p) for p in self.pages]
                continue
            if not done:
                return self._dialog_observation(page)
            break
        shot, aria, *names = results
        for p, name in zip(self.pages, names):
            self._titles[id(p)] = name
        self._last_screenshot = shot
        self._snapshot = _Snapshot(page, page.url, aria, time.monotonic())
        self._observed = self._snapshot  # what the policy saw: its refs resolve stale ones again
        # every field scrubbed (the URL and each tab's title and URL too): the policy reads them
        return secrets.scrub(Observation(
            url=page.url,
            title=self._titles.get(id(page), ""),
            tabs=self._tab_list(),
            aria=aria,
            screenshot=shot,
        ))

    async def execute(self, tool: Any, args: Any, call: ToolCall) -> ToolResult:
        """Run ``tool`` and describe what changed; action errors come back as failures."""
        self._check_alive()
        touches_page = getattr(tool, "needs_page", False)
        if self._dialogs.held and touches_page and not getattr(tool, "answers_dialogs", False):
            return ToolResult.failure(f"the page is blocked by a dialog; answer it first. {self._dialogs.note()}",
                                      kind="action.dialog_blocked")
        # events not yet reported (a download announced after the last feedback) stay in the list
        self._tabs_opened = 0
        self._pages_before_call = self.host.pages_created(self._context_id)
        before = await self._before()
        try:
            done, result = await self._dialogs.until(tool.run(self, args))
        except InfraError:
            raise
        except ActionError as err:
            done, result = True, ToolResult.failure(str(err), kind=err.kind)
        except Exception as err:
            if not _is_playwright_error(err):
                raise
            self._raise_if_dead(err)
            done, result = True, ToolResult.failure(*describe(err, _what(tool, args)))
        if done and result.ok and not result.ends_episode and self._settle_after:
            await self._settle_action()
        if not done:  # a dialog opened: that is the change
            result = ToolResult(feedback=self._bound([*self._event_texts(), self._dialogs.note()]), changed=True)
        elif not result.ok:
            events = self._event_texts()
            if events:
                result.feedback = self._bound([result.feedback, *events])
        elif not result.ends_episode:
            result.feedback, result.changed = await self._describe_change(before, result.feedback)
        if done and result.ok:
            result.page = self._facts(before)
        self._events = []
        # every string the policy reads back (feedback, error, the URLs in page, data) without
        # secrets; the answer is the policy's own, recorded (and scrubbed) with the outcome
        scrubbed = secrets.scrub(result)
        scrubbed.answer = result.answer
        return scrubbed

    async def verify(self, expect: Expectation) -> Verdict:
        """Poll the expectation until every key holds or ``expect_timeout`` passes."""
        started = time.monotonic()
        deadline = started + self.settings.expect_timeout
        while True:
            self._check_alive()
            # page reads stall while a JavaScript dialog is open: a dialog that opens mid-check
            # cancels the check, and the next one knows about the dialog and reads around it
            done, checks = await self._dialogs.until(expectations.evaluate(self, expect), keep=False)
            if not done:
                checks = await expectations.evaluate(self, expect)
            if all(c.ok for c in checks) or time.monotonic() >= deadline:
                break
            await asyncio.sleep(min(POLL_S, max(deadline - time.monotonic(), 0)))
        # a check's detail quotes the page (a field's value, the URL): scrubbed like feedback
        return secrets.scrub(Verdict(ok=all(c.ok for c in checks), checks=checks,
                                     waited_ms=(time.monotonic() - started) * 1000))

    async def close(self) -> None:
        """Close this episode's context (the browser stays for other episodes)."""
        await self._close_context()

    # ================================================================== for tools

    @property
    def page(self) -> "Page":
        """The active tab."""
        if self._active is None:
            raise ActionError("no tab is open; open one with new_tab(url)", kind="action.no_tab")
        return self._active

    @property
    def viewport(self) -> tuple[int, int]:
        return self.settings.viewport_width, self.settings.viewport_height

    def to_pixels(self, point_2d: Sequence[float]) -> tuple[float, float]:
        """A ``point_2d`` on the 0-1000 grid as viewport pixels."""
        return grid_to_pixels(point_2d, *self.viewport)

    def locate(self, target: Target) -> Located:
        """Resolve a target to a viewport point or to a locator on the active tab."""
        if target.point_2d is not None:
            return Located(target.describe(), point=self.to_pixels(target.point_2d))
        return Located(target.describe(), locator=self.element(ref=target.ref, selector=target.selector))

    def element(self, ref: Optional[str] = None, selector: Optional[str] = None) -> "Locator":
        """A locator for a snapshot ref (``e12``, ``f1e6``) or a selector.

        A selector may step into iframes with ``>>>``: ``iframe#pay >>> role=button[name="Pay"]``.
        """
        page = self.page
        if ref is not None:
            ref = ref.strip().removeprefix("ref=").strip("[]")
            snap = self._snapshot
            if snap is not None and snap.page is page and f"[ref={ref}]" not in snap.text:
                again = self._by_role_and_name(ref)
                if again is not None:
                    return again
                raise ActionError(
                    f"ref {ref} is not in the latest page snapshot; use a ref from the current snapshot "
                    "(refs change when the page changes), or a point_2d or selector",
                    kind="action.stale_ref",
                )
            return page.locator(f"aria-ref={ref}")
        if not selector or not selector.strip():
            raise ActionError("give a ref, a selector or a point_2d")
        *frames, inner = [part.strip() for part in selector.split(">>>")]
        scope: Any = page
        for frame in frames:
            scope = scope.frame_locator(frame)
        return scope.locator(inner)

    def _by_role_and_name(self, ref: str) -> Optional["Locator"]:
        """A stale ref found again, once: by the role and name it had in the snapshot the
        policy saw, on the current page. None when it cannot be named that way."""
        observed = getattr(self, "_observed", None)
        if observed is None or observed.page is not self.page:
            return None
        for line in observed.text.splitlines():
            if f"[ref={ref}]" in line:
                m = _ROLE_NAME.match(line)
                if m is None or not m.group(2):
                    return None
                name = m.group(2).replace('\\"', '"')
                return self.page.get_by_role(m.group(1), name=name, exact=True)  # type: ignore[arg-type]
        return None

    async def point_of(self, located: Located) -> tuple[float, float]:
        """The viewport point of a target (the middle of an element, scrolled into view)."""
        if located.point is not None:
            return located.point
        assert located.locator is not None
        await located.locator.scroll_into_view_if_needed()
        box = await located.locator.bounding_box()
        if box is None:
            raise ActionError(f"{located.description} is not visible on the page", kind="action.not_visible")
        return box_center(box)

    async def open_tab(self, url: Optional[str] = None) -> "Page":
        if self.context is None:
            raise ActionError("no browser session is open")
        reason = self.domains.refusal(url) if url else None
        if reason is not None:
            raise ActionError(f"cannot open {url}: {reason}", kind="policy.blocked_domain")
        page = await self.context.new_page()
        self._on_page(page)
        if url:
            await page.goto(url, wait_until="load")
        return page

    async def switch_tab(self, index: int) -> "Page":
        if not 0 <= index < len(self.pages):
            raise ActionError(f"there is no tab {index}; open tabs are 0..{len(self.pages) - 1}", kind="action.no_tab")
        page = self.pages[index]
        self._active = page
        await page.bring_to_front()
        return page

    async def close_tab(self, index: Optional[int] = None) -> None:
        page = self.page if index is None else None
        if index is not None:
            if not 0 <= index < len(self.pages):
                raise ActionError(f"there is no tab {index}; open tabs are 0..{len(self.pages) - 1}",
                                  kind="action.no_tab")
            page = self.pages[index]
        if len(self.pages) <= 1:
            raise ActionError("this is the only tab; it cannot be closed (use goto_url to leave the page)")
        assert page is not None
        await page.close()
        self._on_close(page)

    @property
    def dialog(self) -> Optional["Dialog"]:
        """The dialog held open now, if any."""
        return self._dialogs.current

    async def answer_dialog(self, accept: bool, prompt_text: Optional[str] = None) -> str:
        """Accept or dismiss the open dialog, or decide for the next one; returns what was done."""
        verb = "accepted" if accept else "dismissed"
        try:
            dialog, error = await self._dialogs.answer(accept, prompt_text, self.settings.action_timeout)
        except Exception as err:  # the dialog went away with its page
            if not _is_playwright_error(err):
                raise
            self._raise_if_dead(err)
            return "the dialog had already closed"
        if error is not None and _is_playwright_error(error):
            self._raise_if_dead(error)  # other errors of the stalled action are moot: it did act
        if dialog is None:
            return f"no dialog is open; the next dialog that opens will be {verb}"
        note = f'{verb} the {dialog.type} dialog "{short(dialog.message, 80)}"'
        if prompt_text is not None and dialog.type != "prompt":
            note += " (the text was not used: only a prompt dialog takes text)"
        return note

    # ================================================================== events

    def _on_page(self, page: "Page") -> None:
        if page in self.pages or self._closing:
            return
        self.pages.append(page)
        self._tabs_opened += 1
        self._active = page
        self._events.append(("tab_opened", page))
        page.on("close", self._on_close)
        page.on("crash", lambda p=page: self._crashed.add(id(p)))
        page.on("download", self._on_download)
        page.on("framenavigated", self._on_navigated)
        if self.domains.routes and id(page) not in self._watches:
            watch = asyncio.ensure_future(self._watch(page))
            self._watches[id(page)] = watch
            self._background.add(watch)
            watch.add_done_callback(_forget(self._background))

    async def _guard(self, route: Any) -> None:
        """Refuse every request of the context (any tab, frame or type) outside the domain policy.

        Only first requests come here: the hops of a redirect are the host's (guard_hops)."""
        request = route.request
        reason = self.domains.refusal(request.url)
        try:
            if reason is None:
                await route.continue_()
                return
            if request.is_navigation_request():
                page, main = _tab_of(request)
                self._events.append(("blocked", _Blocked(request.url, reason, page=page if main else None,
                                                         frame_id=None if main else "")))
                if main and page not in self.pages:
                    # a tab that has shown nothing yet (a popup's opening navigation): an error
                    # page, so that the tab is announced, then closed; a 204 would leave it hidden
                    await route.abort("blockedbyclient")
                    return
            # 204 No Content: a navigation stays on the page it was on (an abort would put an
            # error page in its place); a fetch, an image, a beacon get an empty answer
            await route.fulfill(status=204, body="")
        except Exception:  # noqa: BLE001 - the page or context closed meanwhile
            pass

    def refuse_hop(self, url: str, frame_id: str, resource_type: str, tab: bool = False) -> Optional[str]:
        """How a redirect hop of this episode to ``url`` is refused, asked by the host's hop guard
        before the hop is sent (``tab``: it navigates a tab, not an iframe): None (it is not),
        ``"empty"`` (a 204: the page stays as it was) or ``"fail"`` (an error page, for a tab that
        has shown nothing yet, so that it is announced and closed). A refused navigation is reported."""
        reason = self.domains.refusal(url)
        if reason is None:
            return None
        if resource_type != "Document":
            return "empty"
        self._events.append(("blocked", _Blocked(url, reason, frame_id=frame_id if tab else "", hop=True)))
        return "fail" if tab and frame_id not in self._targets.values() else "empty"

    def _refuses_socket(self, url: str) -> bool:
        return self.domains.refusal(url) is not None

    async def _refuse_socket(self, socket: Any) -> None:
        # never connected to the server: the page's socket is closed at once
        try:
            await socket.close(code=1008, reason="refused by the domain policy")
        except Exception:  # noqa: BLE001 - a code this Playwright will not send: close plainly
            try:
                await socket.close()
            except Exception:  # noqa: BLE001 - the page went away meanwhile
                pass

    async def _watch(self, page: "Page") -> None:
        """Follow one tab on a CDP session of our own (under a policy that checks hosts).

        It tells the host which context the tab's in-process frames belong to (so that their
        redirect hops are checked), and it catches a document replaced by a ``javascript:``
        address: such an address never reaches the network, and a page cannot be kept from
        assigning one to ``location``, but the browser announces the scheduled navigation and
        then the document it made; that document is left for about:blank and the refusal
        reported. A ``javascript:`` address that evaluates to nothing (``javascript:void(0)``
        links) replaces nothing and is left alone."""
        context = self.context
        if context is None or page.is_closed():
            return
        try:
            session = await context.new_cdp_session(page)
            info = (await session.send("Target.getTargetInfo"))["targetInfo"]
        except Exception:  # noqa: BLE001 - the tab closed meanwhile, or no CDP (not Chromium)
            return
        context_id = info.get("browserContextId")
        self._targets[id(page)] = info.get("targetId", "")
        host = self.host

        def navigating(frame_id: str) -> None:
            self._scripts.pop(frame_id, None)

        session.on("Page.frameAttached", lambda e: host.note_frame(e.get("frameId", ""), context_id))
        session.on("Page.frameScheduledNavigation", self._on_scheduled)
        session.on("Page.frameStartedNavigating", lambda e: navigating(e.get("frameId", "")))
        session.on("Page.frameStartedLoading", lambda e: navigating(e.get("frameId", "")))
        session.on("Page.frameNavigated", lambda e: navigating(e.get("frame", {}).get("id", "")))
        session.on("Page.lifecycleEvent", lambda e: self._on_lifecycle(session, e))
        try:
            await session.send("Page.enable")
            await session.send("Page.setLifecycleEventsEnabled", {"enabled": True})
            tree = (await session.send("Page.getFrameTree"))["frameTree"]
        except Exception:  # noqa: BLE001 - the tab closed meanwhile
            return
        nodes = [tree]
        while nodes:
            node = nodes.pop()
            host.note_frame(node.get("frame", {}).get("id", ""), context_id)
            nodes.extend(node.get("childFrames", []))

    def _on_scheduled(self, event: dict[str, Any]) -> None:
        url = event.get("url") or ""
        if url[:11].lower() == "javascript:" and not _HARMLESS_SCRIPT.match(url) and self.domains.refusal(url):
            self._scripts[event.get("frameId", "")] = (url, time.monotonic())

    def _on_lifecycle(self, session: Any, event: dict[str, Any]) -> None:
        # a new document in a frame that started no navigation: the javascript: address made it
        if event.get("name") != "init":
            return
        frame_id = event.get("frameId", "")
        scheduled = self._scripts.pop(frame_id, None)
        if scheduled is None or time.monotonic() - scheduled[1] > SCRIPT_URL_FORGET:
            return
        url = scheduled[0]
        self._events.append(("blocked", _Blocked(url, self.domains.refusal(url) or "refused", frame_id=frame_id)))
        leave = asyncio.ensure_future(session.send("Page.navigate", {"url": "about:blank", "frameId": frame_id}))
        self._leaving.add(leave)
        self._background.add(leave)
        leave.add_done_callback(_forget(self._background))
        leave.add_done_callback(self._leaving.discard)

    def _on_navigated(self, frame: Any) -> None:
        # data:, blob:, file: and the like never reach the network, so routing cannot see them:
        # catch them here, report them and leave the page. (A browser error page shows nothing
        # from anywhere: it stays, to say what failed.)
        reason = self.domains.refusal(frame.url) if not frame.url.startswith("chrome-error:") else None
        if reason is None:
            return
        main = frame.parent_frame is None
        self._events.append(("blocked", _Blocked(frame.url, reason, page=frame.page if main else None,
                                                 frame_id=None if main else "")))
        target = frame.page if main else None
        if target is not None:
            self._spawn(target.goto("about:blank"))
        else:
            self._spawn(frame.evaluate("() => { window.location.replace('about:blank'); }"))

    def _on_close(self, page: "Page") -> None:
        if page not in self.pages:
            return
        index = self.pages.index(page)
        self.pages.remove(page)
        self._titles.pop(id(page), None)
        self._dialogs.drop_page(page)
        if not self._closing and id(page) not in self._quiet:
            self._events.append(("tab_closed", (index, page.url)))
        if self._active is page:
            self._active = self.pages[min(index, len(self.pages) - 1)] if self.pages else None

    def _on_download(self, download: "Download") -> None:
        name = download.suggested_filename
        if self.run_dir is not None:
            target = self.run_dir / "downloads" / name
            target.parent.mkdir(parents=True, exist_ok=True)
            self._spawn(download.save_as(target))
            self._events.append(("download", f'a download started: "{name}" (saved to downloads/{name})'))
        else:
            self._events.append(("download", f'a download started: "{name}"'))

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(_forget(self._background))

    # ================================================================== change feedback

    async def _before(self) -> _Before:
        page = self._active
        if page is None:
            return _Before(None, "", None)
        url = page.url
        snap = self._snapshot
        if self._dialogs.held:
            # the page has been frozen since the action that opened the dialog: its snapshot stands
            known = snap.text if snap is not None and snap.page is page and snap.url == url else None
            return _Before(page, url, known)
        if snap is not None and snap.page is page and snap.url == url and time.monotonic() - snap.at < FRESH_SNAPSHOT_S:
            return _Before(page, url, snap.text)
        return _Before(page, url, await self._aria(page))

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
        self._snapshot = _Snapshot(page, page.url, results[0], time.monotonic())
        return results[0]

    async def _describe_change(self, before: _Before, tool_feedback: str) -> tuple[str, bool]:
        """The feedback of a successful call, and whether it has anything to tell (False:
        nothing changed and the tool said nothing, the feedback is :data:`NO_CHANGE`)."""
        parts = [tool_feedback]
        await self._await_new_tabs()
        await self._await_script_addresses()
        origin = before.page if before.page in self.pages else None
        after = None
        if origin is not None and before.aria is not None and not self._dialogs.held and _same_document(origin.url, before.url):
            # taken first: it also gives a popup the call opened time to announce itself
            after = await self._aria(origin)
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
        if after is not None and before.aria is not None and _same_document(origin.url, before.url):
            changes = diff(before.aria, after)
            if changes:
                parts.append(changes.describe())
        if self._dialogs.held:
            parts.append(self._dialogs.note())
        if not any(parts):
            return NO_CHANGE, False
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

    async def _settle_action(self) -> None:
        """The wait of ``configure(settle=...)``: network idle (bounded), then a pause."""
        assert self._settle_after is not None
        page = self._active
        idle = float(self._settle_after.get("network_idle_ms", 0))
        if page is not None and idle > 0:
            try:
                await self._dialogs.gather(page.wait_for_load_state("networkidle", timeout=idle))
            except Exception as err:  # still busy (polling, streaming): the pause still comes
                if not _is_playwright_error(err):
                    raise
                self._raise_if_dead(err)
        await asyncio.sleep(float(self._settle_after.get("after_ms", 0)) / 1000)

    def _show_dialog_box(self, dialog: "Dialog") -> None:
        """Show an accepted dialog's message in its page: a box with an OK button, closed
        by OK, Escape or a click beside it (what ``dialogs="accept"`` models were trained with)."""
        page = getattr(dialog, "page", None)
        if page is None or page.is_closed():
            return

        async def show() -> None:
            try:
                await page.evaluate(_DIALOG_BOX, {"kind": dialog.type, "message": dialog.message})
            except Exception:  # noqa: BLE001 - the page navigated away meanwhile: nothing to show
                pass

        self._spawn(show())

    async def _await_new_tabs(self) -> None:
        """Wait (bounded) until every tab the browser created during the call has been announced."""
        deadline = time.monotonic() + self.settings.action_timeout
        while self._tabs_opened < self.host.pages_created(self._context_id) - self._pages_before_call:
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.01)

    async def _await_script_addresses(self) -> None:
        """Give a ``javascript:`` address the call scheduled a moment to show whether it replaced
        the document (then it is being left: wait for that too), so that this call reports it."""
        deadline = time.monotonic() + SCRIPT_URL_WAIT
        while time.monotonic() < deadline and any(
                time.monotonic() - at < SCRIPT_URL_WAIT for _, at in self._scripts.values()):
            await asyncio.sleep(0.01)
        if self._leaving:
            await asyncio.wait(set(self._leaving), timeout=self.settings.navigation_timeout)

    async def _refuse_new_tab(self, page: "Page", origin: Optional["Page"]) -> None:
        """Close a tab the call opened when it ended on a refused address, or when it is still
        blank because its opening navigation (or a redirect of it) was refused."""
        if not self.domains.active or page not in self.pages:
            return
        url = page.url
        shown = not (url in ("", "about:blank") or url.startswith("chrome-error:"))
        reason = self.domains.refusal(url) if shown else None
        if reason is None:
            if shown:
                return
            watch = self._watches.get(id(page))
            if watch is not None and not watch.done():
                await asyncio.wait({watch}, timeout=self.settings.action_timeout)
            target = self._targets.get(id(page))
            refused = [obj for kind, obj in self._events if kind == "blocked" and (
                obj.page is page or (target and obj.frame_id == target))]
            # an opening navigation Playwright could not tie to its tab yet
            refused = refused or [obj for kind, obj in self._events
                                  if kind == "blocked" and obj.page is None and obj.frame_id is None]
            if not refused:
                return
            url, reason = refused[-1].url, refused[-1].reason
        self._quiet.add(id(page))
        try:
            await page.close()
        except Exception as err:
            if not _is_playwright_error(err):
                raise
            self._raise_if_dead(err)
        self._on_close(page)
        target = self._targets.get(id(page))

        def told(kind: str, obj: Any) -> bool:  # said by the line below
            if kind == "tab_opened":
                return obj is page
            return kind == "blocked" and (obj.page is page or bool(target and obj.frame_id == target)
                                          or (obj.page is None and obj.frame_id is None))

        self._events = [(kind, obj) for kind, obj in self._events if not told(kind, obj)]
        self._events.append(("tab_refused", f"a new tab opened for {short(url, 80)} and was closed: "
                                            f"navigation blocked: {reason}"))
        if origin is not None and origin in self.pages:
            self._active = origin

    async def _find_context_id(self, context: "BrowserContext", page: "Page") -> Optional[str]:
        try:
            session = await context.new_cdp_session(page)
            info = await session.send("Target.getTargetInfo")
            await session.detach()
            return info["targetInfo"].get("browserContextId")
        except Exception:  # noqa: BLE001 - not Chromium over CDP: tabs are seen when announced
            return None

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

    # ================================================================== dialogs

    def _dialog_observation(self, page: "Page") -> Observation:
        dialog = self.dialog
        assert dialog is not None
        from .picture import draw_dialog

        shot = draw_dialog(self._last_screenshot, dialog.type, dialog.message, self.viewport, self.settings.screenshot_quality)
        return secrets.scrub(Observation(
            url=page.url,
            title=self._titles.get(id(page), ""),
            tabs=self._tab_list(),
            aria=self._dialogs.aria(),
            screenshot=shot,
            extras={"dialog": {"type": dialog.type, "message": dialog.message, "default_value": dialog.default_value}},
        ))

    # ================================================================== tabs

    async def _title(self, page: "Page") -> str:
        try:
            return await page.title()
        except Exception as err:  # a tab mid-navigation: keep what we knew
            if not _is_playwright_error(err):
                raise
            return self._titles.get(id(page), "")

    def _tab_list(self) -> list[Tab]:
        return [
            Tab(index=i, url=p.url, title=self._titles.get(id(p), ""), active=p is self._active)
            for i, p in enumerate(self.pages)
        ]

    # ================================================================== liveness

    def _check_alive(self) -> None:
        if self.context is None:
            raise InfraError("the browser environment has no open session; call reset(task) first", code="browser_disconnected")
        if self.host.connected and self.host.generation != self._generation:
            raise InfraError(
                "the browser was relaunched since this episode began; reset() starts a new one",
                code="browser_disconnected",
            )
        if not self.host.connected:
            raise InfraError(self._death_message(), code=self.host.failure_code())
        if self._active is not None and id(self._active) in self._crashed:
            raise InfraError("the page's renderer process crashed", code="browser_crash")

    def _death_message(self) -> str:
        code = self.host.failure_code()
        return "the browser process died" if code == "browser_crash" else "the connection to the browser was lost"

    def _raise_if_dead(self, error: BaseException) -> None:
        """Turn an error caused by a dead browser (or renderer) into an InfraError."""
        if not self.host.connected or self.host.generation != self._generation:
            raise InfraError(f"{self._death_message()}: {short(str(error), 200)}", code=self.host.failure_code()) from None
        if is_closed_error(error):
            if not self.host.process_alive() and self.host.pid is not None:
                raise InfraError(f"the browser process died: {short(str(error), 200)}", code="browser_crash") from None
            if "crash" in str(error).lower() or (self._active is not None and id(self._active) in self._crashed):
                raise InfraError(f"the page's renderer crashed: {short(str(error), 200)}", code="browser_crash") from None

    def _infra(self, error: BaseException, what: str) -> InfraError:
        if not self.host.connected:
            return InfraError(f"{what}: {self._death_message()}", code=self.host.failure_code())
        return InfraError(f"{what}: {short(str(error), 200)}", code="browser_error")

    # ================================================================== closing

    async def _close_context(self) -> None:
        context, self.context = self.context, None
        self._closing = self._dialogs.closing = True
        self._dialogs.reset()
        self.host.release_hops(self._context_id)
        if context is not None and self.host.connected and self.host.generation == self._generation:
            if self._background:
                await asyncio.wait(set(self._background), timeout=self.settings.navigation_timeout)
            if self.trace:
                await self._save_trace(context)
            try:
                await asyncio.wait_for(context.close(), timeout=10)
            except Exception:  # noqa: BLE001 - the browser may be going down; the host kills it
                pass
        for task in list(self._background):
            task.cancel()
        self._background.clear()
        self.pages = []
        self._active = None
        self._events = []
        self._titles = {}
        self._crashed = set()
        self._snapshot = None
        self._last_screenshot = None
        self._watches = {}
        self._targets = {}
        self._scripts = {}
        self._leaving = set()
        self._quiet = set()

    async def _save_trace(self, context: "BrowserContext") -> None:
        if self.run_dir is None:
            return
        self._traces += 1
        name = "trace.zip" if self._traces == 1 else f"trace-{self._traces}.zip"
        self.run_dir.mkdir(parents=True, exist_ok=True)
        try:
            await asyncio.wait_for(context.tracing.stop(path=str(self.run_dir / name)), timeout=30)
        except Exception as err:  # noqa: BLE001 - a lost trace must not lose the episode
            self.warnings.append(f"the trace could not be saved: {short(str(err), 120)}")


def _tab_of(request: Any) -> tuple[Optional["Page"], bool]:
    """The tab of a navigation request, and whether it navigates the tab itself (its main frame).
    A popup's opening navigation comes before Playwright knows its frame: (None, True)."""
    try:
        frame = request.frame
    except Exception:  # noqa: BLE001
        return None, True
    return frame.page, frame.parent_frame is None


def _same_document(url: str, other: str) -> bool:
    return urldefrag(url)[0] == urldefrag(other)[0]


def _what(tool: Any, args: Any) -> str:
    name = getattr(tool, "name", type(tool).__name__)
    if isinstance(args, Target):
        return f"{name} on {args.describe()}"
    return name


def _swallow(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()


def _forget(tasks: set[asyncio.Task]):
    def done(task: asyncio.Task) -> None:
        tasks.discard(task)
        _swallow(task)

    return done
