"""Liveness: whether the browser (and the active tab's renderer) still lives.

Only a dead browser raises out of :class:`~owrl_sdk.browser.env.BrowserEnv` (an
:class:`~owrl_sdk.errors.InfraError` ``browser_crash`` / ``browser_disconnected``); every
other Playwright error of an action becomes feedback the model reads. The mixin here tells
the two apart; it reads the environment's ``host``, ``context``, ``_generation``,
``_active`` and ``_crashed``. Also the helpers that keep background tasks from outliving
the context or leaving an exception unread.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from owrl_sdk.errors import InfraError
from owrl_sdk.failures.kinds import SiteFault
from owrl_sdk.browser.errors import is_closed_error
from owrl_sdk.browser.feedback import short
from owrl_sdk.browser.state import EnvState


def _is_playwright_error(error: BaseException) -> bool:
    from playwright.async_api import Error as PlaywrightError

    return isinstance(error, PlaywrightError)


class LivenessMixin(EnvState):
    """What :class:`~owrl_sdk.browser.env.BrowserEnv` does to tell a dead browser from an action error."""

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
            raise InfraError("the page's renderer process crashed", code="renderer_crash")
        if self._limit_failure is not None:  # the page downloaded past its limits: the episode ends here
            raise SiteFault(self._limit_failure)

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
                raise InfraError(f"the page's renderer crashed: {short(str(error), 200)}", code="renderer_crash") from None

    def _infra(self, error: BaseException, what: str) -> InfraError:
        if not self.host.connected:
            return InfraError(f"{what}: {self._death_message()}", code=self.host.failure_code())
        return InfraError(f"{what}: {short(str(error), 200)}", code="browser_error")


def _swallow(future: "asyncio.Future[Any]") -> None:
    if not future.cancelled():
        future.exception()


def _forget(tasks: set["asyncio.Future[Any]"]) -> Callable[["asyncio.Future[Any]"], None]:
    """A done-callback that drops a finished background task from ``tasks`` and reads its exception."""

    def done(task: "asyncio.Future[Any]") -> None:
        tasks.discard(task)
        _swallow(task)

    return done
