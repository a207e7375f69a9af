"""The failure taxonomy: every kind a failure may have, and Chromium's network codes.

A :class:`~owrl_sdk.types.Failure` is ``(category, code, detail)``; its ``kind`` is
``category.code``, one of :data:`KINDS` (plugins add their own). :data:`NET_ERRORS` and
:func:`net_failure` map Chromium's ``net::ERR_*`` codes to kinds; the browser errors
(:mod:`owrl_sdk.browser.errors`) and the classifier both use them. Pure data and functions:
importing this module imports neither the plugin machinery nor the browser.
"""

from __future__ import annotations

import re
from typing import Optional

from owrl_sdk.types import Failure

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
    "page.http_4xx": "a call landed on a page that answered with a client error (4xx), with error_pages = 4xx",
    "page.download_limit": "the page started more downloads, or larger ones, than the episode may keep "
                           "(max_downloads, max_download_mb)",
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
    "action.not_checkable": "not a checkbox or radio button, or a radio asked to be cleared",
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
    "policy.secret_refused": "a secret was not typed: the field is not on a host it is bound to (secrets_allowed_on)",
    "policy.gave_up": "the policy ended the episode without done",
    "policy.repeated_without_change": "the same call, repeated, changed nothing each time",
    "policy.length_limit": "the model's answer was cut at the generation limit (max_new_tokens)",
    # infra: the machinery failed (browser, host, model server), not the task
    "infra.http_5xx": "a call landed on a page that answered with a server error (5xx): retried by a batch's --retries",
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
    "infra.memory_unreachable": "the memory could not reach the store it keeps its steps in",
    "infra.endpoint_error": "the model server answered with an error",
    "infra.endpoint_unreachable": "the model server could not be reached",
    "infra.cancelled": "the episode was cancelled",
    "infra.worker_lost": "the worker running the episode died (a Ray actor or its node) and retries ran out",
    # task: the episode ran its course without success
    "task.max_steps": "the step limit was reached",
    "task.invalid_start_url": "the start URL is not a valid address",
    "task.bad_inputs": "a batch row's values do not make the flow's inputs (no episode ran)",
    "task.interrupted_after_commit": "a batch row stopped after its point of no return (a call marked commit) "
                                     "and before its end: check the site before running it again",
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
