"""Playwright's errors, phrased for a model that has to correct its next call, and coded.

A tool raises :class:`ActionError` with a message written for the model and the failure
kind it is (``action.covered``, ``network.dns``, ...: the taxonomy of
:mod:`owrl_sdk.failures`); any other Playwright error from an action goes through
:func:`describe`, which gives the same pair. Both become a failed ``ToolResult`` in
:meth:`BrowserEnv.execute` (``error`` the sentence, ``error_kind`` the kind), never an
exception. Nothing downstream reads the sentence to learn the kind.
"""

from __future__ import annotations

import re

from owrl_sdk.failures.kinds import net_failure

CLOSED_MARKERS = (
    "Target page, context or browser has been closed",
    "Target closed",
    "Browser has been closed",
    "browser has disconnected",
    "Connection closed",
    "Target crashed",
    "Page crashed",
)

_NET_HINTS = {
    "ERR_NAME_NOT_RESOLVED": "the host name does not resolve; check the spelling of the address",
    "ERR_CONNECTION_REFUSED": "nothing answers at that address",
    "ERR_CONNECTION_RESET": "the connection was reset",
    "ERR_CONNECTION_TIMED_OUT": "the server did not answer",
    "ERR_INTERNET_DISCONNECTED": "there is no network connection",
    "ERR_CERT_AUTHORITY_INVALID": "the site's certificate is not trusted",
    "ERR_CERT_COMMON_NAME_INVALID": "the site's certificate is for another name",
    "ERR_CERT_DATE_INVALID": "the site's certificate has expired",
    "ERR_ABORTED": "the navigation was aborted (a download, or another navigation replaced it)",
    "ERR_FILE_NOT_FOUND": "there is no such file",
    "ERR_UNSAFE_PORT": "the browser refuses that port",
    "ERR_BLOCKED_BY_CLIENT": "the browser blocked the request",
    "ERR_TOO_MANY_REDIRECTS": "the site redirects in a loop",
}


#: Where a person finds the page snapshot an error message points to.
SNAPSHOT_WHERE = "the run folder's report.html, or `owrl inspect URL`"


#: The kind of a failed call that says nothing more specific.
GENERIC_KIND = "action.failed"


class ActionError(Exception):
    """A tool could not do what it was asked; the message tells the model what to do instead.

    ``kind`` is the failure kind (``category.code`` of :data:`owrl_sdk.failures.KINDS`)
    that travels to ``ToolResult.error_kind``; :data:`GENERIC_KIND` when not given."""

    def __init__(self, message: str, kind: str = GENERIC_KIND):
        super().__init__(message)
        self.kind = kind


def is_closed_error(error: BaseException) -> bool:
    text = str(error)
    return any(marker in text for marker in CLOSED_MARKERS)


def explain(error: BaseException, what: str) -> str:
    """One or two sentences on why ``what`` (e.g. 'click on ref e12') failed."""
    return describe(error, what)[0]


def describe(error: BaseException, what: str) -> tuple[str, str]:
    """Why ``what`` failed, for the model, and the failure kind it is (``action.covered``...)."""
    message = str(getattr(error, "message", None) or error)
    head, _, log = message.partition("Call log:")
    head = re.sub(r"^\w+\.\w+: ", "", head.strip())  # 'Locator.click: '
    head = head.removeprefix("Error: ").strip()
    timeout = re.search(r"Timeout (\d+)ms exceeded", head)
    seconds = f"{int(timeout.group(1)) / 1000:g} s" if timeout else ""

    strict = re.search(r"strict mode violation: .*? resolved to (\d+) elements", head)
    if strict:
        return (
            f"{what} failed: it matches {strict.group(1)} elements. Make the selector specific "
            "(more text, an attribute, :nth-match(...)) or use a ref from the page snapshot"
            f" ({SNAPSHOT_WHERE})."
        ), "action.ambiguous_target"
    if "while parsing" in head or "Unexpected token" in head or "Unknown engine" in head:
        first = head.splitlines()[0]
        return (f"{what} failed: the selector is not valid ({first}). Use CSS, text=..., role=...[name=...] or a ref.",
                "action.invalid_selector")
    net = re.search(r"net::(ERR_[A-Z_]+)", head)
    if net:
        code = net.group(1)
        hint = _NET_HINTS.get(code, "the page could not be loaded")
        return f"{what} failed: {code}: {hint}.", _net_kind(code)
    if "Cannot navigate to invalid URL" in head or "invalid URL" in head:
        return (f"{what} failed: that is not a valid URL; give a full address such as https://example.com/.",
                "action.invalid_url")
    if "is not an <input>" in head or "not an <input>, <textarea>" in head:
        return (f"{what} failed: the element is not a text field. Target the input box itself (or click it, then write).",
                "action.not_editable")
    if "not a <select> element" in head or "Element is not a <select>" in head:
        return (
            f"{what} failed: the element is not a <select>. It may be a custom dropdown: "
            "click it, then click the option."
        ), "action.no_option"
    if "did not find some options" in head:
        return f"{what} failed: no option with that value or label.", "action.no_option"
    if any(marker in head for marker in CLOSED_MARKERS):
        return f"{what} failed: the tab was closed while acting on it.", "action.target_closed"
    if "Execution context was destroyed" in head or "navigation" in head and "destroyed" in head:
        return (f"{what} failed: the page navigated away while acting. Look at the new page and try again.",
                "action.navigated_away")
    if timeout:
        reason, kind = _timeout_reason(log, what, seconds)
        return f"{what} failed: {reason}", kind
    first = head.splitlines()[0] if head else type(error).__name__
    return f"{what} failed: {first}", GENERIC_KIND


def _net_kind(code: str) -> str:
    """The kind of a call that failed with Chromium's ``net::ERR_*`` ``code``."""
    category, name = net_failure(code) or ("network", "failed")
    if (category, name) == ("task", "invalid_start_url"):  # a call's address, not the task's
        return "action.invalid_url"
    return f"{category}.{name}"


def _timeout_reason(log: str, what: str, seconds: str) -> tuple[str, str]:
    lines = [line.strip(" -") for line in log.strip().splitlines() if line.strip()]
    text = "\n".join(lines)
    covering = re.findall(r"(<[^>]{1,120}>[^\n]*?) intercepts pointer events", text)
    if covering:
        return (
            f"another element covers the target ({covering[-1].strip()} intercepts the pointer). "
            "Close or scroll away what covers it (a dialog, banner or menu) first."
        ), "action.covered"
    if "element is not visible" in text:
        return (f"the element is on the page but not visible (waited {seconds}). Open or scroll to what hides it.",
                "action.not_visible")
    if "element is not enabled" in text or "element is disabled" in text:
        return (f"the element is disabled (waited {seconds}). Something else must be done first (fill a required field?).",
                "action.disabled")
    if "element is not editable" in text:
        return f"the element is read-only (waited {seconds}).", "action.not_editable"
    if "element is not stable" in text:
        return f"the element kept moving (waited {seconds}). Wait for the animation to end, then retry.", "action.unstable"
    if "outside of the viewport" in text:
        return "the element lies outside the page's visible area and cannot be scrolled into view.", "action.out_of_view"
    if "not attached to the DOM" in text or "detached" in text:
        return ("the element was removed from the page while acting (the page changed). Use the new snapshot.",
                "action.detached")
    if "navigating to" in text or "waiting for navigation" in text or 'waiting until "load"' in text:
        return f"the page did not finish loading within {seconds}.", "network.timeout"
    if not any("resolved to" in line for line in lines):
        return (f"no element matches it (waited {seconds}). Find its ref or name in the page snapshot ({SNAPSHOT_WHERE}).",
                "action.no_element")
    return f"timed out after {seconds}.", "action.timeout"
