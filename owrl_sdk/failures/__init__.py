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

:data:`KINDS` lists them with a line each. The package, by responsibility:

- :mod:`.kinds`: the taxonomy (:data:`KINDS`), :func:`is_site_fault` (True for ``network``
  and ``page`` failures, which are never the policy's: training can leave such episodes out
  of the policy's reward), :class:`SiteFault`, and Chromium's ``net::ERR_*`` codes
  (:data:`NET_ERRORS`, :func:`net_failure`);
- :mod:`.classification`: :func:`classify` ``(error, stage) -> Failure`` for an exception
  that escaped a stage of the episode, :func:`classify_call` for a failed call (from the
  kind it carries, ``ToolResult.error_kind``), and the hook implementations
  ``classify_failure`` (``trylast``, so any other plugin's answer wins) and
  ``after_tool_call`` (labels every failed call in ``result.data["failure"]``; action errors
  stay feedback for the model, not outcomes);
- :mod:`.startpage`: the ``episode_start`` hook that checks the start page and ends the
  episode with a ``page.*`` failure when it is an HTTP error, a document that never finished
  loading, a blank page, a captcha or a log-in wall the task was redirected to
  (``[plugins.failures] check_start_page = false`` turns this off).

``owrl_sdk.failures`` is the default plugin: this module holds the three hook
implementations and every name others import.

A plugin (or a site adapter) may end an episode with a kind of its own by raising
:class:`SiteFault` (or any exception whose kind its ``classify_failure`` gives).
"""

from __future__ import annotations

from owrl_sdk.failures.classification import GENERIC_CALL_KIND, after_tool_call, classify, classify_call, classify_failure
from owrl_sdk.failures.kinds import KINDS, NET_ERRORS, SITE_CATEGORIES, SiteFault, is_site_fault, net_failure
from owrl_sdk.failures.startpage import BLANK_GRACE_S, READ_TIMEOUT_S, check_start_page, episode_start, start_page_problem

__all__ = [
    "BLANK_GRACE_S",
    "GENERIC_CALL_KIND",
    "KINDS",
    "NET_ERRORS",
    "READ_TIMEOUT_S",
    "SITE_CATEGORIES",
    "SiteFault",
    "after_tool_call",
    "check_start_page",
    "classify",
    "classify_call",
    "classify_failure",
    "episode_start",
    "is_site_fault",
    "net_failure",
    "start_page_problem",
]
