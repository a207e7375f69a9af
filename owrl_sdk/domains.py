"""Which addresses an episode may navigate to.

A :class:`DomainPolicy` combines a task's ``allowed_domains``, the ``allowed_domains`` and
``blocked_domains`` settings and ``--allow-domain``. With no allowed domain, every host is
allowed except blocked ones. A host matches a domain when it equals it or ends with
``.domain``; entries and hosts are compared normalised (:func:`normalize_domain`: case,
trailing dot, ``*.``, internationalised names as punycode, IPv4-mapped IPv6 as IPv4), and an
entry with a port, path or scheme is refused where the lists load. Schemes: http, https and about:blank are navigable; ``data:``, ``blob:``,
``javascript:``, ``file:`` and ``filesystem:`` are refused when an allowlist or a blocklist
is set (a ``data:`` page has no host to check, which is how such a policy is usually slipped
past), and ``file:`` is refused unless the start page itself is a file. :attr:`routes` says
whether hosts are checked at all: only then does the browser route the episode's requests.

``deny_local`` (what ``owrl serve`` turns on unless its operator allows local files)
refuses, with or without any list, the schemes that reach the machine the browser runs on
rather than the web: ``file:``, ``view-source:``, ``filesystem:``, the browser's own pages
(``chrome:``, ``chrome-untrusted:``, ``chrome-extension:``, ``chrome-search:``,
``devtools:``) and ``about:`` pages other than about:blank and about:srcdoc. A ``file:``
start page does not lift it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Iterable, Optional
from urllib.parse import urlsplit

OPAQUE_SCHEMES = ("data", "blob", "javascript", "file", "filesystem")

#: Schemes that read the browser's machine (or the browser itself), refused by ``deny_local``.
LOCAL_SCHEMES = ("file", "view-source", "filesystem", "chrome", "chrome-untrusted", "chrome-extension",
                 "chrome-search", "devtools")

_BLANK = ("", "about:blank", "about:srcdoc")


def _ip(text: str) -> Optional[str]:
    """``text`` as a canonical IP address (an IPv4-mapped IPv6 address as its IPv4), or None."""
    try:
        ip = ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return None
    mapped = getattr(ip, "ipv4_mapped", None)
    return str(mapped if mapped is not None else ip)


def normalize_domain(entry: str) -> str:
    """A domain list's entry as hosts are compared: lower case, the trailing dot and a leading
    ``*.`` or ``.`` dropped (an entry covers its subdomains anyway), an internationalised name
    as its punycode (what the browser puts in a URL), an IP address canonical (an IPv4-mapped
    IPv6 address as its IPv4). ValueError for what is no host: a port, a path, a scheme, a
    wildcard elsewhere, an empty entry."""
    d = str(entry).strip().lower()
    if d.startswith("*."):
        d = d[2:]
    d = d.lstrip(".").rstrip(".")
    ip = _ip(d)
    if ip is not None:
        return ip
    if not d or any(c in d for c in ":/*@?# ") or "[" in d:
        raise ValueError(f"{entry!r} is not a domain: give a host name or an IP address (no scheme, port or path; "
                         "a leading *. is allowed and means the same as the name alone)")
    try:
        return d.encode("idna").decode("ascii")
    except UnicodeError:
        raise ValueError(f"{entry!r} is not a valid domain name") from None


def normalize_domains(entries: Iterable[str]) -> list[str]:
    return [normalize_domain(e) for e in entries]


def _host_key(host: str) -> str:
    host = host.lower().strip("[]").rstrip(".")
    ip = _ip(host)
    if ip is not None:
        return ip
    try:
        return host.encode("idna").decode("ascii") if host else host
    except UnicodeError:
        return host


def _matches(host: str, domains: Iterable[str]) -> bool:
    host = _host_key(host)
    for d in domains:
        if host == d or (not _ip(d) and host.endswith("." + d)):
            return True
    return False


@dataclass
class DomainPolicy:
    allowed: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    allow_files: bool = False
    deny_local: bool = False

    def __post_init__(self) -> None:
        # compared normalised: an IDN entry, a trailing dot or a *. used to block nothing
        self.allowed = normalize_domains(self.allowed)
        self.blocked = normalize_domains(self.blocked)

    @classmethod
    def for_task(cls, task_allowed: Iterable[str], settings_allowed: Iterable[str] = (),
                 blocked: Iterable[str] = (), start_url: str = "", deny_local: bool = False) -> "DomainPolicy":
        return cls(allowed=[*task_allowed, *settings_allowed], blocked=list(blocked),
                   allow_files=start_url.startswith("file:") and not deny_local, deny_local=deny_local)

    @property
    def routes(self) -> bool:
        """Whether hosts are checked: an allowlist or a blocklist is set, so every request of
        the episode goes through the policy (without one, nothing is routed)."""
        return bool(self.allowed or self.blocked)

    @property
    def active(self) -> bool:
        """Whether anything at all can be refused."""
        return self.routes or self.deny_local

    def refusal(self, url: str) -> Optional[str]:
        """Why ``url`` may not be opened, or None when it may."""
        url = url.strip()
        if not self.active or url.split("#")[0] in _BLANK:
            return None
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if self.deny_local and (scheme in LOCAL_SCHEMES or scheme == "about"):
            return f"{scheme}: addresses are refused here (local files and the browser's own pages are off)"
        if not self.routes:
            return None
        if scheme == "file" and self.allow_files:
            return None
        if scheme in OPAQUE_SCHEMES:
            return f"{scheme}: addresses are not allowed in this task"
        host = parts.hostname or ""
        if _matches(host, self.blocked):
            return f"{host} is a blocked domain"
        if self.allowed and not _matches(host, self.allowed):
            return f"{host or url[:40]} is not an allowed domain (allowed: {', '.join(self.allowed)})"
        return None
