"""Callbacks when a job ends: a signed summary POSTed to the URL the job named.

A job (task, flow, batch) may carry ``callback_url``. The server accepts one only when it has a
key to sign with (``OWRL_SERVE_WEBHOOK_KEY``) and an allowlist the URL is inside (its
``allowed_domains``): the server itself makes the request, so a job must not be able to point it
at a host the operator did not allow (an internal service, a metadata address). When the job
ends, the summary (:func:`summary`) is POSTed as JSON with ``X-Owrl-Signature: sha256=HEX``, the
HMAC-SHA256 of the body under the key, and ``X-Owrl-Job``. A connection error, a 429 or a 5xx is
retried after 1, 2 and 4 seconds; a redirect is not followed (it could lead anywhere). The
server sends it through its egress gate (``proxy``, :mod:`owrl_sdk.browser.egress`): the host is
judged by the address it resolves to when the server connects. What happened is logged under
``owrl.serve``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
import time
import urllib.error
import urllib.request
from typing import Any, Optional

from owrl_sdk.safety.domains import DomainPolicy

KEY_ENV = "OWRL_SERVE_WEBHOOK_KEY"
#: Seconds before each retry of a delivery.
BACKOFF = (1.0, 2.0, 4.0)
TIMEOUT = 10.0

_log = logging.getLogger("owrl.serve")


class CallbackRefused(ValueError):
    """A callback URL the server will not call, and why."""


def webhook_key() -> Optional[bytes]:
    key = os.environ.get(KEY_ENV, "")
    return key.encode() if key else None


def check_callback(url: str, allowed: list[str], blocked: list[str]) -> str:
    """``url`` if the server may call it; else :class:`CallbackRefused` saying why."""
    if webhook_key() is None:
        raise CallbackRefused(f"this server sends no callbacks: start it with {KEY_ENV} set (the key that signs them)")
    if not re.match(r"(?i)https?://", url):
        raise CallbackRefused("a callback URL must be http:// or https://")
    if not allowed:
        raise CallbackRefused("this server has no allowed domains: a callback goes only to a host the operator "
                              "allowed (start it with --allow-domain or the allowed_domains setting)")
    reason = DomainPolicy(allowed=allowed, blocked=blocked).refusal(url)
    if reason:
        raise CallbackRefused(f"the callback URL is refused: {reason}")
    return url


def summary(job: Any) -> dict[str, Any]:
    """What a callback carries: the ended job as the API shows it, a batch with its counts only."""
    data: dict[str, Any] = job.model_dump(mode="json")
    batch = data.pop("batch", None)
    if batch:
        data["batch"] = {k: v for k, v in batch.items() if k != "results"}
    return {"event": "job.ended", "job": data}


def sign(body: bytes, key: bytes) -> str:
    return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a 3xx is an answer, not a place to go


def deliver(url: str, payload: dict[str, Any], job_id: str, sleep: Any = time.sleep, proxy: Optional[str] = None) -> bool:
    """POST ``payload`` signed to ``url`` (through the HTTP proxy ``proxy`` when given), retried as
    the module says; whether it was taken (2xx)."""
    key = webhook_key()
    if key is None:
        _log.warning("job %s: no %s, the callback to %s is not sent", job_id, KEY_ENV, url)
        return False
    body = json.dumps(payload, sort_keys=True).encode()
    headers = {"Content-Type": "application/json", "X-Owrl-Signature": sign(body, key), "X-Owrl-Job": job_id,
               "User-Agent": "owrl-serve"}
    handlers: list[Any] = [_NoRedirect]
    if proxy:
        handlers.append(urllib.request.ProxyHandler({"http": proxy, "https": proxy}))
    opener = urllib.request.build_opener(*handlers)
    last = ""
    for wait in (0.0, *BACKOFF):
        if wait:
            sleep(wait)
        try:
            with opener.open(urllib.request.Request(url, data=body, headers=headers, method="POST"), timeout=TIMEOUT) as r:
                if 200 <= r.status < 300:
                    _log.info("job %s: callback to %s taken (%s)", job_id, url, r.status)
                    return True
                last = f"HTTP {r.status}"
        except urllib.error.HTTPError as err:
            last = f"HTTP {err.code}"
            if err.code != 429 and err.code < 500:
                break  # the receiver refused it: trying again would not change that
        except (urllib.error.URLError, OSError) as err:
            last = f"{type(err).__name__}: {getattr(err, 'reason', err)}"
    _log.warning("job %s: the callback to %s was not taken (%s)", job_id, url, last)
    return False
