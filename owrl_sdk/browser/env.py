"""The browser environment: one episode at a time in a fresh context of a shared Chromium.

:class:`BrowserEnv` implements :class:`owrl_sdk.contract.env.Environment`. Besides the protocol it
offers what tools need: the active page, targets resolved to points or locators, tabs,
and the answer to a JavaScript dialog.

A JavaScript dialog is held open and reported (see :mod:`.dialogs`): the observation
shows it drawn over the last screenshot, and page tools are refused until ``handle_dialog``
(or Enter / Escape through ``press_keys``) answers it. :meth:`BrowserEnv.configure` changes
that for a policy whose model was trained otherwise: ``dialogs="accept"`` accepts each
dialog on arrival and shows its message in the page as a box with an OK button, and
``settle`` waits after every action (network idle, bounded, then a fixed pause) before
the change is read and the next screenshot taken. Otherwise, after every action the page
is given until it goes quiet (:mod:`.settle`: the ``settle_quiet_ms`` and ``settle_max_ms``
settings) before its change is read, so that a change the page makes a moment later is
credited to the call that caused it.

Besides its feedback sentence, every successful call's result carries the facts in
``ToolResult.page``: the active tab's ``url`` and index (``active_tab``), ``navigated_to``
when the page the call acted on went elsewhere, and ``tabs_opened`` (indices), and, where
the quiet wait ran, ``settled`` (False: still changing at ``settle_max_ms``) and
``settle_ms`` (how long it waited); and
``ToolResult.changed`` says whether there was anything to tell (False: "no visible change").
A failed call carries its failure kind in ``ToolResult.error_kind`` (see :mod:`.errors`).

The domain policy (:class:`owrl_sdk.safety.domains.DomainPolicy`) is enforced here. When it checks
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
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Optional

from owrl_sdk.safety import secrets
from owrl_sdk.safety.domains import DomainPolicy
from owrl_sdk.errors import InfraError
from owrl_sdk.browser.observation_budget import bound_snapshot
from owrl_sdk.types import Expectation, Failure, Observation, Target, Task, ToolCall, ToolResult, Verdict
from owrl_sdk.browser import expect as expectations
from owrl_sdk.browser.changes import FRESH_SNAPSHOT_S, ChangeFeedbackMixin
from owrl_sdk.browser.dialogs import Dialogs
from owrl_sdk.browser.errors import ActionError, describe
from owrl_sdk.browser.feedback import short
from owrl_sdk.browser.egress import EgressGate
from owrl_sdk.browser.guard import DomainGuardMixin, _Blocked
from owrl_sdk.failures.kinds import SiteFault
from owrl_sdk.browser.liveness import LivenessMixin, _forget, _is_playwright_error
from owrl_sdk.browser.settle import SettleMixin
from owrl_sdk.browser.storage import check_target, load_state, save_state
from owrl_sdk.browser.tabs import TabsMixin
from owrl_sdk.browser.state import Host, _Snapshot
from owrl_sdk.browser.targets import Located, TargetsMixin

if TYPE_CHECKING:  # pragma: no cover
    from playwright.async_api import BrowserContext, Dialog, Download, Page

#: Context options that lower safety defaults; each one set puts a warning in the trajectory.
UNSAFE_CONTEXT_OPTIONS = ("ignore_https_errors", "bypass_csp")
#: The most characters of a page's title an observation keeps (a page chooses its title: a 4 MB
#: one made each step's record 4 MB); longer ones are cut and marked.
TITLE_MAX = 300


def _title_cut(title: str) -> str:
    return title if len(title) <= TITLE_MAX else title[:TITLE_MAX] + f"… [title cut: {len(title):,} characters]"

POLL_S = 0.1

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


#: What ``configure(error_pages=...)`` takes (see there).
ERROR_PAGES = ("5xx", "4xx", "off")
#: The active document's HTTP status (the navigation timing entry; 0 when none) and title.
_READ_STATUS = """() => { const n = performance.getEntriesByType('navigation')[0];
  return [n && n.responseStatus ? n.responseStatus : 0, document.title || '']; }"""


class BrowserEnv(TargetsMixin, TabsMixin, ChangeFeedbackMixin, SettleMixin, DomainGuardMixin, LivenessMixin):
    """An :class:`~owrl_sdk.contract.env.Environment` on Playwright. Made by :meth:`BrowserHost.new_env`.

    It holds one episode's state and runs the protocol (reset, observe, execute, verify,
    close) and the dialogs; each other responsibility is a mixin of its own module, working
    on that state: :mod:`.targets` (refs, selectors, points), :mod:`.tabs`, :mod:`.changes`
    (change feedback), :mod:`.settle` (waiting for the page to go quiet after an action),
    :mod:`.guard` (the domain policy) and :mod:`.liveness`."""

    def __init__(
        self,
        host: Host,
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
        self._gate: Optional[EgressGate] = None  # the current context's egress gate (under a domain policy)
        self._events: list[tuple[str, Any]] = []
        self._dialogs = Dialogs(spawn=self._spawn, report=lambda text: self._events.append(("dialog", text)),
                                shown=self._show_dialog_box)
        self._settle_after: Optional[dict[str, float]] = None
        self._waits: dict[str, dict[str, float]] = {}
        self._downloads, self._download_bytes = 0, 0  # this episode's, against max_downloads / max_download_mb
        self._screenshot_type = "jpeg"
        self._changes = True  # change feedback (configure(changes=...))
        self._acted = False  # a call ran since the episode's start (observe's order, see _look)
        self._tabs_opened = 0
        self._snapshot: Optional[_Snapshot] = None
        self._marks = self._after_look = None
        self._last_screenshot: Optional[bytes] = None
        self._crashed: set[int] = set()
        self._limit_failure: Optional[Failure] = None
        #: documents the tabs' main frames committed (guard.py counts them): a call that changed it navigated
        self._documents = 0
        self._documents_at_call = 0
        #: which error pages a call that navigated to one ends the episode on (configure(error_pages=...))
        self._error_pages = "5xx"
        self.domains = DomainPolicy()
        #: Where secrets come from besides OWRL_SECRET_* (the resolve_secret hook, set by the runner).
        self.secret_lookup: Optional[Any] = None
        self._background: set[asyncio.Future[Any]] = set()
        self._closing = False
        self._traces = 0
        self._context_id: Optional[str] = None
        self._pages_before_call = 0
        # the domain policy's helpers (see _watch): each tab's CDP session task, its target id,
        # javascript: addresses scheduled per frame, refused documents being left, tabs closed quietly
        self._watches: dict[int, asyncio.Future[Any]] = {}
        self._targets: dict[int, str] = {}
        self._scripts: dict[str, tuple[str, float]] = {}
        self._leaving: set[asyncio.Future[Any]] = set()
        self._quiet: set[int] = set()
        self._requests: dict[Any, tuple[Any, float]] = {}
        self._requests_done: dict[int, float] = {}
        self._natives: dict[tuple[int, str], set[str]] = {}

    # ================================================================== protocol

    def configure(self, dialogs: str = "hold", settle: Optional[dict[str, float]] = None,
                  waits: Optional[dict[str, dict[str, float]]] = None, screenshot: str = "jpeg",
                  changes: bool = True, error_pages: str = "5xx") -> None:
        """How this environment treats the episodes that follow.

        ``dialogs``: ``hold`` (report, wait for ``handle_dialog``) or ``accept`` (accept on
        arrival and show the message in the page). ``settle``: after every action, wait up to
        ``network_idle_ms`` for the network to be idle, then ``after_ms`` more, in place of the
        wait for quiet (:mod:`.settle`); None: the wait for quiet. ``waits``: the same per tool
        name, in place of ``settle`` for that tool (with ``settle`` only). ``screenshot``:
        ``jpeg`` (``screenshot_quality``) or ``png`` (lossless, larger). ``changes``: describe
        what each call changed on the page (a snapshot after the call, compared with the one
        before); False: no snapshot is taken for it, a call's feedback is the tool's words,
        navigations, tabs and dialogs, and ``changed`` is None unless one of those happened.
        ``error_pages``: a call whose navigation lands on an HTTP error page ends the episode:
        ``5xx`` (a server error: ``infra.http_5xx``, which a batch's ``--retries`` retry; the
        default), ``4xx`` (client errors too, ``page.http_4xx``) or ``off``. A 4xx is left to the
        episode by default: a form's validation answer (400, 422) is a page whose own words say
        what was wrong, and a step's expectation quotes them."""
        if error_pages not in ERROR_PAGES:
            raise ValueError(f"error_pages must be one of {', '.join(ERROR_PAGES)}, not {error_pages!r}")
        self._error_pages = error_pages
        if dialogs not in ("hold", "accept"):
            raise ValueError(f"dialogs must be 'hold' or 'accept', not {dialogs!r}")
        if screenshot not in ("jpeg", "png"):
            raise ValueError(f"screenshot must be 'jpeg' or 'png', not {screenshot!r}")
        self._dialogs.auto_accept = dialogs == "accept"
        self._settle_after = dict(settle) if settle else None
        self._waits = {name: dict(w) for name, w in (waits or {}).items()}
        self._screenshot_type = screenshot
        self._changes = changes

    async def reset(self, task: Task) -> None:
        """A fresh context and page, on the task's start page."""
        await self._close_context()
        self._downloads, self._download_bytes, self._limit_failure = 0, 0, None
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
        if s.storage_state and "storage_state" not in self._context_options:
            # a saved log-in: checked, its values made secrets, before any page opens (a server
            # job's own, given as a context option, wins over the setting)

            options["storage_state"] = load_state(s.storage_state)
        if self.domains.routes and options.get("service_workers") != "block":
            self.warnings.append("service workers are allowed: their requests are not held to the domain policy")
        await self._open_gate(options)
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
        await self._install_settle(context)
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
        # read before the start page: a CDP session attached while the page shows an alert
        # would wait for the alert (read beside the load, reset stalled on such a page)
        self._context_id = await self._find_context_id(context, page)
        self.host.watch_downloads(self, self._context_id)
        if self.domains.routes:
            if not await self.host.guard_hops(self, self._context_id):
                self.warnings.append("redirect hops are not checked against the domain policy "
                                     "(this browser gives no browser-level CDP session)")
            watch = self._watches.get(id(page))
            if watch is not None:
                await asyncio.wait({watch}, timeout=self.settings.action_timeout)
        self._events.clear()
        self._tabs_opened = 0
        await self._open_start_page(page, task.start_url)
        self._events.clear()
        self._tabs_opened = 0
        self._acted = False

    async def _open_gate(self, options: dict[str, Any]) -> None:
        """Under a domain policy, the context's egress gate (:mod:`.egress`): every connection
        of the context, whoever makes it, goes through a check of the host and of the address
        it resolves to. Not for a browser elsewhere (it cannot reach this loopback) or a proxy
        of the user's own; each of those says so in a warning."""
        if not self.domains.routes:
            return
        if self.host.remote or "proxy" in options:
            why = "the browser runs elsewhere" if self.host.remote else "a proxy of its own is set"
            self.warnings.append(f"no egress gate ({why}): only the requests Playwright routes are held to the "
                                 "domain policy")
            return
        self._gate = EgressGate(self.domains, on_refused=self._gate_refused)
        options["proxy"] = {"server": await self._gate.start(), "bypass": "<-loopback>"}

    def _gate_refused(self, url: str, reason: str) -> None:
        self._events.append(("blocked", _Blocked(url, f"{reason} (the egress gate)", frame_id="")))

    async def _open_start_page(self, page: "Page", url: str) -> None:
        """Load the episode's start page (an InfraError where it cannot be opened)."""
        failure: Optional[str] = None
        try:
            await self._dialogs.until(page.goto(url, wait_until="load"))
        except Exception as err:
            if not _is_playwright_error(err):
                raise
            self._raise_if_dead(err)
            if "Timeout" in str(err) and page.url not in ("", "about:blank"):
                self.warnings.append(f"the start page was still loading after {self.settings.navigation_timeout:g} s")
            else:
                failure, kind = describe(err, f"opening the start page {url}")
        # the start page's own navigation (or a hop of it) refused; a refused iframe does not count
        refused = [obj for kind, obj in self._events if kind == "blocked" and obj.frame_id != ""]
        if refused and (failure is not None or page.url in ("", "about:blank")):
            raise InfraError(f"the start page {url} was refused: {refused[-1]}",
                             code="start_page_unreachable", kind="network.blocked")
        if failure is not None:
            raise InfraError(failure, code="start_page_unreachable", kind=kind)

    async def observe(self) -> Observation:
        self._check_alive()
        page = self._active
        if page is None:
            return Observation(url="", title="", tabs=[], aria="(no tab is open)")
        if self._dialogs.held:
            return self._dialog_observation(page)
        # a page over the observation budget last time is snapshotted with boxes at once
        boxes = self.settings.observation_chars > 0 and getattr(self, "_over_budget", None) == (id(page), page.url)
        for attempt in range(2):
            try:
                look = await self._look(page, boxes)
            except Exception as err:
                if not _is_playwright_error(err):
                    raise
                self._raise_if_dead(err)
                if attempt == 1:
                    raise InfraError(f"could not observe the page: {short(str(err), 200)}", code="observe_failed") from None
                await self._settle(page)
                continue
            if look is None:
                return self._dialog_observation(page)
            break
        assert look is not None  # a second failure raised
        shot, boxed, names = look
        open_now = {id(p) for p in self.pages}  # not a tab that closed while it was looked at
        self._titles.update((key, _title_cut(name)) for key, name in names.items() if key in open_now)
        self._last_screenshot = shot
        aria, shown, total = await self._bound_aria(page, boxed, boxes)
        self._snapshot = _Snapshot(page, page.url, aria, time.monotonic())
        self._observed = self._snapshot  # what the policy saw: its refs resolve stale ones again
        # every field scrubbed (the URL and each tab's title and URL too): the policy reads them
        return secrets.scrub(Observation(
            url=page.url,
            title=self._titles.get(id(page), ""),
            tabs=self._tab_list(),
            aria=shown,
            aria_total_chars=total,
            screenshot=shot,
        ))

    async def _look(self, page: "Page", boxes: bool) -> Optional[tuple[bytes, str, dict[int, str]]]:
        """The screenshot, the snapshot and the tabs' titles (by ``id`` of each page); None when
        a dialog opens first.

        Where change feedback is read, the last call's after-snapshot stands for this one when
        it is of this page and URL, less than :data:`FRESH_SNAPSHOT_S` old, and no frame of the
        page changed since the settling report before it (:meth:`_unchanged`, asked beside the
        screenshot, whose caret-hiding moves no mark; the page's title comes with its answer):
        one aria snapshot a step, as without change feedback. Otherwise, after a call, the
        screenshot (with the titles) comes first and the snapshot after it; the episode's first
        look (after its start page loaded) and a look with change feedback but no
        after-snapshot to stand on take all at once, the snapshot's empty fields sorted
        meanwhile for the next call's before-snapshot where change feedback is read. On the
        headless shell each order gave the quicker step or reset in its own case
        (docs/benchmarks-journal.md, "The headless shell")."""
        slow = self.settings.navigation_timeout * 1000  # a heavy page is not an action gone wrong
        stand, self._after_look = self._after_look, None
        pages = list(self.pages)
        if stand is not None and not boxes and stand[0].page is page and stand[0].url == page.url \
                and time.monotonic() - stand[0].at < FRESH_SNAPSHOT_S:
            others = [p for p in pages if p is not page]
            done, results = await self._dialogs.gather(
                self._unchanged(page, stand[1]), page.screenshot(timeout=slow, **self._screenshot_options()),
                *(self._title(p) for p in others))
            if not done:
                return None
            (unchanged, title), shot, *named = results
            names = dict(zip(map(id, others), named))
            if title is None:  # the main frame could not tell: asked as for any tab
                done, results = await self._dialogs.gather(self._title(page))
                if not done:
                    return None
                title = results[0]
            names[id(page)] = title
            if unchanged:
                return shot, stand[0].text, names
        elif self._changes or not self._acted:
            done, results = await self._dialogs.gather(
                page.screenshot(timeout=slow, **self._screenshot_options()),
                self._sorting_fields(page, page.aria_snapshot(mode="ai", boxes=boxes, timeout=slow))
                if self._changes else page.aria_snapshot(mode="ai", boxes=boxes, timeout=slow),
                *(self._title(p) for p in pages))
            if not done:
                return None
            shot, text, *named = results
            return shot, text, dict(zip(map(id, pages), named))
        else:
            done, results = await self._dialogs.gather(page.screenshot(timeout=slow, **self._screenshot_options()),
                                                       *(self._title(p) for p in pages))
            if not done:
                return None
            shot, *named = results
            names = dict(zip(map(id, pages), named))
        snapshot = page.aria_snapshot(mode="ai", boxes=boxes, timeout=slow)
        done, snapped = await self._dialogs.gather(self._sorting_fields(page, snapshot) if self._changes else snapshot)
        return (shot, snapped[0], names) if done else None

    async def _bound_aria(self, page: "Page", text: str, boxed: bool) -> tuple[str, str, Optional[int]]:
        """The whole snapshot (refs and change feedback read it), the one the policy reads
        (cut to the ``observation_chars`` budget, see :mod:`owrl_sdk.browser.observation_budget`) and
        the whole one's length when it was cut. Over budget, a snapshot without element boxes
        is taken again with them, and the page remembered so that its next one has them."""
        budget = self.settings.observation_chars
        if not boxed and (budget <= 0 or len(text) <= budget):
            return text, text, None
        if not boxed:
            try:
                done, results = await self._dialogs.gather(
                    page.aria_snapshot(mode="ai", boxes=True, timeout=self.settings.navigation_timeout * 1000))
                if done:
                    text = results[0]
            except Exception as err:  # without boxes, the text is cut from the top instead
                if not _is_playwright_error(err):
                    raise
                self._raise_if_dead(err)
        size = page.viewport_size
        viewport = (size["width"], size["height"]) if size else self.viewport
        bounded = bound_snapshot(text, budget, viewport)
        self._over_budget = (id(page), page.url) if bounded.cut else None
        return bounded.whole, bounded.text, bounded.total_chars if bounded.cut else None

    async def execute(self, tool: Any, args: Any, call: ToolCall) -> ToolResult:
        """Run ``tool`` and describe what changed; action errors come back as failures."""
        self._check_alive()
        if self._dialogs.held and tool.needs_page and not tool.answers_dialogs:
            return ToolResult.failure(f"the page is blocked by a dialog; answer it first. {self._dialogs.note()}",
                                      kind="action.dialog_blocked")
        # events not yet reported (a download announced after the last feedback) stay in the list
        self._tabs_opened = 0
        self._acted = True
        self._marks = self._after_look = None
        self._pages_before_call = self.host.pages_created(self._context_id)
        documents = self._documents_at_call = self._documents
        before = await self._before()
        began = time.monotonic()
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
            # the model reads owrl's sentence; the browser's own words stay beside it (data.exception),
            # for an interface whose lines quote them (the OpenWebRL environment's)
            done, result = True, ToolResult.failure(*describe(err, _what(tool, args)), data={"exception": str(err)})
        settled = None
        if done and result.ok and not result.ends_episode:
            if self._settle_after:  # the profile's fixed wait instead
                await self._settle_action(getattr(tool, "name", ""))
            else:
                settled = await self._settle_quietly(self._settling_page(before.page), began)
        if done:
            problem = await self._error_page(since=documents)
            if problem is not None:  # the call landed on an error page: no step of the episode was meant for it
                self._events = []
                raise SiteFault(problem)
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
            if settled is not None:
                result.page.update(settled=settled.settled, settle_ms=round(settled.ms, 1))
                if not settled.settled:
                    result.feedback = self._bound_with(result.feedback, settled.note())
        self._events = []
        # every string the policy reads back (feedback, error, the URLs in page, data) without
        # secrets; the answer is the policy's own, recorded (and scrubbed) with the outcome
        scrubbed: ToolResult = secrets.scrub(result)
        scrubbed.answer = result.answer
        return scrubbed

    async def _error_page(self, since: int) -> Optional[Failure]:
        """The failure an HTTP error status of the active tab's document is, by ``error_pages``,
        when a main frame committed a document since the count was ``since`` (else None: the
        page read is made only after a navigation)."""
        page = self._active
        if self._documents == since or self._error_pages == "off" or page is None \
                or not page.url.startswith(("http://", "https://")):
            return None
        try:
            status, title = await asyncio.wait_for(page.evaluate(_READ_STATUS), self.settings.action_timeout)
        except Exception:  # noqa: BLE001 - navigating again or closed: no document to judge
            return None
        status = int(status or 0)
        where = short(f"{page.url} ({title})" if title else page.url, 300)
        if status >= 500:
            return Failure(category="infra", code="http_5xx", detail=f"the page answered HTTP {status}: {where}")
        if status >= 400 and self._error_pages == "4xx":
            return Failure(category="page", code="http_4xx", detail=f"the page answered HTTP {status}: {where}")
        return None

    def _screenshot_options(self) -> dict[str, Any]:
        if self._screenshot_type == "png":
            return {"type": "png"}
        return {"type": "jpeg", "quality": self.settings.screenshot_quality}

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
        ok = all(c.ok for c in checks)
        if not ok:
            problem = await self._error_page(since=self._documents_at_call)  # a navigation that landed late
            if problem is not None:
                raise SiteFault(problem)
        said = [] if ok else await expectations.page_says(self.page)
        # a check's detail quotes the page (a field's value, the URL): scrubbed like feedback
        return secrets.scrub(Verdict(ok=ok, checks=checks, waited_ms=(time.monotonic() - started) * 1000,
                                     page_says=said))

    async def close(self) -> None:
        """Close this episode's context (the browser stays for other episodes)."""
        await self._close_context()

    # ================================================================== dialogs

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

    def _dialog_observation(self, page: "Page") -> Observation:
        dialog = self.dialog
        assert dialog is not None
        from owrl_sdk.browser.picture import draw_dialog

        message = secrets.redact(dialog.message) or ""  # drawn into the picture: no scrub reaches it there
        shot = draw_dialog(self._last_screenshot, dialog.type, message, self.viewport, self.settings.screenshot_quality,
                           fmt=self._screenshot_type)
        return secrets.scrub(Observation(
            url=page.url,
            title=self._titles.get(id(page), ""),
            tabs=self._tab_list(),
            aria=self._dialogs.aria(),
            screenshot=shot,
            extras={"dialog": {"type": dialog.type, "message": dialog.message, "default_value": dialog.default_value}},
        ))

    # ================================================================== downloads and background tasks

    def _on_download(self, download: "Download") -> None:
        # the page chooses the name (a.download = value + ".txt"): the file is saved under it redacted
        name = (secrets.redact(download.suggested_filename) or "download").replace("/", "_")
        if self.run_dir is None:
            self._events.append(("download", f'a download started: "{name}"'))
            return
        self._downloads += 1
        if self._downloads > self.settings.max_downloads:  # a page that downloads in a loop fills no disk
            self._spawn(download.cancel())
            why = (f'a download was refused: "{name}" (this episode saved its limit of '
                   f'{self.settings.max_downloads}, the max_downloads setting)')
            self._events.append(("download", why))
            self._download_limit(why)
            return
        target = self.run_dir / "downloads" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        self._spawn(self._save_download(download, target, name))
        self._events.append(("download", f'a download started: "{name}" (saved to downloads/{name})'))

    def download_room(self) -> int:
        """Bytes this episode's downloads may still take (``max_download_mb``)."""
        return int(self.settings.max_download_mb * 1024 * 1024) - self._download_bytes

    def download_cut(self, received: int) -> None:
        """The host cancelled a download while it streamed: it would pass ``max_download_mb``."""
        why = (f"a download was cut at {received / 1048576:.1f} MB while it streamed: this episode's downloads "
               f"would pass max_download_mb ({self.settings.max_download_mb:g} MB)")
        self.warnings.append(why)
        self._events.append(("download", why))
        self._download_limit(why)

    async def _save_download(self, download: "Download", target: Path, name: str) -> None:
        """Save a download, then keep it only while the episode's downloads stay under
        ``max_download_mb``: one that passes it is deleted, and the next look says so. The host
        cuts one that passes it while it streams (:meth:`download_room`); what is saved is
        checked again here (a browser without a CDP session, two downloads at once)."""
        if await download.failure() is not None:  # cancelled (cut while it streamed) or failed: nothing to keep
            return
        await download.save_as(target)
        size = target.stat().st_size if target.exists() else 0
        limit = self.settings.max_download_mb * 1024 * 1024
        if self._download_bytes + size > limit:
            target.unlink(missing_ok=True)
            why = (f'download "{name}" ({size / 1048576:.1f} MB) was deleted: this episode\'s downloads '
                   f"would pass max_download_mb ({self.settings.max_download_mb:g} MB)")
            self.warnings.append(why)
            self._download_limit(why)
            return
        self._download_bytes += size

    def _download_limit(self, why: str) -> None:
        """End the episode at its next observation or call with ``page.download_limit``: a
        page past its download limits is not one to go on acting on."""
        if self._limit_failure is None:
            self._limit_failure = Failure(category="page", code="download_limit", detail=why)

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(_forget(self._background))

    # ================================================================== closing

    async def _save_storage(self, context: Any) -> None:
        try:
            await save_state(context, check_target(str(self.settings.save_storage), self.settings.runs_dir))
        except Exception as err:  # noqa: BLE001 - the episode is over; losing its session is a warning
            self.warnings.append(f"the storage state was not saved to {self.settings.save_storage}: {err}")

    async def _close_context(self) -> None:
        context, self.context = self.context, None
        self._closing = self._dialogs.closing = True
        self._dialogs.reset()
        self.host.release_hops(self._context_id)
        self.host.release_downloads(self._context_id)
        if context is not None and self.host.connected and self.host.generation == self._generation:
            if self._background:
                await asyncio.wait(set(self._background), timeout=self.settings.navigation_timeout)
            if self.trace:
                await self._save_trace(context)
            if self.settings.save_storage:
                await self._save_storage(context)
            try:
                await asyncio.wait_for(context.close(), timeout=10)
            except Exception:  # noqa: BLE001 - the browser may be going down; the host kills it
                pass
        gate, self._gate = self._gate, None
        if gate is not None:
            await gate.close()
        for task in list(self._background):
            task.cancel()
        self._background.clear()
        self.pages = []
        self._active = None
        self._events = []
        self._titles = {}
        self._crashed = set()
        self._snapshot = None
        self._marks = self._after_look = None
        self._last_screenshot = None
        self._watches = {}
        self._targets = {}
        self._scripts = {}
        self._leaving = set()
        self._quiet = set()
        self._requests = {}
        self._requests_done = {}
        self._natives = {}

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






def _what(tool: Any, args: Any) -> str:
    name = getattr(tool, "name", type(tool).__name__)
    if isinstance(args, Target):
        return f"{name} on {args.describe()}"
    return name


__all__ = ["BrowserEnv", "Located", "UNSAFE_CONTEXT_OPTIONS"]
