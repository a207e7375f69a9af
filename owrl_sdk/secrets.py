"""Secrets: ``{{secret:NAME}}`` placeholders, resolved only when a tool types them.

Tasks, flows and model output carry the placeholder; the value comes from the
``resolve_secret`` hook (a secret-store plugin) or the environment variable
``OWRL_SECRET_NAME``, at the moment a tool needs it. Every value resolved in this
process (and every ``OWRL_SECRET_*`` value) is redacted back to its placeholder in
feedback, observations and trajectory files, so it reaches no prompt, log or judge.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Callable, Optional

PLACEHOLDER = re.compile(r"\{\{\s*secret:([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
ENV_PREFIX = "OWRL_SECRET_"
_MIN_LEN = 3  # shorter values would redact ordinary text

_known: dict[str, str] = {}  # value -> name, for every secret resolved in this process
_lock = threading.Lock()


class SecretMissing(LookupError):
    def __init__(self, name: str):
        super().__init__(f"secret {name} is not set: export {ENV_PREFIX}{name}=... or configure a secret store plugin")
        self.name = name


def has_placeholder(text: str) -> bool:
    return bool(PLACEHOLDER.search(text or ""))


def resolve(text: str, lookup: Optional[Callable[[str], Optional[str]]] = None) -> str:
    """``text`` with every placeholder replaced by its value (raises :class:`SecretMissing`)."""

    def value(m: re.Match) -> str:
        name = m.group(1)
        found = lookup(name) if lookup is not None else None
        if found is None:
            found = os.environ.get(ENV_PREFIX + name)
        if found is None:
            raise SecretMissing(name)
        if len(found) >= _MIN_LEN:
            with _lock:
                _known[found] = name
        return found

    return PLACEHOLDER.sub(value, text)


def redact(text: Optional[str]) -> Optional[str]:
    """``text`` with every known secret value put back as its placeholder."""
    if not text:
        return text
    with _lock:
        known = dict(_known)
    for key, value in os.environ.items():
        if key.startswith(ENV_PREFIX) and len(value) >= _MIN_LEN:
            known.setdefault(value, key[len(ENV_PREFIX):])
    for value in sorted(known, key=len, reverse=True):  # longest first: no partial leftovers
        if value in text:
            text = text.replace(value, "{{secret:" + known[value] + "}}")
    return text
