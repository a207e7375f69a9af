"""The domain policy in the browser: requests, redirect hops, sockets and scripted addresses.

When the policy checks hosts, every request of the episode's context is routed: one to a
refused address is answered with an empty 204 before it leaves (a popup's opening
navigation with an error page, so that the tab is announced and closed); redirect hops
are held by the host (:meth:`BrowserHost.guard_hops`), which asks :meth:`refuse_hop`;
WebSockets to a refused host are closed before they connect. Each tab is followed on a CDP
session of its own (:meth:`_watch`) to catch a document that a ``javascript:`` address
replaced; navigations that never reach the network (``data:``, ``file:``) are checked when
they commit. Every refusal is reported in the call's feedback.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional

from owrl_sdk.browser.feedback import short
from owrl_sdk.browser.liveness import _forget
from owrl_sdk.browser.state import EnvState

if TYPE_CHECKING:  # pragma: no cover
    from playwright.async_api import Page

#: How long a call's feedback waits for a ``javascript:`` address it scheduled to show whether
#: it replaced the document; one that has not after SCRIPT_URL_FORGET seconds is forgotten.
SCRIPT_URL_WAIT = 0.3
SCRIPT_URL_FORGET = 5.0
#: ``javascript:`` addresses that evaluate to nothing and so can never replace a document.
_HARMLESS_SCRIPT = re.compile(r"^javascript:\s*(void\s*\(\s*0\s*\)|void\s+0|undefined|null|false|)\s*;?\s*$", re.I)


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


def _tab_of(request: Any) -> tuple[Optional["Page"], bool]:
    """The tab of a navigation request, and whether it navigates the tab itself (its main frame).
    A popup's opening navigation comes before Playwright knows its frame: (None, True)."""
    try:
        frame = request.frame
    except Exception:  # noqa: BLE001
        return None, True
    return frame.page, frame.parent_frame is None


async def route_by_policy(route: Any, domains: Any, on_refused: Callable[[Any, str], bool]) -> None:
    """Answer a routed request by the domain policy ``domains``: continued when allowed; else
    ``on_refused(request, reason)`` is told of a refused navigation (True: answer it with an
    error page) and the request gets an empty 204, so a navigation stays on the page it was
    on (an abort would put an error page in its place) and a fetch or an image gets nothing."""
    request = route.request
    reason = domains.refusal(request.url)
    try:
        if reason is None:
            await route.continue_()
            return
        if request.is_navigation_request() and on_refused(request, reason):
            await route.abort("blockedbyclient")
            return
        await route.fulfill(status=204, body="")
    except Exception:  # noqa: BLE001 - the page or context closed meanwhile
        pass


async def close_refused_socket(socket: Any) -> None:
    """A WebSocket to a refused host, closed before it ever connects to the server."""
    try:
        await socket.close(code=1008, reason="refused by the domain policy")
    except Exception:  # noqa: BLE001 - a code this Playwright will not send: close plainly
        try:
            await socket.close()
        except Exception:  # noqa: BLE001 - the page went away meanwhile
            pass


class DomainGuardMixin(EnvState):
    """Holding an episode's context to its domain policy (``self.domains``)."""

    async def _guard(self, route: Any) -> None:
        """Refuse every request of the context (any tab, frame or type) outside the domain policy.

        Only first requests come here: the hops of a redirect are the host's (guard_hops)."""
        await route_by_policy(route, self.domains, self._on_refused)

    def _on_refused(self, request: Any, reason: str) -> bool:
        """Report a refused navigation; True to answer it with an error page instead of a 204."""
        page, main = _tab_of(request)
        self._events.append(("blocked", _Blocked(request.url, reason, page=page if main else None,
                                                 frame_id=None if main else "")))
        # a tab that has shown nothing yet (a popup's opening navigation): an error page, so
        # that the tab is announced, then closed; a 204 would leave it hidden
        return main and page not in self.pages

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
        await close_refused_socket(socket)

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
        if frame.parent_frame is None:
            self._documents += 1  # a call that changes this count navigated (error pages: env.execute)
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

    async def _await_script_addresses(self) -> None:
        """Give a ``javascript:`` address the call scheduled a moment to show whether it replaced
        the document (then it is being left: wait for that too), so that this call reports it."""
        deadline = time.monotonic() + SCRIPT_URL_WAIT
        while time.monotonic() < deadline and any(
                time.monotonic() - at < SCRIPT_URL_WAIT for _, at in self._scripts.values()):
            await asyncio.sleep(0.01)
        if self._leaving:
            await asyncio.wait(set(self._leaving), timeout=self.settings.navigation_timeout)
