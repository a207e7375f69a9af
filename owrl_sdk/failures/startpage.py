"""Start-page checks: an episode whose start page no policy can work on ends at once.

``episode_start`` (``trylast``, after the plugins that prepare the page: cookies, log-in)
reads the start page once and ends the episode with a ``page.*`` failure (raising
:class:`~owrl_sdk.failures.kinds.SiteFault`) when it is an HTTP error, a document that never
finished loading, a blank page, a captcha or a log-in wall the task was redirected to.
``[plugins.failures] check_start_page = false`` turns this off.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any, Optional, cast
from urllib.parse import urlsplit

from owrl_sdk.config import FailuresOptions as FailuresOptions  # [plugins.failures], with the other settings
from owrl_sdk.contract.env import PageEnvironment
from owrl_sdk.contract.plugins import hookimpl
from owrl_sdk.types import Failure, Task
from owrl_sdk.failures.kinds import SiteFault

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


async def _read(page: Any) -> Optional[dict[str, Any]]:
    try:
        return await asyncio.wait_for(page.evaluate(_READ_PAGE), READ_TIMEOUT_S)
    except Exception:  # noqa: BLE001 - a page that cannot be read is left to the episode
        return None


#: A task's metadata key: its flow logs in again itself when its session is gone (the flow's
#: ``session`` rule), so a start page that redirects to a log-in is its to handle.
RENEWS_SESSION = "renews_session"


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
    renews = bool(task.metadata.get(RENEWS_SESSION))  # a flow that logs in again itself when it sees this
    if (redirected and not renews and _LOGIN_URL.search(urlsplit(url).path + "?" + urlsplit(url).query)
            and not _LOGIN_URL.search(urlsplit(task.start_url).path)
            and (seen.get("password") or _LOGIN_WORDS.search(title + " " + text[:200]))):
        return Failure(category="page", code="login_wall",
                       detail=f"{task.start_url} redirected to a log-in page: {where}")
    if not int(seen.get("length") or 0) and not int(seen.get("drawn") or 0):
        return Failure(category="page", code="blank_page", detail=f"the start page shows nothing: {where}")
    return None


async def check_start_page(env: Any, task: Task) -> Optional[Failure]:
    """Read the start page of a browser environment (:class:`PageEnvironment`) once and say what is wrong with it, if anything.

    http(s) pages only; a page held by a JavaScript dialog is left alone. A blank page is
    read again for up to :data:`BLANK_GRACE_S` seconds before it counts as blank."""
    if not isinstance(env, PageEnvironment) or env.dialog is not None or not env.pages:
        return None
    page = cast(Any, env).page  # the active tab; not in the protocol, whose check reads each member
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


@hookimpl(trylast=True)  # after the plugins that prepare the page (cookies, log-in)
async def episode_start(env: Any, task: Task) -> None:
    settings = getattr(env, "settings", None)
    options = (settings.options("failures", FailuresOptions) if settings is not None and hasattr(settings, "options")
               else FailuresOptions())
    if not options.check_start_page:
        return
    problem = await check_start_page(env, task)
    if problem is not None:
        raise SiteFault(problem)

