"""One Chromium per host, many episodes in it: each episode gets a fresh context.

:class:`BrowserHost` owns the Playwright driver and the browser process. It launches
Chromium with :data:`owrl_sdk.browser.chromium.BASE_ARGS`, lets plugins adjust the launch options
(``launch_hook``, normally ``Plugins.browser_launch_options``), and makes
:class:`~owrl_sdk.browser.env.BrowserEnv` objects that share the browser.

No Chromium may outlive its host. ``close()`` closes the browser and the driver, then kills
whatever is left of the browser's process tree; an ``atexit`` handler does the same for a
host that was never closed; and when Python dies outright, Playwright's driver sees its
pipe close and kills the browser it launched.

A remote browser (the ``browser_endpoint`` or ``cdp_endpoint`` setting) is connected to
instead of launched: ``browser_endpoint`` is a Playwright browser server
(``playwright run-server``), which launches a Chromium for each connection with the launch
options this host sends in the ``x-playwright-launch-options`` header; ``cdp_endpoint`` is
a Chromium already running with ``--remote-debugging-port``. Its process is not this
host's: it is never killed, only disconnected from. A lost connection is made again the
way a crashed browser is relaunched (:meth:`ensure_running`), retried for
:data:`RECONNECT_WINDOW` seconds so that a restarting browser pod is waited for; an
endpoint that cannot be reached is an ``InfraError`` ``browser_connect_failed`` naming it.

Redirect hops: Playwright's routing sees only the first request of a redirect chain (it
lets every later hop through on its own), so an episode whose domain policy checks hosts
registers with :meth:`BrowserHost.guard_hops`. While one is registered, a browser-level
CDP session of the host intercepts every request of the browser (``Fetch`` at the request
stage) and holds each redirect hop against the policy of the context it belongs to (known
by its frame: page and iframe targets from target discovery, in-process frames as the
episode reports them); a refused hop is answered with an empty 204 before it is sent.
Other requests, and hops of contexts without a policy, are let through at once.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol

from owrl_sdk.browser.chromium import BASE_ARGS, REMEDY, configured_chromium, find_chromium
from owrl_sdk.config import Settings
from owrl_sdk.errors import ConfigError, InfraError
from owrl_sdk.browser import processes
from owrl_sdk.browser.env import BrowserEnv

if TYPE_CHECKING:  # pragma: no cover
    from playwright.async_api import Browser, Playwright

    from owrl_sdk.browser.env import BrowserEnv

LaunchHook = Callable[[dict[str, Any]], dict[str, Any]]

#: Launch flags that lower the browser's safety; using one puts a warning in every trajectory.
UNSAFE_ARGS = (
    "--disable-web-security",
    "--ignore-certificate-errors",
    "--allow-running-insecure-content",
    "--disable-site-isolation-trials",
    "--allow-file-access-from-files",
)

CLOSE_TIMEOUT = 10.0

#: Seconds one attempt to connect to a remote browser may take.
CONNECT_TIMEOUT = 30.0
#: Seconds a lost remote browser is tried again for before the reconnection fails.
RECONNECT_WINDOW = 15.0

# pid -> start time of every browser a live host launched, for the atexit guard.
_LIVE_BROWSERS: dict[int, Optional[int]] = {}


def _kill_leftover_browsers() -> None:
    for pid, started in list(_LIVE_BROWSERS.items()):
        processes.kill_tree(pid, started)
    _LIVE_BROWSERS.clear()


atexit.register(_kill_leftover_browsers)


class HopGuard(Protocol):
    """What holds a context's redirect hops to a domain policy (a ``BrowserEnv``, the recorder)."""

    def refuse_hop(self, url: str, frame_id: str, resource_type: str, tab: bool = False) -> Optional[str]: ...


class BrowserHost:
    """A launched Chromium shared by episodes. Use ``async with BrowserHost(settings) as host``."""

    def __init__(self, settings: Settings, launch_hook: Optional[LaunchHook] = None):
        self.settings = settings
        self.launch_hook = launch_hook
        #: Notes every episode's trajectory carries (e.g. an unsafe launch flag a plugin added).
        self.warnings: list[str] = []
        #: The launch keyword arguments actually used (after ``launch_hook``).
        self.launch_options: dict[str, Any] = {}
        #: How many times the browser was launched; an env compares it to know its context died.
        self.generation = 0
        self._playwright: Optional["Playwright"] = None
        self._browser: Optional["Browser"] = None
        self._pid: Optional[int] = None
        self._pid_started: Optional[int] = None
        self._closed = False
        self._closing_browser = False
        self._lock: Optional[asyncio.Lock] = None
        self._envs: "weakref.WeakSet[BrowserEnv]" = weakref.WeakSet()
        # page targets created per browser context, seen on a CDP session of our own: they are
        # announced before the action that opened them returns, well before Playwright's 'page' event
        self._pages_created: dict[str, int] = {}
        # the redirect-hop guard (see guard_hops): the browser-level CDP session, the envs whose
        # policy it applies (by browser context id), and which context each frame belongs to
        self._cdp: Any = None
        self._hop_envs: dict[str, "HopGuard"] = {}
        self._target_contexts: dict[str, str] = {}
        self._page_targets: set[str] = set()
        self._frame_contexts: dict[str, str] = {}
        #: downloads held to an episode's room while they stream: context id -> env, guid -> context id
        self._download_envs: dict[str, Any] = {}
        self._download_contexts: dict[str, str] = {}
        self._hop_tasks: set[asyncio.Future[Any]] = set()

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> "BrowserHost":
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def start(self) -> "BrowserHost":
        """Launch the browser (once; a second call does nothing while it runs)."""
        async with self._guard():
            self._closed = False
            if not self.connected:
                await self._launch()
        return self

    async def relaunch(self) -> None:
        """Close what is left of the browser and launch a new one (contexts of the old one are gone)."""
        async with self._guard():
            await self._shutdown_browser()
            await self._launch()

    async def close(self) -> None:
        """Close every env's context, the browser and the driver; kill any leftover process."""
        self._closed = True
        for env in list(self._envs):
            try:
                await asyncio.wait_for(env.close(), CLOSE_TIMEOUT)
            except Exception:  # noqa: BLE001 - the browser goes down below in any case
                pass
        async with self._guard():
            await self._shutdown_browser()
            if self._playwright is not None:
                playwright, self._playwright = self._playwright, None
                try:
                    await asyncio.wait_for(playwright.stop(), CLOSE_TIMEOUT)
                except Exception:  # noqa: BLE001 - a dead driver needs no stopping
                    pass

    async def new_env(
        self,
        run_dir: Optional[Path] = None,
        trace: bool = False,
        unsafe: Optional[dict[str, Any]] = None,
        context_options: Optional[dict[str, Any]] = None,
        deny_local: bool = False,
    ) -> "BrowserEnv":
        """An environment whose episodes run in fresh contexts of this browser.

        ``run_dir`` receives downloads (``run_dir/downloads``) and, with ``trace``, the
        Playwright trace (``run_dir/trace.zip``). ``unsafe`` holds context options that lower
        safety defaults (``ignore_https_errors``, ``bypass_csp``, ...): each one given puts a
        warning in the trajectory. ``context_options`` are other Playwright context options
        (locale, timezone_id, user_agent, ...). ``deny_local`` refuses local files and the
        browser's own pages in every navigation of its episodes (see
        :class:`owrl_sdk.safety.domains.DomainPolicy`); ``owrl serve`` sets it.
        """
        if not self.connected:
            await self.start()
        env = BrowserEnv(self, run_dir=run_dir, trace=trace, unsafe=unsafe, context_options=context_options,
                         deny_local=deny_local)
        self._envs.add(env)
        return env

    # ------------------------------------------------------------------ state

    @property
    def connected(self) -> bool:
        return self._browser is not None and self._browser.is_connected() and not _link_closed(self._browser)

    @property
    def endpoint(self) -> Optional[str]:
        """The remote browser's address (``browser_endpoint`` or ``cdp_endpoint``); None: launched here."""
        if self.settings.browser_endpoint and self.settings.cdp_endpoint:
            raise ConfigError("give browser_endpoint or cdp_endpoint, not both")
        return self.settings.browser_endpoint or self.settings.cdp_endpoint

    @property
    def remote(self) -> bool:
        """Whether the browser is connected to rather than launched (its process is not ours)."""
        return self.endpoint is not None

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def pid(self) -> Optional[int]:
        """The browser's main process id (None before launch or when it is not known)."""
        return self._pid

    def pids(self) -> list[int]:
        """The browser's process and its descendants that are running now."""
        if self._pid is None or not processes.alive(self._pid, self._pid_started):
            return []
        return [self._pid, *processes.descendants(self._pid)]

    def process_alive(self) -> bool:
        return self._pid is not None and processes.alive(self._pid, self._pid_started)

    def failure_code(self) -> str:
        """``browser_crash`` when the browser process is gone, else ``browser_disconnected``."""
        if self._pid is not None and not self.process_alive():
            return "browser_crash"
        return "browser_disconnected" if not self.connected else "browser_crash"

    @property
    def browser(self) -> "Browser":
        if self._browser is None:
            raise InfraError("the browser is not started; call BrowserHost.start() first", code="browser_disconnected")
        return self._browser

    async def ensure_running(self) -> Optional[str]:
        """Relaunch the browser if it died (once, however many callers ask at the same time).

        Returns a note for the trajectory when it was relaunched, else None."""
        if self._closed:
            raise InfraError("the browser host is closed", code="browser_disconnected")
        if self.connected:
            return None
        had_one = self.generation > 0
        async with self._guard():
            if self.connected:  # another caller relaunched it meanwhile
                return None
            await self._shutdown_browser()
            await self._launch()
        return "the browser had crashed or disconnected and was relaunched" if had_one else None

    async def browser_for_episode(self) -> tuple["Browser", Optional[str]]:
        """The browser for a new episode (relaunched if it died), and the note when it was."""
        note = await self.ensure_running()
        return self.browser, note

    # ------------------------------------------------------------------ internals

    def _guard(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    def _choose_executable(self, playwright: "Playwright") -> Optional[str]:
        configured = configured_chromium(self.settings.chromium)
        if not configured:
            # find_chromium's own check uses the sync API, which cannot run inside an event loop
            try:
                managed = playwright.chromium.executable_path
            except Exception:  # noqa: BLE001
                managed = None
            if managed and Path(managed).exists():
                return None
        choice = find_chromium(self.settings.chromium, check_managed=False, headless=self.settings.headless)
        if choice is None:
            where = f" at '{configured}'" if configured else ""
            raise InfraError(f"no Chromium found{where}: {REMEDY}", code="no_browser")
        return choice.path

    def _options(self, playwright: "Playwright") -> dict[str, Any]:
        options: dict[str, Any] = {"headless": self.settings.headless, "args": list(BASE_ARGS)}
        # a browser server launches its own Chromium: only a path on its machine means anything there
        executable = self.settings.remote_chromium if self.remote else self._choose_executable(playwright)
        if executable:
            options["executable_path"] = executable
        if self.launch_hook is not None:
            options = dict(self.launch_hook(dict(options)))
        return options

    async def _launch(self) -> None:
        from playwright.async_api import Error as PlaywrightError
        from playwright.async_api import async_playwright

        if self._playwright is None:
            self._playwright = await async_playwright().start()
        if self.remote:
            await self._connect()
            return
        options = self._options(self._playwright)
        self.launch_options = options
        self.warnings = _unsafe_warnings(options)
        before = set(processes.descendants(os.getpid()))
        try:
            try:
                browser = await self._playwright.chromium.launch(**options)
            except PlaywrightError as err:
                if "closed" not in str(err).lower():
                    raise
                # the driver itself went away (killed with the browser's process group?): start a new one
                self._playwright = await async_playwright().start()
                browser = await self._playwright.chromium.launch(**options)
        except PlaywrightError as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise InfraError(
                f"Chromium failed to start ({first}); {REMEDY}", code="browser_launch_failed"
            ) from None
        self._browser = browser
        self.generation += 1
        self._pid = await self._find_pid(browser, before)
        self._pid_started = processes.start_time(self._pid) if self._pid else None
        if self._pid is not None:
            _LIVE_BROWSERS[self._pid] = self._pid_started
        await self._watch_targets(browser)

    async def _connect(self) -> None:
        """Connect to the remote browser; a reconnection is tried again for :data:`RECONNECT_WINDOW` s."""
        from playwright.async_api import Error as PlaywrightError

        assert self._playwright is not None
        endpoint = self.endpoint
        assert endpoint is not None  # only a remote browser is connected to
        over_cdp = not self.settings.browser_endpoint
        options: dict[str, Any] = {} if over_cdp else self._options(self._playwright)
        self.launch_options = options
        self.warnings = _unsafe_warnings(options)
        deadline = time.monotonic() + (RECONNECT_WINDOW if self.generation else 0.0)
        pause = 0.25
        while True:
            try:
                if over_cdp:
                    browser = await self._playwright.chromium.connect_over_cdp(
                        endpoint, timeout=CONNECT_TIMEOUT * 1000)
                else:
                    header = json.dumps(launch_options_header(options))
                    browser = await self._playwright.chromium.connect(
                        endpoint, timeout=CONNECT_TIMEOUT * 1000, headers={"x-playwright-launch-options": header})
                break
            except PlaywrightError as err:
                if time.monotonic() < deadline:
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, 2.0)
                    continue
                text = str(err).strip()
                first = text.splitlines()[0] if text else type(err).__name__
                how = "over CDP" if over_cdp else "to the browser server"
                raise InfraError(
                    f"could not connect {how} at {endpoint} ({first}); check that it runs and that the address "
                    f"is right", code="browser_connect_failed",
                ) from None
        self._browser = browser
        self.generation += 1
        self._pid = self._pid_started = None  # the remote browser's process is not ours to watch or kill
        await self._watch_targets(browser)

    def pages_created(self, context_id: Optional[str]) -> int:
        """How many pages (tabs, popups) were created so far in the browser context ``context_id``."""
        return self._pages_created.get(context_id or "", 0)

    async def _watch_targets(self, browser: "Browser") -> None:
        self._pages_created = {}
        self._cdp = None
        self._hop_envs = {}
        self._target_contexts = {}
        self._page_targets = set()
        self._frame_contexts = {}
        self._download_envs = {}
        self._download_contexts = {}

        def created(event: dict[str, Any]) -> None:
            info = event.get("targetInfo", {})
            key = info.get("browserContextId") or ""
            if info.get("targetId"):
                self._target_contexts[info["targetId"]] = key
                if info.get("type") == "page":
                    self._page_targets.add(info["targetId"])
            if info.get("type") == "page":
                self._pages_created[key] = self._pages_created.get(key, 0) + 1

        def destroyed(event: dict[str, Any]) -> None:
            self._target_contexts.pop(event.get("targetId", ""), None)
            self._page_targets.discard(event.get("targetId", ""))

        try:
            session = await browser.new_browser_cdp_session()
            session.on("Target.targetCreated", created)
            session.on("Target.targetDestroyed", destroyed)
            session.on("Fetch.requestPaused", self._on_request_paused)
            session.on("Browser.downloadWillBegin", self._on_download_begins)
            session.on("Browser.downloadProgress", self._on_download_progress)
            await session.send("Target.setDiscoverTargets", {"discover": True})
            self._cdp = session
            # the default context's behaviour as it is, with its events on: Playwright's contexts keep
            # their own behaviour, and every download's progress reaches this session too
            await session.send("Browser.setDownloadBehavior", {"behavior": "default", "eventsEnabled": True})
        except Exception:  # noqa: BLE001 - without it, popups are only seen when Playwright reports them
            pass

    # ------------------------------------------------------------------ downloads as they stream

    def watch_downloads(self, env: Any, context_id: Optional[str]) -> bool:
        """Hold the downloads of browser context ``context_id`` to ``env``'s room while they
        stream: one whose received bytes pass ``env.download_room()`` is cancelled at once and
        ``env.download_cut(received)`` hears of it. False when this browser gives no
        browser-level CDP session (the size is then checked only once a download is saved)."""
        if self._cdp is None or not context_id:
            return False
        self._download_envs[context_id] = env
        return True

    def release_downloads(self, context_id: Optional[str]) -> None:
        self._download_envs.pop(context_id or "", None)
        self._download_contexts = {g: c for g, c in self._download_contexts.items() if c != context_id}

    def _on_download_begins(self, event: dict[str, Any]) -> None:
        frame_id = event.get("frameId") or ""
        context_id = self._target_contexts.get(frame_id) or self._frame_contexts.get(frame_id)
        if context_id and event.get("guid"):
            self._download_contexts[str(event["guid"])] = context_id

    def _on_download_progress(self, event: dict[str, Any]) -> None:
        guid = str(event.get("guid") or "")
        context_id = self._download_contexts.get(guid)
        if event.get("state") != "inProgress":
            self._download_contexts.pop(guid, None)
            return
        env = self._download_envs.get(context_id) if context_id else None
        if env is None or self._cdp is None:
            return
        received = int(event.get("receivedBytes") or 0)
        if received > env.download_room():
            self._download_contexts.pop(guid, None)  # cut once
            self._keep(asyncio.ensure_future(self._cdp.send("Browser.cancelDownload",
                                                            {"guid": guid, "browserContextId": context_id})))
            env.download_cut(received)

    # ------------------------------------------------------------------ redirect hops

    async def guard_hops(self, env: "HopGuard", context_id: Optional[str]) -> bool:
        """Hold every redirect hop of the browser context ``context_id`` against ``env``'s
        domain policy (``env.refuse_hop``: None, ``"empty"`` for a 204, ``"fail"`` for a network
        error) until :meth:`release_hops`. False when this browser
        offers no browser-level CDP session (the hops then go unchecked)."""
        session = self._cdp
        if session is None or not context_id:
            return False
        first = not self._hop_envs
        self._hop_envs[context_id] = env
        if first:
            try:
                await session.send("Fetch.enable", {"patterns": [{"urlPattern": "*", "requestStage": "Request"}]})
            except Exception:  # noqa: BLE001 - an old or remote browser that will not intercept
                self._hop_envs.pop(context_id, None)
                return False
        return True

    def release_hops(self, context_id: Optional[str]) -> None:
        """Stop guarding ``context_id`` (its episode ended); the last one turns interception off."""
        if not context_id:
            return
        self._frame_contexts = {f: c for f, c in self._frame_contexts.items() if c != context_id}
        if self._hop_envs.pop(context_id, None) is None:
            return
        if not self._hop_envs and self._cdp is not None and self.connected:
            self._keep(asyncio.ensure_future(self._cdp.send("Fetch.disable")))

    def note_frame(self, frame_id: str, context_id: Optional[str]) -> None:
        """An in-process frame of a guarded context (not a target of its own: an env reports it)."""
        if frame_id and context_id:
            self._frame_contexts[frame_id] = context_id

    def _on_request_paused(self, event: dict[str, Any]) -> None:
        session = self._cdp
        if session is not None:
            self._keep(asyncio.ensure_future(self._answer_paused(session, event)))

    async def _answer_paused(self, session: Any, event: dict[str, Any]) -> None:
        refused: Optional[str] = None
        if event.get("redirectedRequestId"):
            try:
                refused = self._refuse_hop(event)
            except Exception:  # noqa: BLE001 - a fault here must not stall the browser's requests
                refused = None
        try:
            if refused == "fail":
                # a tab that has shown nothing yet: an error page, so that the tab is announced
                # (and closed by its episode); a 204 would leave it hidden and pending
                await session.send("Fetch.failRequest", {"requestId": event["requestId"],
                                                         "errorReason": "BlockedByClient"})
            elif refused:
                # 204 No Content: a navigation stays on the page it was on (an abort would put an
                # error page there); a sub-resource gets an empty answer
                await session.send("Fetch.fulfillRequest", {"requestId": event["requestId"], "responseCode": 204,
                                                            "responseHeaders": []})
            else:
                await session.send("Fetch.continueRequest", {"requestId": event["requestId"]})
        except Exception:  # noqa: BLE001 - the request was cancelled meanwhile, or the browser went away
            pass

    def _refuse_hop(self, event: dict[str, Any]) -> Optional[str]:
        frame_id = event.get("frameId") or ""
        context_id = self._target_contexts.get(frame_id) or self._frame_contexts.get(frame_id)
        env = self._hop_envs.get(context_id) if context_id is not None else None
        if env is None:  # a context without a policy (or a frame no episode reported): let it be
            return None
        return env.refuse_hop(event["request"]["url"], frame_id, event.get("resourceType", ""),
                              tab=frame_id in self._page_targets)

    def _keep(self, task: asyncio.Future[Any]) -> None:
        self._hop_tasks.add(task)

        def done(t: asyncio.Future[Any]) -> None:
            self._hop_tasks.discard(t)
            if not t.cancelled():
                t.exception()

        task.add_done_callback(done)

    async def _find_pid(self, browser: "Browser", before: set[int]) -> Optional[int]:
        try:
            session = await browser.new_browser_cdp_session()
            info = await session.send("SystemInfo.getProcessInfo")
            await session.detach()
            for proc in info.get("processInfo", []):
                if proc.get("type") == "browser":
                    return int(proc["id"])
        except Exception:  # noqa: BLE001 - fall back to the process table
            pass
        tree = processes.children_map()
        new = [p for p in processes.descendants(os.getpid(), tree) if p not in before]
        roots = [p for p in new if not any(p in tree.get(q, []) for q in new)]
        for pid in roots:
            name = processes.command_name(pid)
            if "chrom" in name or "headless" in name:
                return pid
        return None

    async def _shutdown_browser(self) -> None:
        browser, self._browser = self._browser, None
        if browser is not None and browser.is_connected():
            try:
                await asyncio.wait_for(browser.close(), CLOSE_TIMEOUT)
            except Exception:  # noqa: BLE001 - killed below if it will not close
                pass
        if self._pid is not None:
            processes.kill_tree(self._pid, self._pid_started)
            _LIVE_BROWSERS.pop(self._pid, None)
        self._pid = None
        self._pid_started = None


def browser_host(settings: Any, plugins: Any = None) -> BrowserHost:
    """The one way owrl makes a :class:`BrowserHost` for its front doors (runs, executors, Ray
    workers, the server, ``Agent``, ``inspect``): the settings' browser, launched with the
    plugins' ``browser_launch_options`` when ``plugins`` is given."""
    return BrowserHost(settings, launch_hook=plugins.browser_launch_options if plugins is not None else None)


def _link_closed(browser: "Browser") -> bool:
    """Whether the connection under ``browser`` has closed (a remote browser server went away).

    Playwright rejects the calls in flight at once but marks the browser disconnected only on
    the next turn of the event loop, so an action that failed because the link dropped would
    otherwise look like an action error (and the episode like the policy's failure). The
    connection's own state is read where this Playwright has it; elsewhere the browser's
    ``is_connected()`` alone decides."""
    connection = getattr(getattr(browser, "_impl_obj", None), "_connection", None)
    return getattr(connection, "_closed_error", None) is not None


def _unsafe_warnings(options: dict[str, Any]) -> list[str]:
    return [
        f"the browser was launched with {arg}, which lowers its safety"
        for arg in options.get("args", [])
        if str(arg).split("=")[0] in UNSAFE_ARGS
    ]


def launch_options_header(options: dict[str, Any]) -> dict[str, Any]:
    """Launch keyword arguments as a browser server reads them (``executable_path`` -> ``executablePath``)."""

    def camel(name: str) -> str:
        head, *rest = name.split("_")
        return head + "".join(part[:1].upper() + part[1:] for part in rest)

    return {camel(key): value for key, value in options.items() if value is not None}
