"""Classification: the failure kind of an exception that escaped a stage, and of a failed call.

- :func:`classify` ``(error, stage) -> Failure``: a pure function from an exception that
  escaped a stage of the episode to its kind. Network errors are read from Chromium's
  ``net::ERR_*`` codes (in Playwright errors and in the browser environment's
  ``InfraError`` messages; a start page the environment could not open carries its kind)
  and from Python's socket errors. A Python socket error means the site only where Python
  talks to the site itself (stages ``hook`` and ``tool``: a site adapter's log-in, an API
  tool); in ``reset``/``observe``/``verify`` it is the environment's link to its browser,
  and in ``policy`` the link to a model server. What it does not recognise is
  ``infra.<exception name>``.
- :func:`classify_call` ``(result) -> Failure``: a failed call's kind, from the kind it
  carries (``ToolResult.error_kind``), never from its error text.

The hook implementations: ``classify_failure`` answers with :func:`classify` (``trylast``,
so any other plugin's answer wins); ``after_tool_call`` labels every failed call with its
kind in ``result.data["failure"]``.
"""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
from typing import Optional

from owrl_sdk.errors import InfraError
from owrl_sdk.contract.plugins import hookimpl
from owrl_sdk.types import Failure, ToolCall, ToolResult
from owrl_sdk.failures.kinds import _NET_CODE, SITE_CATEGORIES, SiteFault, net_failure

#: Python's own socket failures, in the order they are checked (subclasses first).
_SOCKET_ERRORS: tuple[tuple[type, str], ...] = (
    (socket.gaierror, "dns"),
    (ssl.SSLError, "tls"),
    (ssl.CertificateError, "tls"),
    (ConnectionRefusedError, "refused"),
    (ConnectionResetError, "reset"),
    (ConnectionAbortedError, "reset"),
    (BrokenPipeError, "reset"),
    (TimeoutError, "timeout"),
)

#: Words a socket error's message (or a library's wrapping of one) carries.
_SOCKET_WORDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"name or service not known|nodename nor servname|temporary failure in name resolution|"
                r"getaddrinfo failed|no address associated|name resolution|could not resolve", re.I), "dns"),
    (re.compile(r"certificate|ssl|tls handshake", re.I), "tls"),
    (re.compile(r"connection refused", re.I), "refused"),
    (re.compile(r"connection reset|connection aborted|broken pipe|remote end closed|connection closed", re.I), "reset"),
    (re.compile(r"timed out|timeout", re.I), "timeout"),
    (re.compile(r"network is unreachable|no route to host", re.I), "unreachable"),
)

#: Stages where Python itself talks to the site (a site adapter's hook, an API tool).
SITE_STAGES = frozenset({"hook", "tool"})

_OOM = re.compile(r"out of memory|outofmemory|cannot allocate memory|\bENOMEM\b|\bOOM\b", re.I)
_RENDERER = re.compile(r"renderer|target crashed|page crashed", re.I)
_DISCONNECTED = re.compile(
    r"browser has disconnected|browser has been closed|target page, context or browser has been closed|"
    r"connection closed|target closed|connection to the browser was lost", re.I)
_NAV_TIMEOUT = re.compile(r"did not finish loading|navigating to|waiting until \"load\"|Timeout \d+ms exceeded", re.I)


def _failure(category: str, code: str, stage: str, message: str) -> Failure:
    prefix = f"{stage}: " if stage else ""
    return Failure(category=category, code=code, detail=f"{prefix}{message}"[:1000])  # type: ignore[arg-type]


def _message(error: BaseException) -> str:
    text = str(getattr(error, "message", None) or error).strip()
    return text or type(error).__name__


def _chain(error: BaseException) -> list[BaseException]:
    """The error and what caused it (``raise ... from``, ``urllib``'s ``reason``), at most 8 deep."""
    seen: list[BaseException] = []
    current: Optional[BaseException] = error
    while current is not None and current not in seen and len(seen) < 8:
        seen.append(current)
        reason = getattr(current, "reason", None)
        nxt = current.__cause__ or current.__context__
        current = reason if isinstance(reason, BaseException) else nxt
    return seen


def _socket_code(error: BaseException) -> Optional[str]:
    for kind, code in _SOCKET_ERRORS:
        if isinstance(error, kind):
            return code
    module = type(error).__module__ or ""
    if isinstance(error, OSError) or module.split(".")[0] in ("urllib", "urllib3", "requests", "httpx", "aiohttp", "http"):
        text = _message(error)
        for pattern, code in _SOCKET_WORDS:
            if pattern.search(text):
                return code
    return None


def _is_playwright(error: BaseException) -> bool:
    return (type(error).__module__ or "").startswith("playwright")


def classify(error: BaseException, stage: str = "") -> Failure:
    """The kind of failure ``error`` is, escaping stage ``stage`` of an episode.

    ``stage`` is one of ``reset``, ``observe``, ``policy``, ``memory``, ``tool``, ``verify``, ``hook``
    (or empty when unknown). Always returns a Failure; what it does not recognise is
    ``infra.<exception name>`` (``infra.<code>`` for an InfraError), as the loop would say.
    """
    chain = _chain(error)
    for err in chain:
        if isinstance(err, SiteFault):
            return err.failure
    message = _message(error)

    if any(isinstance(e, MemoryError) or _OOM.search(type(e).__name__) for e in chain) or _OOM.search(message):
        return _failure("infra", "out_of_memory", stage, message)

    if isinstance(error, InfraError):
        return _classify_infra(error, stage, message)

    if _is_playwright(error):
        if _RENDERER.search(message) and "browser" not in message.lower():
            return _failure("page", "renderer_crash", stage, message)
        if _DISCONNECTED.search(message):
            return _failure("infra", "browser_disconnected", stage, message)
        net = net_failure(message)
        if net:
            return _failure(*net, stage, message)
        if type(error).__name__ == "TimeoutError":
            if _NAV_TIMEOUT.search(message) and "navigat" in message.lower():
                return _failure("network", "timeout", stage, message)
            return _failure("infra", "timeout", stage, message)

    for err in chain:
        code = _socket_code(err)
        if code is None:
            continue
        if stage in SITE_STAGES or not stage:
            return _failure("network", code, stage, f"{type(err).__name__}: {_message(err)}")
        if stage == "policy":
            return _failure("infra", "policy_unreachable", stage, f"{type(err).__name__}: {_message(err)}")
        if stage == "memory":  # a memory that keeps its store elsewhere lost it: not the browser
            return _failure("infra", "memory_unreachable", stage, f"{type(err).__name__}: {_message(err)}")
        # reset / observe / verify: the environment's own link to its browser broke
        return _failure("infra", "browser_disconnected", stage, f"{type(err).__name__}: {_message(err)}")

    if isinstance(error, asyncio.TimeoutError):
        return _failure("infra", "step_timeout" if stage == "policy" else "timeout", stage, message)
    if _DISCONNECTED.search(message):
        return _failure("infra", "browser_disconnected", stage, message)
    if _RENDERER.search(message) and "crash" in message.lower():
        return _failure("page", "renderer_crash", stage, message)
    return _failure("infra", type(error).__name__, stage, message)


def _classify_infra(error: InfraError, stage: str, message: str) -> Failure:
    code = error.code
    if code == "renderer_crash":  # only the tab's process died: the browser lives on
        return _failure("page", "renderer_crash", stage, message)
    carried = error.kind  # e.g. BrowserEnv.reset gives the kind of a start page it could not open
    if code == "start_page_unreachable" and isinstance(carried, str) and "." in carried:
        category, _, name = carried.partition(".")
        if carried == "action.invalid_url":
            return _failure("task", "invalid_start_url", stage, message)
        if category in SITE_CATEGORIES:
            return _failure(category, name, stage, message)
        return _failure("network", "timeout" if name == "timeout" else "failed", stage, message)
    if code in ("start_page_unreachable", "navigation_failed") or (code == "infra_error" and _NET_CODE.search(message)):
        net = net_failure(message)
        if net:
            return _failure(*net, stage, message)
        if "invalid URL" in message:  # Playwright's words (owrl's own start pages carry their kind)
            return _failure("task", "invalid_start_url", stage, message)
        if _NAV_TIMEOUT.search(message) or "timed out" in message:
            return _failure("network", "timeout", stage, message)
        return _failure("network", "failed", stage, message)
    return _failure("infra", code, stage, message)


# ============================================================================ failed calls

#: The kind of a failed call that carries none (a plugin's tool or veto that gave no kind).
GENERIC_CALL_KIND = "action.failed"

_CATEGORIES = frozenset({"network", "page", "action", "policy", "infra", "task"})


def classify_call(result: ToolResult) -> Failure:
    """The kind of a failed call, from the kind it carries (``result.error_kind``).

    Whoever failed the call set it: the browser environment (:class:`ActionError`'s kind, or
    the kind :func:`owrl_sdk.browser.errors.describe` gives a Playwright error), the loop
    (``policy.unknown_tool``, ``policy.bad_arguments``), a tool. A call without one, or with
    one outside the categories, is ``action.failed``. The error text is never read for it."""
    kind = result.error_kind or GENERIC_CALL_KIND
    category, _, code = kind.partition(".")
    if category not in _CATEGORIES or not code:
        category, _, code = GENERIC_CALL_KIND.partition(".")
    return Failure(category=category, code=code, detail=(result.error or "").strip()[:300])  # type: ignore[arg-type]


@hookimpl(trylast=True)
def classify_failure(error: BaseException, stage: str) -> Failure:
    return classify(error, stage)


@hookimpl
def after_tool_call(call: ToolCall, result: ToolResult) -> None:
    if not result.ok and result.error and "failure" not in result.data:
        result.data["failure"] = classify_call(result).model_dump()
