"""The capture script's own world: where a page's scripts cannot reach the recorder.

A page shares its DOM with every script that runs in it, and with the DOM its globals and
prototypes: a page that defines a setter on ``Object.prototype`` rewrites every object a script
of the same world builds. So the capture script does not run in the page's world. Through the
DevTools protocol, each tab and each out-of-process frame gets:

- ``Page.addScriptToEvaluateOnNewDocument`` with a ``worldName``: the script runs in an
  *isolated world* of every frame's every document (and at once in those already open), before
  the page's own scripts. The world sees the same DOM and the same trusted events, and none of
  the page's objects;
- ``Runtime.addBinding`` with that world's name: the reporting function exists in that world
  only, so no page script can call it; it carries a JSON string built with the world's own
  ``JSON``.

The recorder asks the world questions back (``Runtime.evaluate`` in the world's execution
context: how many elements a selector finds, the frame path, the texts shown), so no answer
comes from an object the page can redefine either.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Callable, Optional

#: The isolated world's name (one per frame; the page cannot name it or enter it).
WORLD = "owrl-recorder"
#: The reporting function, present in that world only.
BINDING = "__owrlRecord"

_log = logging.getLogger("owrl.recorder")


class CaptureSession:
    """One DevTools session (a tab, or an out-of-process frame) running the capture script in
    its isolated world. ``on_report(where, context_id, action)`` receives each report.

    ``page`` is the tab; ``frame`` the Playwright frame the session is rooted at for an
    out-of-process frame (None for a tab)."""

    def __init__(self, session: Any, page: Any, frame: Any, on_report: Callable[["CaptureSession", int, Any], None]):
        self.session = session
        self.page = page
        self.frame = frame
        self._on_report = on_report
        #: the isolated world's execution contexts alive now: context id -> frame id
        self.contexts: dict[int, str] = {}
        self.main_frame_id = ""
        self.closed = False

    @classmethod
    async def attach(cls, context: Any, target: Any, page: Any, frame: Any, script: str,
                     on_report: Callable[["CaptureSession", int, Any], None]) -> "CaptureSession":
        """Open a session on ``target`` (a page, or an out-of-process frame) and install the
        script and its binding there; raises when the target has no session of its own (an
        in-process frame: its tab's session covers it)."""
        session = await context.new_cdp_session(target)
        capture = cls(session, page, frame, on_report)
        session.on("Runtime.executionContextCreated", capture._created)
        session.on("Runtime.executionContextDestroyed", capture._destroyed)
        session.on("Runtime.executionContextsCleared", lambda _e: capture.contexts.clear())
        session.on("Runtime.bindingCalled", capture._called)
        await session.send("Runtime.enable")
        await session.send("Runtime.addBinding", {"name": BINDING, "executionContextName": WORLD})
        await session.send("Page.enable")
        tree = await session.send("Page.getFrameTree")
        capture.main_frame_id = str(tree.get("frameTree", {}).get("frame", {}).get("id", ""))
        await session.send("Page.addScriptToEvaluateOnNewDocument",
                           {"source": script, "worldName": WORLD, "runImmediately": True})
        return capture

    def _created(self, event: dict[str, Any]) -> None:
        ctx = event.get("context") or {}
        if ctx.get("name") == WORLD:
            self.contexts[int(ctx.get("id", 0))] = str((ctx.get("auxData") or {}).get("frameId", ""))

    def _destroyed(self, event: dict[str, Any]) -> None:
        self.contexts.pop(int(event.get("executionContextId", 0)), None)

    def _called(self, event: dict[str, Any]) -> None:
        context_id = int(event.get("executionContextId", 0))
        # a binding called from any other world than ours is not the capture script's
        if event.get("name") != BINDING or context_id not in self.contexts:
            return
        try:
            action = json.loads(str(event.get("payload", "")))
        except ValueError:
            return
        self._on_report(self, context_id, action)

    def main_context(self) -> Optional[int]:
        """The world's context in the session's top frame (its current document), if any."""
        return next((c for c, f in self.contexts.items() if f == self.main_frame_id), None)

    async def ask(self, context_id: Optional[int], expression: str, timeout: float = 2.0) -> Any:
        """``expression``'s value (JSON) in the world of ``context_id``: raises when that document
        is gone (it navigated: its context was destroyed) or does not answer in time."""
        if context_id is None or context_id not in self.contexts:
            raise LookupError("that document is gone")
        answer = await asyncio.wait_for(self.session.send("Runtime.evaluate", {
            "expression": expression, "contextId": context_id, "returnByValue": True, "awaitPromise": False}), timeout)
        if answer.get("exceptionDetails"):
            raise RuntimeError(str(answer["exceptionDetails"].get("text", "the capture script failed")))
        return (answer.get("result") or {}).get("value")

    async def ask_all(self, expression: str) -> None:
        """Run ``expression`` in every live document of this session (errors ignored)."""
        for context_id in list(self.contexts):
            try:
                await self.ask(context_id, expression)
            except Exception:  # noqa: BLE001 - a document going away has nothing left to say
                pass

    async def detach(self) -> None:
        self.closed = True
        try:
            await self.session.detach()
        except Exception:  # noqa: BLE001 - the tab or the browser is already gone
            pass
