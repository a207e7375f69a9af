"""Addresses as users type them: which are a plugin's own scheme, which get https:// or
file://, and which cannot be an address at all (a one-line :class:`UsageError`).

``owrl run``, ``owrl inspect``, ``owrl record`` and batch rows read their ``--url`` (or a
flow's ``start_url``) through :func:`resolve_url`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional
from urllib.parse import urlsplit

from owrl_sdk.errors import UsageError

if TYPE_CHECKING:
    from owrl_sdk.contract.plugins import Plugins

#: Schemes the browser opens itself, passed on as they are.
_BROWSER_SCHEMES = ("about", "data")


def plugin_scheme(url: str, plugins: Optional[Plugins] = None) -> bool:
    """Whether ``url`` is written in a plugin's own scheme (``NAME:REST``, no ``//``), left for
    the ``resolve_url`` hook. With ``plugins``, exactly when a ``resolve_url`` hook turns it into
    another address; without, when it looks like one: a scheme that is not a browser, web or file
    scheme, not followed by a port (``localhost:8000`` is a host)."""
    m = re.match(r"([A-Za-z][A-Za-z0-9+.-]*):(?!//)(.?)", url)
    if m is None or m.group(1).lower() in _BROWSER_SCHEMES + _HOST_SCHEMES + ("file",):
        return False
    if plugins is not None:
        return plugins.resolve_url(url) != url
    return not m.group(2).isdigit()


def resolve_url(url: str, note: Optional[Callable[[str], None]] = None, given_as: Optional[str] = None,
                plugins: Optional[Plugins] = None) -> str:
    """URLs as users type them: a bare host gets https:// (said through ``note``), a path becomes a
    file:// URL. With ``given_as`` (where the address came from: "--url"), an address that cannot
    be one raises :class:`UsageError` naming it; without, it is passed on as it is. A plugin's
    own scheme (see :func:`plugin_scheme`; ``plugins`` asks their ``resolve_url`` hooks) is passed
    on as it is, for the hook to resolve when the episode starts."""
    if url.startswith(tuple(s + ":" for s in _BROWSER_SCHEMES)) or plugin_scheme(url, plugins):
        return url
    if "://" in url:
        return _checked_url(url, url, given_as) if given_as else url
    p = Path(url)
    if p.exists():
        return p.resolve().as_uri()
    resolved = _checked_url("https://" + url, url, given_as) if given_as else "https://" + url
    if note is not None:
        note(f"note: no scheme given: using {resolved}")
    return resolved


#: Schemes whose addresses name a host (file:// and others need not).
_HOST_SCHEMES = ("http", "https", "ws", "wss", "ftp")


def _checked_url(url: str, given: str, given_as: str) -> str:
    """``url`` if it can be an address; else a one-line UsageError about ``given``."""
    def bad(why: str) -> UsageError:
        return UsageError(f"{given_as} {given!r} is not a valid address: {why}")

    scheme = url.split("://", 1)[0]
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme):
        raise bad(f"{scheme!r} is not a scheme (write it like https://example.com/)")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError as err:
        raise bad(str(err)) from None
    if parts.scheme.lower() in _HOST_SCHEMES:
        host = parts.hostname or ""
        if not host:
            raise bad("it names no host")
        if "[" not in parts.netloc and not re.fullmatch(r"[\w.%-]+", host):
            raise bad(f"{host!r} is not a host name")
    return url
