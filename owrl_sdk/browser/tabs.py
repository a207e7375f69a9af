"""Tabs: the list of open tabs, the active one, and tabs opened, switched and closed.

A tab the page opens is announced (``tab_opened``) and becomes the active one; a call's
feedback waits (bounded) until every tab the browser created during the call has been
announced. Under a domain policy, a new tab that ends on a refused address, or whose
opening navigation was refused, is closed. The mixin keeps the environment's ``pages``,
``_active``, ``_titles`` and ``_tabs_opened``, and reports in its ``_events``.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Optional

from owrl_sdk.types import Tab
from owrl_sdk.browser.errors import ActionError
from owrl_sdk.browser.feedback import short
from owrl_sdk.browser.liveness import _forget, _is_playwright_error
from owrl_sdk.browser.state import EnvState

if TYPE_CHECKING:  # pragma: no cover
    from playwright.async_api import BrowserContext, Page


class TabsMixin(EnvState):
    """The tabs of an episode's context."""

    @property
    def page(self) -> "Page":
        """The active tab."""
        if self._active is None:
            raise ActionError("no tab is open; open one with new_tab(url)", kind="action.no_tab")
        return self._active

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

    def _on_page(self, page: "Page") -> None:
        if page in self.pages or self._closing:
            return
        self.pages.append(page)
        self._tabs_opened += 1
        self._active = page
        self._events.append(("tab_opened", page))
        page.on("close", self._on_close)
        page.on("crash", self._on_crash)
        page.on("download", self._on_download)
        page.on("framenavigated", self._on_navigated)
        if self.domains.routes and id(page) not in self._watches:
            watch = asyncio.ensure_future(self._watch(page))
            self._watches[id(page)] = watch
            self._background.add(watch)
            watch.add_done_callback(_forget(self._background))

    def _on_crash(self, page: "Page") -> None:
        self._crashed.add(id(page))

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

    async def _await_new_tabs(self) -> None:
        """Wait (bounded) until every tab the browser created during the call has been announced."""
        deadline = time.monotonic() + self.settings.action_timeout
        while self._tabs_opened < self.host.pages_created(self._context_id) - self._pages_before_call:
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.01)

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
        return await context_id_of(context, page)


async def context_id_of(context: "BrowserContext", page: "Page") -> Optional[str]:
    """The DevTools id of ``page``'s browser context (what the host's hop guard keys on), or
    None when the browser is not Chromium over CDP."""
    try:
        session = await context.new_cdp_session(page)
        info = await session.send("Target.getTargetInfo")
        await session.detach()
        found: Optional[str] = info["targetInfo"].get("browserContextId")
        return found
    except Exception:  # noqa: BLE001 - not Chromium over CDP: tabs are seen when announced
        return None
