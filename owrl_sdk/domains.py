"""Which addresses an episode may navigate to.

A :class:`DomainPolicy` combines a task's ``allowed_domains``, the ``allowed_domains`` and
``blocked_domains`` settings and ``--allow-domain``. With no allowed domain, every host is
allowed except blocked ones. A host matches a domain when it equals it or ends with
``.domain``. Schemes: http, https and about:blank are navigable; ``data:``, ``blob:``,
``javascript:`` and ``file:`` are refused when any allowlist is set (a ``data:`` page has
no host to check, which is how such a policy is usually slipped past), and ``file:`` is
refused unless the start page itself is a file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional
from urllib.parse import urlsplit

OPAQUE_SCHEMES = ("data", "blob", "javascript", "file", "filesystem")


def _matches(host: str, domains: Iterable[str]) -> bool:
    host = host.lower().rstrip(".")
    for d in domains:
        d = d.lower().lstrip(".")
        if host == d or host.endswith("." + d):
            return True
    return False


@dataclass
class DomainPolicy:
    allowed: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    allow_files: bool = False

    @classmethod
    def for_task(cls, task_allowed: Iterable[str], settings_allowed: Iterable[str] = (),
                 blocked: Iterable[str] = (), start_url: str = "") -> "DomainPolicy":
        return cls(allowed=[*task_allowed, *settings_allowed], blocked=list(blocked),
                   allow_files=start_url.startswith("file:"))

    @property
    def active(self) -> bool:
        return bool(self.allowed or self.blocked)

    def refusal(self, url: str) -> Optional[str]:
        """Why ``url`` may not be opened, or None when it may."""
        if not self.active or url in ("", "about:blank", "about:srcdoc"):
            return None
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
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
