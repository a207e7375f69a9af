"""Hosts read as the address they reach, not as they are spelled.

One address rule for the browser's domain policy and for every client of the server's own
(a job's OpenAI-compatible endpoint, a callback, a start URL checked at submission):

- an IPv4 address is parsed as a browser and the C library parse it (the WHATWG URL host
  parser; ``inet_aton`` agrees): ``127.1``, ``2130706433``, ``0x7f000001``, ``0177.0.0.1``
  and ``127.0.0.1.`` are all 127.0.0.1;
- an IPv6 address that carries an IPv4 address reaches that IPv4 address and is read as it:
  mapped (``::ffff:127.0.0.1``), compatible (``::127.0.0.1``), the IPv4-translated form
  (``::ffff:0:127.0.0.1``), NAT64 (``64:ff9b::7f00:1``) and 6to4 (``2002:7f00:1::``);
- every address that reaches this machine is one place: loopback (127.0.0.0/8, ``::1``),
  unspecified (0.0.0.0/8 and ``::``, which connect to this machine), and the names the browser
  resolves to loopback itself (``localhost``, ``*.localhost``). A list entry naming any of
  them covers all of them (:func:`same_place`);
- :func:`internal` names the class of an address that is not on the public internet
  (this machine, private, link-local, shared, multicast, reserved, the NAT64 local-use
  prefix, Teredo): what the server refuses to call on a job's behalf unless its operator
  allowed that address (``owrl_sdk.server``).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Optional, Union

IP = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]

#: Names Chromium resolves to loopback without asking DNS.
_LOCAL_NAMES = ("localhost", "localhost.localdomain", "localhost6", "localhost6.localdomain6")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")
_COMPATIBLE = ipaddress.ip_network("::/96")
_THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")
_SHARED = ipaddress.ip_network("100.64.0.0/10")
_NUMBER = re.compile(r"(0[xX][0-9a-fA-F]*|0[0-7]*|[1-9][0-9]*)")


class NotAHost(ValueError):
    """A host that a browser would refuse as an address (``256.1.1.1``, ``0x``...)."""


def _ipv4_number(part: str) -> Optional[int]:
    """One dotted part as the URL parser reads it: ``0x`` hex, a leading 0 octal, else decimal."""
    if not _NUMBER.fullmatch(part):
        return None
    if part[:2].lower() == "0x":
        return int(part[2:] or "0", 16)
    if len(part) > 1 and part[0] == "0":
        return int(part[1:], 8)
    return int(part)


def parse_ipv4(host: str) -> Optional[ipaddress.IPv4Address]:
    """``host`` as an IPv4 address the way the WHATWG URL parser reads it, or None when it is a
    name. A host whose last part is a number is an address or nothing: NotAHost then."""
    parts = host.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    if not parts or not parts[-1] or _ipv4_number(parts[-1]) is None:
        if parts and parts[-1] and re.fullmatch(r"[0-9]+", parts[-1]):  # 09: all digits, not a number
            raise NotAHost(f"{host!r} is not a valid address")
        return None
    numbers = [_ipv4_number(p) for p in parts]
    if len(parts) > 4 or any(n is None for n in numbers):
        raise NotAHost(f"{host!r} is not a valid address")
    values = [n for n in numbers if n is not None]
    if any(n > 255 for n in values[:-1]) or values[-1] >= 256 ** (5 - len(values)):
        raise NotAHost(f"{host!r} is not a valid address")
    total = values[-1]
    for i, n in enumerate(values[:-1]):
        total += n << (8 * (3 - i))
    return ipaddress.IPv4Address(total)


def parse_ip(host: str) -> Optional[IP]:
    """``host`` (a URL's host, brackets allowed) as an IP address in any spelling a browser or
    a client accepts, or None for a name. NotAHost for a number no client would connect to."""
    text = host.strip().lower()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if ":" in text:
        try:
            return ipaddress.IPv6Address(text.split("%", 1)[0])
        except ValueError:
            raise NotAHost(f"{host!r} is not a valid IPv6 address") from None
    return parse_ipv4(text)


def reached(ip: IP) -> IP:
    """The address a connection to ``ip`` reaches: the IPv4 address an IPv6 one carries
    (mapped, compatible, translated, NAT64 /96, 6to4), else ``ip`` itself."""
    if isinstance(ip, ipaddress.IPv4Address):
        return ip
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    packed = int(ip)
    low = ipaddress.IPv4Address(packed & 0xFFFFFFFF)
    if ip in _NAT64 or ip in _TRANSLATED:
        return low
    if ip in _COMPATIBLE and packed > 1:  # :: and ::1 are themselves
        return low
    return ip


def this_machine(ip: IP) -> bool:
    """Whether a connection to ``ip`` lands on the machine that makes it."""
    ip = reached(ip)
    if isinstance(ip, ipaddress.IPv4Address):
        return ip.is_loopback or ip in _THIS_NETWORK
    return ip.is_loopback or ip.is_unspecified


def local_name(name: str) -> bool:
    """A name the browser resolves to loopback by itself."""
    name = name.lower().rstrip(".")
    return name in _LOCAL_NAMES or name.endswith(".localhost")


def internal(ip: IP) -> Optional[str]:
    """Why ``ip`` is not an address on the public internet, or None when it is one."""
    if isinstance(ip, ipaddress.IPv6Address) and (ip in _NAT64_LOCAL or ip.teredo is not None):
        return "a translated address (NAT64 local use, Teredo)"
    if this_machine(ip):
        return "this machine (loopback or unspecified)"
    ip = reached(ip)
    for test, what in (("is_link_local", "link-local"), ("is_private", "private"), ("is_multicast", "multicast"),
                       ("is_reserved", "reserved")):
        if getattr(ip, test):
            return f"a {what} address"
    if ip in _SHARED:
        return "a shared (carrier-grade NAT) address"
    return None


def same_place(a: IP, b: IP) -> bool:
    """Whether two addresses reach the same place: equal once read as :func:`reached`, or
    both this machine."""
    return reached(a) == reached(b) or (this_machine(a) and this_machine(b))


def parse_network(text: str) -> Optional[Network]:
    """An entry written as a network (``10.0.0.0/8``, ``fc00::/7``), or None."""
    if "/" not in text:
        return None
    try:
        return ipaddress.ip_network(text.strip("[]"), strict=False)
    except ValueError:
        return None


def in_network(ip: IP, net: Network) -> bool:
    return ip in net or reached(ip) in net
