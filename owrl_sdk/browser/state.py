"""The state of one episode's :class:`~owrl_sdk.browser.env.BrowserEnv`, declared for its parts.

``BrowserEnv`` is composed of parts, each a mixin in a module of its own (:mod:`.targets`,
:mod:`.tabs`, :mod:`.changes`, :mod:`.settle`, :mod:`.guard`, :mod:`.liveness`). They share the state
``BrowserEnv.__init__`` sets and call a few of each other's methods; :class:`EnvState`
declares both, for readers and type checkers. It holds no values and no code: annotations
only, so it changes nothing at run time.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Optional, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from playwright.async_api import Browser, BrowserContext, Download, Frame, Page, Request

    from owrl_sdk.browser.dialogs import Dialogs
    from owrl_sdk.config import Settings
    from owrl_sdk.safety.domains import DomainPolicy
    from owrl_sdk.types import Failure


class Host(Protocol):
    """What an episode's environment asks of the browser host that made it
    (:class:`~owrl_sdk.browser.host.BrowserHost`): the parts never import the host."""

    settings: "Settings"
    warnings: list[str]
    generation: int

    @property
    def connected(self) -> bool: ...

    @property
    def remote(self) -> bool: ...

    @property
    def pid(self) -> Optional[int]: ...

    def process_alive(self) -> bool: ...

    def failure_code(self) -> str: ...

    async def browser_for_episode(self) -> tuple["Browser", Optional[str]]: ...

    def pages_created(self, context_id: Optional[str]) -> int: ...

    def watch_downloads(self, env: Any, context_id: Optional[str]) -> bool: ...

    def release_downloads(self, context_id: Optional[str]) -> None: ...

    async def guard_hops(self, env: Any, context_id: Optional[str]) -> bool: ...

    def release_hops(self, context_id: Optional[str]) -> None: ...

    def note_frame(self, frame_id: str, context_id: Optional[str]) -> None: ...


@dataclass
class _Snapshot:
    """A page's text snapshot (the change feedback's before and after), and when it was taken."""

    page: "Page"
    url: str
    text: str
    at: float


class EnvState:
    """What the parts of a ``BrowserEnv`` share (set in ``BrowserEnv.__init__``)."""

    host: Host
    settings: "Settings"
    #: The episode's browser context and its tabs; ``_active`` is the tab tools act on.
    context: Optional["BrowserContext"]
    pages: list["Page"]
    _active: Optional["Page"]
    domains: "DomainPolicy"
    #: The host's launch generation this context belongs to (another one: the browser was relaunched).
    _generation: int
    _titles: dict[int, str]
    #: What happened since the last call's feedback, as (kind, object): tab_opened, tab_closed,
    #: blocked, dialog, download, tab_refused.
    _events: list[tuple[str, Any]]
    _dialogs: "Dialogs"
    _settle_after: Optional[dict[str, float]]
    _waits: dict[str, dict[str, float]]
    _tabs_opened: int
    #: Whether each call's change is described (a snapshot after it): ``configure(changes=...)``.
    _changes: bool
    #: Whether a call ran since the episode's start (observe's order).
    _acted: bool
    _snapshot: Optional["_Snapshot"]
    #: The marks each frame of a page gave at the last settling report (:mod:`.settle`), and the
    #: after-snapshot taken since with those marks: the next observation stands on it while no
    #: frame's mark moved (:meth:`SettleMixin._unchanged`).
    _marks: Optional[tuple["Page", list[tuple["Frame", Optional[str]]]]]
    _after_look: Optional[tuple["_Snapshot", list[tuple["Frame", Optional[str]]]]]
    _crashed: set[int]
    #: Set when a page passed the episode's download limits: the episode ends with it.
    _limit_failure: Optional["Failure"]
    _documents: int
    _background: set["asyncio.Future[Any]"]
    _closing: bool
    _context_id: Optional[str]
    _pages_before_call: int
    _watches: dict[int, "asyncio.Future[Any]"]
    _targets: dict[int, str]
    _scripts: dict[str, tuple[str, float]]
    _leaving: set["asyncio.Future[Any]"]
    _quiet: set[int]
    #: The requests in flight (their page, when they began) and when the last one of each page
    #: (by id) ended, for settling (:mod:`.settle`).
    _requests: dict["Request", tuple[Optional["Page"], float]]
    _requests_done: dict[int, float]
    #: Refs of native fields (by page id and URL), whose value a snapshot shows: not read again.
    _natives: dict[tuple[int, str], set[str]]

    if TYPE_CHECKING:  # pragma: no cover - each is defined by one part (or BrowserEnv) and called by others

        @property
        def page(self) -> "Page": ...

        def _raise_if_dead(self, error: BaseException) -> None: ...

        def _spawn(self, coro: Awaitable[Any]) -> None: ...

        def _on_download(self, download: "Download") -> None: ...

        def _on_navigated(self, frame: "Frame") -> None: ...

        async def _watch(self, page: "Page") -> None: ...

        async def _await_new_tabs(self) -> None: ...

        async def _await_script_addresses(self) -> None: ...

        async def _refuse_new_tab(self, page: "Page", origin: Optional["Page"]) -> None: ...
