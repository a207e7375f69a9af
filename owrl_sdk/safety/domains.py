"""Which addresses an episode may navigate to.

A :class:`DomainPolicy` combines a task's ``allowed_domains``, the ``allowed_domains`` and
``blocked_domains`` settings and ``--allow-domain``. With no allowed domain, every host is
allowed except blocked ones. A host name matches a domain when it equals it or ends with
``.domain``; entries and hosts are compared normalised (:func:`normalize_domain`: case,
trailing dot, ``*.``, internationalised names as punycode), and an entry with a port, path or
scheme is refused where the lists load. An address is compared by the address it reaches,
not by its spelling (:mod:`owrl_sdk.safety.addresses`: ``127.1``, ``2130706433``, ``0x7f000001``,
``::ffff:127.0.0.1``, ``64:ff9b::7f00:1`` and ``2002:7f00:1::`` are all 127.0.0.1), and an
entry may be a network (``10.0.0.0/8``). A blocklist is read widely: an entry for this
machine (``127.0.0.1``, ``::1``, ``0.0.0.0``, ``localhost``) blocks every address and local name
that reaches it (``0``, ``[::]``, ``127.0.0.2``, ``x.localhost``). An allowlist is read
narrowly: it admits the addresses it names, in any spelling, and the names it names. Schemes: http, https and about:blank are navigable; ``data:``, ``blob:``,
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
from functools import lru_cache
from typing import Iterable, Optional, Union
from urllib.parse import SplitResult, urlsplit

from owrl_sdk.safety.addresses import IP, Network, NotAHost, in_network, internal, local_name, parse_ip, parse_network, reached, same_place, this_machine

OPAQUE_SCHEMES = ("data", "blob", "javascript", "file", "filesystem")

#: Schemes that read the browser's machine (or the browser itself), refused by ``deny_local``.
LOCAL_SCHEMES = ("file", "view-source", "filesystem", "chrome", "chrome-untrusted", "chrome-extension",
                 "chrome-search", "devtools")

_BLANK = ("", "about:blank", "about:srcdoc")


def _ip(text: str) -> Optional[str]:
    """``text`` as the canonical address it reaches (:mod:`owrl_sdk.safety.addresses`: any spelling a
    browser or a client accepts; an IPv6 address carrying an IPv4 one as that IPv4), or None."""
    try:
        ip = parse_ip(text)
    except NotAHost:
        return None
    return str(reached(ip)) if ip is not None else None


def normalize_domain(entry: str) -> str:
    """A domain list's entry as hosts are compared: lower case, the trailing dot and a leading
    ``*.`` or ``.`` dropped (an entry covers its subdomains anyway), an internationalised name
    as its punycode (what the browser puts in a URL), an IP address as the canonical address it
    reaches (``127.1`` and ``::ffff:127.0.0.1`` are ``127.0.0.1``), a network as its CIDR
    (``10.0.0.0/8``). ValueError for what is no host: a port, a path, a scheme, a wildcard
    elsewhere, an empty entry, a number no client would connect to."""
    d = str(entry).strip().lower()
    if d.startswith("*."):
        d = d[2:]
    d = d.lstrip(".").rstrip(".")
    net = parse_network(d)
    if net is not None:
        return str(net)
    try:
        ip = parse_ip(d)
    except NotAHost:
        ip, d = None, ""  # a number no client connects to (256.1.1.1), or a port after an address
    if ip is not None:
        return str(reached(ip))
    if not d or any(c in d for c in ":/*@?# ") or "[" in d:
        raise ValueError(f"{entry!r} is not a domain: give a host name, an IP address or a network such as "
                         "10.0.0.0/8 (no scheme, port or path; a leading *. is allowed and means the same as the "
                         "name alone)")
    try:
        return d.encode("idna").decode("ascii")
    except UnicodeError:
        raise ValueError(f"{entry!r} is not a valid domain name") from None


def normalize_domains(entries: Iterable[str]) -> list[str]:
    return [normalize_domain(e) for e in entries]


def host_place(host: str) -> Union[IP, str, None]:
    """What a URL's host reaches: an address (however it is spelled), a name (as punycode), or
    None for a host no browser or client would connect to."""
    host = host.strip().lower()
    try:
        ip = parse_ip(host)
    except NotAHost:
        return None
    if ip is not None:
        return ip
    host = host.rstrip(".")
    try:
        return host.encode("idna").decode("ascii") if host else host
    except UnicodeError:
        return host


@lru_cache(maxsize=1024)
def _entry_place(entry: str) -> Union[IP, Network, str]:
    """A list entry parsed (cached: every routed request of an episode compares against the
    same few entries)."""
    net = parse_network(entry)
    if net is not None:
        return net
    ip = _ip(entry)
    return ipaddress.ip_address(ip) if ip is not None else entry


def _matches(host: str, domains: Iterable[str], wide: bool = False) -> bool:
    """Whether ``host`` is covered by one of ``domains``. Addresses are compared by the address
    they reach. ``wide`` (a blocklist): an entry for this machine (127.0.0.1, ``::1``,
    ``0.0.0.0``, ``localhost``, ...) covers every address and local name of this machine, and a
    host that is no valid address is covered by every list (the browser will not load it anyway)."""
    place = host_place(host)
    if place is None:
        return wide
    for d in domains:
        entry = _entry_place(d)
        if isinstance(place, str):
            if isinstance(entry, str):
                if place == entry or place.endswith("." + entry):
                    return True
            elif wide and local_name(place) and (
                    this_machine(entry) if not isinstance(entry, (ipaddress.IPv4Network, ipaddress.IPv6Network))
                    else in_network(ipaddress.ip_address("127.0.0.1"), entry)):
                return True
        elif isinstance(entry, (ipaddress.IPv4Network, ipaddress.IPv6Network)):
            if in_network(place, entry):
                return True
        elif isinstance(entry, str):
            if wide and local_name(entry) and this_machine(place):
                return True
        elif reached(place) == entry or (wide and same_place(place, entry)):
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

    def blocks_address(self, address: str) -> bool:
        """Whether the blocklist covers ``address`` (an address a name resolved to)."""
        return _matches(address, self.blocked, wide=True)

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
        host = _hostname(parts)
        if _matches(host, self.blocked, wide=True):
            return f"{host} is a blocked domain"
        if self.allowed and not _matches(host, self.allowed):
            return f"{host or url[:40]} is not an allowed domain (allowed: {', '.join(self.allowed)})"
        return None


def internal_host(url: str, resolve: bool = False) -> Optional[str]:
    """Why ``url``'s host is not on the public internet (:func:`owrl_sdk.safety.addresses.internal`,
    a local name such as ``localhost`` counting as this machine), or None. With ``resolve``, a
    name is looked up too and judged by every address it resolves to (``vm``, the machine's
    own name, is 127.0.1.1 here); a name that does not resolve is left to fail where it is used."""
    place = host_place(_hostname(urlsplit(url.strip())))
    if place is None:
        return "no valid address"
    if not isinstance(place, str):
        return internal(place)
    if local_name(place):
        return "this machine (a local name)"
    if not resolve or not place:
        return None
    import socket

    try:
        found = {str(info[4][0]) for info in socket.getaddrinfo(place, None, type=socket.SOCK_STREAM)}
    except (OSError, UnicodeError):
        return None
    for address in sorted(found):
        why = internal(ipaddress.ip_address(address.split("%", 1)[0]))
        if why:
            return f"{why}: {place} resolves to {address}"
    return None


def _hostname(parts: SplitResult) -> str:
    """The URL's host with IPv6 brackets kept off, as ``hostname`` gives it; ``netloc`` read
    directly when ``hostname`` cannot parse it (a bracketed host it rejects)."""
    try:
        return parts.hostname or ""
    except ValueError:
        return parts.netloc.rsplit("@", 1)[-1]
