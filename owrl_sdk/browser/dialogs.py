"""JavaScript dialogs (alert, confirm, prompt, beforeunload): held open until answered.

While a dialog is open its page runs nothing: no screenshot, snapshot or script, and the
action that opened it does not return. :class:`Dialogs` therefore races every page call
against the arrival of a dialog (:meth:`Dialogs.until`): when one opens first, the call is
left pending and the caller reports the dialog instead. :meth:`Dialogs.answer` accepts or
dismisses it, then lets the pending action finish. An answer given while no dialog is open
is kept as the decision for the next one, which is then answered on arrival.

With ``auto_accept`` (the browser's ``dialogs="accept"``, the mode OpenWebRL's models were
trained in) no dialog is held: each is accepted on arrival (a prompt with its default
text), reported, and ``shown`` is called with it so the page can display what it said.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Optional

from owrl_sdk.browser.feedback import short

if TYPE_CHECKING:  # pragma: no cover
    from playwright.async_api import Dialog, Page


def a_or_an(word: str) -> str:
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


class Dialogs:
    """The dialogs of one browser context. ``spawn`` runs a coroutine in the background;
    ``report`` takes a line for the next feedback."""

    def __init__(self, spawn: Callable[[Awaitable[Any]], None], report: Callable[[str], None],
                 shown: Optional[Callable[["Dialog"], None]] = None):
        self._spawn = spawn
        self._report = report
        self._shown = shown
        self.auto_accept = False
        self.held: list["Dialog"] = []
        self.decision: Optional[tuple[bool, Optional[str]]] = None
        self.closing = False
        self._arrived: Optional[asyncio.Future["Dialog"]] = None
        self._pending: Optional[asyncio.Future[Any]] = None

    @property
    def current(self) -> Optional["Dialog"]:
        return self.held[0] if self.held else None

    # ------------------------------------------------------------------ events

    def on_dialog(self, dialog: "Dialog") -> None:
        """The context's 'dialog' event."""
        if self.closing:
            self._spawn(dialog.accept() if dialog.type == "beforeunload" else dialog.dismiss())
            return
        if self.auto_accept:
            self._spawn(_answer(dialog, True, dialog.default_value if dialog.type == "prompt" else None))
            self._report(f'{a_or_an(dialog.type)} dialog said "{short(dialog.message, 80)}"; it was accepted automatically')
            if self._shown is not None and dialog.type != "beforeunload":
                self._shown(dialog)
            return
        decision, self.decision = self.decision, None
        if decision is not None:
            accept, text = decision
            self._spawn(_answer(dialog, accept, text))
            verb = "accepted" if accept else "dismissed"
            self._report(f'{a_or_an(dialog.type)} dialog said "{short(dialog.message, 80)}"; it was {verb} as decided')
            return
        self.held.append(dialog)
        if self._arrived is not None and not self._arrived.done():
            self._arrived.set_result(dialog)

    def drop_page(self, page: "Page") -> None:
        """A closed page takes its dialogs with it."""
        self.held = [d for d in self.held if d.page is not page]

    def reset(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
        self._pending = None
        self.held = []
        self.decision = None
        self._arrived = None

    # ------------------------------------------------------------------ racing page calls

    def _next(self) -> asyncio.Future["Dialog"]:
        if self._arrived is None or self._arrived.done():
            self._arrived = asyncio.get_running_loop().create_future()
        return self._arrived

    async def until(self, awaitable: Awaitable[Any], keep: bool = True) -> tuple[bool, Any]:
        """Await ``awaitable`` unless a dialog opens first; then (False, None).

        With ``keep`` the stalled call stays pending until the dialog is answered (an action);
        without, it is cancelled (a read that can be taken again later)."""
        action = asyncio.ensure_future(awaitable)
        try:
            await asyncio.wait({action, self._next()}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # the caller was cancelled: so is its call, quietly
            action.cancel()
            action.add_done_callback(_swallow)
            raise
        if action.done():
            return True, action.result()
        if keep:
            action.add_done_callback(_swallow)
            self._pending = action
        else:
            action.cancel()
            action.add_done_callback(_swallow)
        return False, None

    async def gather(self, *awaitables: Awaitable[Any]) -> tuple[bool, list[Any]]:
        """Page reads gathered concurrently; (False, []) when a dialog opens first."""
        done, result = await self.until(asyncio.gather(*awaitables), keep=False)
        return (True, list(result)) if done else (False, [])

    # ------------------------------------------------------------------ answering

    async def answer(self, accept: bool, prompt_text: Optional[str], wait_s: float) -> tuple[Optional["Dialog"], Optional[BaseException]]:
        """Answer the open dialog (or decide for the next one when none is open).

        Returns the dialog answered (None when the answer was kept as a decision) and the
        error the pending action ended with, if any."""
        if not self.held:
            self.decision = (accept, prompt_text)
            return None, None
        dialog = self.held.pop(0)
        await _answer(dialog, accept, prompt_text)
        return dialog, await self._finish_pending(wait_s)

    async def _finish_pending(self, wait_s: float) -> Optional[BaseException]:
        """Let the action that opened the dialog finish (or open the next dialog)."""
        pending, self._pending = self._pending, None
        if pending is None:
            return None
        if not pending.done():
            await asyncio.wait({pending, self._next()}, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
        if not pending.done():
            self._pending = pending
            return None
        return None if pending.cancelled() else pending.exception()

    # ------------------------------------------------------------------ telling

    def note(self) -> str:
        dialog = self.current
        if dialog is None:
            return ""
        if dialog.type == "prompt":
            how = "handle_dialog(accept=true, prompt_text=...)"
        else:
            how = "handle_dialog(accept=true) or handle_dialog(accept=false)"
        return f'{a_or_an(dialog.type)} dialog is open: "{short(dialog.message, 120)}". The page waits for an answer: call {how}'

    def aria(self) -> str:
        dialog = self.current
        assert dialog is not None
        return (
            f'- dialog "{dialog.type}" [modal]: "{dialog.message}"\n'
            "  (the page behind it cannot be read until the dialog is answered with handle_dialog)"
        )


async def _answer(dialog: "Dialog", accept: bool, text: Optional[str]) -> None:
    if not accept:
        await dialog.dismiss()
    elif text is not None and dialog.type == "prompt":
        await dialog.accept(text)
    else:
        await dialog.accept()


def _swallow(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
