"""What kind of failure ended an episode (or failed a call): the default classifier.

Every failure gets a :class:`~owrl_sdk.types.Failure` ``(category, code, detail)``; its
``kind`` is ``category.code``. The category says whose fault it was:

- ``network`` (the site's, or the network's): dns, refused, reset, timeout, tls,
  unreachable, offline, aborted, blocked, failed;
- ``page`` (the site's): http_error, incomplete, blank_page, captcha, login_wall,
  redirect_loop, renderer_crash;
- ``action`` (one call failed; feedback for the model, never an outcome): no_element,
  covered, not_visible, disabled, stale_ref, ambiguous_target, ...;
- ``policy`` (the policy's): unparseable, unknown_tool, bad_arguments, gave_up,
  repeated_without_change, blocked_domain, length_limit;
- ``infra`` (the machinery's): browser_crash, browser_disconnected, out_of_memory,
  episode_timeout, step_timeout, observe_failed, ...;
- ``task`` (the episode ran its course): max_steps, invalid_start_url.

:data:`KINDS` lists them with a line each. Three things here:

- :func:`classify` ``(error, stage) -> Failure``: a pure function from an exception that
  escaped a stage of the episode to its kind. Network errors are read from Chromium's
  ``net::ERR_*`` codes (in Playwright errors and in the browser environment's
  ``InfraError`` messages) and from Python's socket errors. A Python socket error means
  the site only where Python talks to the site itself (stages ``hook`` and ``tool``: a
  site adapter's log-in, an API tool); in ``reset``/``observe``/``verify`` it is the
  environment's link to its browser, and in ``policy`` the link to a model server.
- :func:`is_site_fault`: True for ``network`` and ``page`` failures, which are never
  the policy's: training can leave such episodes out of the policy's reward.
- The default plugin: ``classify_failure`` answers with :func:`classify` (``trylast``,
  so any other plugin's answer wins); ``episode_start`` checks the start page and
  ends the episode with a ``page.*`` failure when it is an HTTP error, a document that
  never finished loading, a blank page, a captcha or a log-in wall the task was
  redirected to (``[plugins.failures] check_start_page = false`` turns this off);
  ``after_tool_call`` labels every failed call with the kind it carries
  (``result.error_kind``, see :func:`classify_call`) in ``result.data["failure"]`` (action
  errors stay feedback for the model, not outcomes).

A plugin (or a site adapter) may end an episode with a kind of its own by raising
:class:`SiteFault` (or any exception whose kind its ``classify_failure`` gives).
"""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
from typing import Any, Optional
from urllib.parse import urlsplit

from .errors import InfraError
from .plugins import hookimpl
from .types import Failure, Task, ToolCall, ToolResult

# ============================================================================ the kinds

KINDS: dict[str, str] = {
    # network: the site could not be reached (site's or network's fault)
    "network.dns": "the host name does not resolve",
    "network.refused": "nothing accepts connections at that address",
    "network.reset": "the connection was reset or closed without an answer",
    "network.timeout": "the site did not answer (or finish loading) in time",
    "network.tls": "the TLS handshake or the site's certificate failed",
    "network.unreachable": "no route to the address",
    "network.offline": "there is no network connection",
    "network.aborted": "the request was aborted (a download, or a refused address such as chrome://)",
    "network.blocked": "the browser blocked the request (the domain policy or a client rule)",
    "network.failed": "the request failed for another network reason",
    # page: the site answered, but with something no policy can work on
    "page.http_error": "the start page answered with an HTTP error status (4xx, 5xx)",
    "page.incomplete": "the start page's document never finished loading (a cut-short or stalled response)",
    "page.blank_page": "the start page shows nothing (no text, no images, no controls)",
    "page.captcha": "the start page is a captcha or a bot check",
    "page.login_wall": "the start page redirected to a log-in page",
    "page.redirect_loop": "the site redirects in a loop",
    "page.renderer_crash": "the page's renderer process crashed (the browser lives on)",
    # action: one call failed; the model reads why and may correct itself (not an outcome)
    "action.no_element": "no element matches the target",
    "action.stale_ref": "the ref is not in the latest snapshot",
    "action.ambiguous_target": "the selector matches several elements",
    "action.invalid_selector": "the selector does not parse",
    "action.covered": "another element covers the target",
    "action.not_visible": "the element is not visible",
    "action.disabled": "the element is disabled",
    "action.not_editable": "the element is not a text field or is read-only",
    "action.unstable": "the element kept moving",
    "action.out_of_view": "the element cannot be scrolled into view",
    "action.detached": "the element left the page while acting",
    "action.navigated_away": "the page navigated away while acting",
    "action.no_option": "no such option, or not a select element",
    "action.dialog_blocked": "a JavaScript dialog blocks the page",
    "action.no_tab": "no such tab",
    "action.no_history": "no earlier page to go back to",
    "action.target_closed": "the tab closed while acting on it",
    "action.invalid_url": "not a valid address",
    "action.timeout": "the action timed out",
    "action.failed": "the call failed for another reason",
    # policy: the policy's own doing
    "policy.unparseable": "too many unreadable answers in a row",
    "policy.unknown_tool": "a call named a tool that does not exist",
    "policy.bad_arguments": "a call's arguments do not validate",
    "policy.blocked_domain": "a call tried to leave the allowed domains",
    "policy.gave_up": "the policy ended the episode without done",
    "policy.repeated_without_change": "the same call, repeated, changed nothing each time",
    "policy.length_limit": "the model's answer was cut at the generation limit (max_new_tokens)",
    # infra: the machinery failed (browser, host, model server), not the task
    "infra.browser_crash": "the browser process died",
    "infra.browser_disconnected": "the connection to the browser was lost",
    "infra.browser_launch_failed": "the browser would not start",
    "infra.browser_connect_failed": "the remote browser (browser_endpoint, cdp_endpoint) could not be reached",
    "infra.no_browser": "no browser is installed",
    "infra.browser_error": "the browser refused to open a context or page",
    "infra.observe_failed": "the page could not be observed",
    "infra.out_of_memory": "the host (or the model's device) ran out of memory",
    "infra.episode_timeout": "the episode ran over its time limit",
    "infra.step_timeout": "a step ran over its time limit",
    "infra.timeout": "an operation of the machinery timed out",
    "infra.policy_unreachable": "the policy's model server could not be reached",
    "infra.endpoint_error": "the model server answered with an error",
    "infra.endpoint_unreachable": "the model server could not be reached",
    "infra.cancelled": "the episode was cancelled",
    "infra.worker_lost": "the worker running the episode died (a Ray actor or its node) and retries ran out",
    # task: the episode ran its course without success
    "task.max_steps": "the step limit was reached",
    "task.invalid_start_url": "the start URL is not a valid address",
}

SITE_CATEGORIES = frozenset({"network", "page"})


def is_site_fault(failure: Optional[Failure]) -> bool:
    """Whether ``failure`` is the site's (network or page), never the policy's."""
    return failure is not None and failure.category in SITE_CATEGORIES


class SiteFault(Exception):
    """Raised (by this plugin or any other) to end an episode with a given failure kind."""

    def __init__(self, failure: Failure):
        super().__init__(f"{failure.kind}: {failure.detail}")
        self.failure = failure


# ============================================================================ network codes

#: Chromium's net::ERR_* codes, as (category, code).
NET_ERRORS: dict[str, tuple[str, str]] = {
    "ERR_NAME_NOT_RESOLVED": ("network", "dns"),
    "ERR_NAME_RESOLUTION_FAILED": ("network", "dns"),
    "ERR_DNS_TIMED_OUT": ("network", "dns"),
    "ERR_ICANN_NAME_COLLISION": ("network", "dns"),
    "ERR_CONNECTION_REFUSED": ("network", "refused"),
    "ERR_CONNECTION_RESET": ("network", "reset"),
    "ERR_CONNECTION_CLOSED": ("network", "reset"),
    "ERR_CONNECTION_ABORTED": ("network", "reset"),
    "ERR_EMPTY_RESPONSE": ("network", "reset"),
    "ERR_CONTENT_LENGTH_MISMATCH": ("network", "reset"),
    "ERR_INCOMPLETE_CHUNKED_ENCODING": ("network", "reset"),
    "ERR_INVALID_HTTP_RESPONSE": ("network", "reset"),
    "ERR_CONNECTION_TIMED_OUT": ("network", "timeout"),
    "ERR_TIMED_OUT": ("network", "timeout"),
    "ERR_ADDRESS_UNREACHABLE": ("network", "unreachable"),
    "ERR_NETWORK_CHANGED": ("network", "unreachable"),
    "ERR_INTERNET_DISCONNECTED": ("network", "offline"),
    "ERR_ABORTED": ("network", "aborted"),
    "ERR_BLOCKED_BY_CLIENT": ("network", "blocked"),
    "ERR_BLOCKED_BY_RESPONSE": ("network", "blocked"),
    "ERR_BLOCKED_BY_ADMINISTRATOR": ("network", "blocked"),
    "ERR_UNSAFE_PORT": ("network", "blocked"),
    "ERR_TOO_MANY_REDIRECTS": ("page", "redirect_loop"),
    "ERR_INVALID_URL": ("task", "invalid_start_url"),
    "ERR_FAILED": ("network", "failed"),
}

_NET_CODE = re.compile(r"\b(?:net::)?(ERR_[A-Z0-9_]+)\b")

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
_SOCKET_WORDS: tuple[tuple[re.Pattern, str], ...] = (
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


def net_failure(text: str) -> Optional[tuple[str, str]]:
    """(category, code) of the first ``net::ERR_*`` code in ``text``, if any."""
    found = _NET_CODE.search(text)
    if not found:
        return None
    name = found.group(1)
    if name in NET_ERRORS:
        return NET_ERRORS[name]
    if name.startswith(("ERR_CERT_", "ERR_SSL_")) or "CERTIFICATE" in name or "_TLS_" in name:
        return ("network", "tls")
    if "PROXY" in name or "TUNNEL" in name:
        return ("network", "unreachable")
    return ("network", "failed")


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

    ``stage`` is one of ``reset``, ``observe``, ``policy``, ``tool``, ``verify``, ``hook``
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
    if code == "browser_crash":
        # the env says "the page's renderer crashed" when only the tab's process died
        if _RENDERER.search(message) and "browser process" not in message:
            return _failure("page", "renderer_crash", stage, message)
        return _failure("infra", "browser_crash", stage, message)
    carried = getattr(error, "kind", None)  # BrowserEnv.reset gives the kind of a start page it could not open
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
        if "not a valid URL" in message or "invalid URL" in message:
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


# ============================================================================ the start page

_CAPTCHA_WORDS = re.compile(
    r"captcha|are you a robot|verify (that )?you are (a )?human|unusual traffic|bot check|"
    r"checking your browser|press (and|&) hold|just a moment\.\.\.", re.I)
_LOGIN_URL = re.compile(r"(^|[/._-])(log-?in|sign-?in|signon|auth|sso|session|accounts?/login)([/._?=-]|$)", re.I)
_LOGIN_WORDS = re.compile(r"\b(log ?in|sign ?in|password)\b", re.I)

#: How long a blank start page is given to draw something (a script that renders late).
BLANK_GRACE_S = 2.0
#: No one read of the start page may take longer than this (a dialog can freeze the page).
READ_TIMEOUT_S = 5.0

_READ_PAGE = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const body = document.body;
  const text = body ? (body.innerText || '').trim() : '';
  const visible = el => el.getClientRects().length > 0;
  const things = body ? body.querySelectorAll(
      'img,svg,canvas,video,iframe,embed,object,input:not([type=hidden]),button,select,textarea') : [];
  let drawn = 0;
  for (const el of things) { if (visible(el)) { drawn++; if (drawn > 2) break; } }
  const password = [...document.querySelectorAll('input[type=password]')].some(visible);
  const widget = !!document.querySelector(
      'iframe[src*="recaptcha"],iframe[src*="hcaptcha"],iframe[src*="challenges.cloudflare.com"],' +
      '.g-recaptcha,.h-captcha,.cf-turnstile,#challenge-form,#cf-challenge-running');
  return {status: nav ? (nav.responseStatus || 0) : 0, ready: document.readyState, url: location.href,
          title: document.title || '', text: text.slice(0, 600), length: text.length, drawn,
          password, widget};
}"""


def _is_browser_env(env: Any) -> bool:
    if env is None:
        return False
    try:
        from .browser.env import BrowserEnv
    except Exception:  # noqa: BLE001 - no browser package: nothing to check
        return False
    return isinstance(env, BrowserEnv)


async def _read(page: Any) -> Optional[dict[str, Any]]:
    try:
        return await asyncio.wait_for(page.evaluate(_READ_PAGE), READ_TIMEOUT_S)
    except Exception:  # noqa: BLE001 - a page that cannot be read is left to the episode
        return None


def _path(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.netloc}{parts.path.rstrip('/')}"


def start_page_problem(seen: dict[str, Any], task: Task) -> Optional[Failure]:
    """The ``page.*`` failure a read of the start page shows, if any (pure; see ``_READ_PAGE``)."""
    url = str(seen.get("url", ""))
    title = str(seen.get("title", ""))
    text = str(seen.get("text", ""))
    status = int(seen.get("status") or 0)
    where = f"{url} ({title})" if title else url
    if status >= 400:
        return Failure(category="page", code="http_error", detail=f"the start page answered HTTP {status}: {where}")
    if seen.get("ready") == "loading":
        return Failure(category="page", code="incomplete",
                       detail=f"the start page's document never finished loading (cut short or stalled): {where}")
    if seen.get("widget") or _CAPTCHA_WORDS.search(title) or (
            int(seen.get("length") or 0) < 600 and _CAPTCHA_WORDS.search(text)):
        return Failure(category="page", code="captcha", detail=f"the start page is a captcha or bot check: {where}")
    redirected = _path(url) != _path(task.start_url)
    if (redirected and _LOGIN_URL.search(urlsplit(url).path + "?" + urlsplit(url).query)
            and not _LOGIN_URL.search(urlsplit(task.start_url).path)
            and (seen.get("password") or _LOGIN_WORDS.search(title + " " + text[:200]))):
        return Failure(category="page", code="login_wall",
                       detail=f"{task.start_url} redirected to a log-in page: {where}")
    if not int(seen.get("length") or 0) and not int(seen.get("drawn") or 0):
        return Failure(category="page", code="blank_page", detail=f"the start page shows nothing: {where}")
    return None


async def check_start_page(env: Any, task: Task) -> Optional[Failure]:
    """Read the start page of a :class:`BrowserEnv` once and say what is wrong with it, if anything.

    http(s) pages only; a page held by a JavaScript dialog is left alone. A blank page is
    read again for up to :data:`BLANK_GRACE_S` seconds before it counts as blank."""
    if not _is_browser_env(env) or env.dialog is not None or not env.pages:
        return None
    page = env.page
    if urlsplit(page.url).scheme not in ("http", "https"):
        return None
    seen = await _read(page)
    if seen is None:
        return None
    problem = start_page_problem(seen, task)
    waited = 0.0
    while problem is not None and problem.code == "blank_page" and waited < BLANK_GRACE_S:
        await asyncio.sleep(0.25)
        waited += 0.25
        if env.dialog is not None:
            return None
        seen = await _read(page)
        if seen is None:
            return None
        problem = start_page_problem(seen, task)
    return problem


# ============================================================================ the plugin


@hookimpl(trylast=True)
def classify_failure(error: BaseException, stage: str) -> Failure:
    return classify(error, stage)


@hookimpl(trylast=True)  # after the plugins that prepare the page (cookies, log-in)
async def episode_start(env: Any, task: Task) -> None:
    settings = getattr(env, "settings", None)
    options = settings.plugin("failures") if settings is not None and hasattr(settings, "plugin") else {}
    if not options.get("check_start_page", True):
        return
    problem = await check_start_page(env, task)
    if problem is not None:
        raise SiteFault(problem)


@hookimpl
def after_tool_call(call: ToolCall, result: ToolResult) -> None:
    if not result.ok and result.error and "failure" not in result.data:
        result.data["failure"] = classify_call(result).model_dump()


__all__ = [
    "KINDS",
    "NET_ERRORS",
    "SiteFault",
    "check_start_page",
    "classify",
    "classify_call",
    "is_site_fault",
    "net_failure",
    "start_page_problem",
]
