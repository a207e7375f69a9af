"""Secrets: ``{{secret:NAME}}`` placeholders, resolved only when a tool types them.

Tasks, flows and model output carry the placeholder; the value comes from the
``resolve_secret`` hook (a secret-store plugin) or the environment variable
``OWRL_SECRET_NAME``, at the moment a tool needs it. Every value resolved in this
process (and every ``OWRL_SECRET_*`` value) is redacted back to its placeholder in
feedback, observations and everything owrl writes or prints, so it reaches no prompt,
log, file or judge.

Redaction matches more than the value as typed: any prefix of at least :data:`MIN_PREFIX`
characters (a ``maxlength`` field, text cut for feedback), and each character in its
JSON-escaped, percent-encoded (``+`` for a space), HTML-escaped or raw form, with runs of
whitespace collapsed or encoded. :func:`scrub` applies it to every string of any value (a
pydantic model, dicts and lists): it is the one choke point the run store, the CLI and
``owrl serve`` pass everything through before it leaves the process.

Values that belong to one job (the cookies of its saved session, the key and URL password of
an endpoint it names) are kept in the job's own scope (:func:`scope`, which ``owrl serve``
opens around each job): they are redacted from that job's records only, never from another
job's. Outside any scope (``owrl run``, one process per run) they are kept for the process.
"""

from __future__ import annotations

import json
import os
import re
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Optional, TypeVar, Union, cast
from urllib.parse import urlsplit

from pydantic import BaseModel

PLACEHOLDER = re.compile(r"\{\{\s*secret:([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
ENV_PREFIX = "OWRL_SECRET_"
_MIN_LEN = 3  # shorter values would redact ordinary text
#: The shortest prefix of a secret that is redacted on its own (a field's ``maxlength`` or a
#: cut in feedback leaves a prefix). Shorter pieces are ordinary text too often to blank out.
MIN_PREFIX = 6

_known: dict[str, str] = {}  # value -> name, for every secret resolved in this process
_lock = threading.Lock()
#: value -> name of the job running in this context (asyncio tasks and threads it starts share it)
_scoped: ContextVar[Optional[dict[str, str]]] = ContextVar("owrl_secret_scope", default=None)


@contextmanager
def scope() -> Iterator[dict[str, str]]:
    """A scope of its own for the secrets registered or resolved inside it (what one job owns):
    they are redacted in this context and the tasks it starts, and nowhere else."""
    mine: dict[str, str] = {}
    token = _scoped.set(mine)
    try:
        yield mine
    finally:
        _scoped.reset(token)


def _remember(value: str, name: str) -> None:
    with _lock:
        mine = _scoped.get()
        (mine if mine is not None else _known).setdefault(value, name)
_resolutions = 0  # how many times a placeholder was resolved in this process

T = TypeVar("T")


class SecretMissing(LookupError):
    def __init__(self, name: str):
        super().__init__(f"secret {name} is not set: export {ENV_PREFIX}{name}=... or configure a secret store plugin")
        self.name = name


def has_placeholder(text: str) -> bool:
    return bool(PLACEHOLDER.search(text or ""))


def resolve(text: str, lookup: Optional[Callable[[str], Optional[str]]] = None) -> str:
    """``text`` with every placeholder replaced by its value (raises :class:`SecretMissing`)."""

    def value(m: re.Match[str]) -> str:
        global _resolutions
        name = m.group(1)
        found = lookup(name) if lookup is not None else None
        if found is None:
            found = os.environ.get(ENV_PREFIX + name)
        if found is None:
            raise SecretMissing(name)
        with _lock:
            _resolutions += 1
        if len(found) >= _MIN_LEN:
            _remember(found, name)
        return found

    return PLACEHOLDER.sub(value, text)


def register(value: Optional[str], name: str) -> None:
    """Redact ``value`` from now on, as ``{{secret:NAME}}``, wherever owrl writes or prints: for
    a credential that arrives as an option rather than a placeholder (an endpoint's API key, a
    password in its URL), which a server's error may quote back. Values under MIN_PREFIX
    characters are ignored: a stand-in key such as ``EMPTY`` or ``none`` is no secret, and
    redacting it would blank ordinary words."""
    if value and len(value) >= MIN_PREFIX:
        _remember(value, name)


def credentials_in_url(url: Optional[str], name: str) -> None:
    """:func:`register` the password in ``url`` (``http://user:PASSWORD@host/``), if any; the
    user name is not a secret."""
    try:
        parts = urlsplit(url or "")
        password = parts.password
    except ValueError:  # a port that is not a number: read the user part by hand
        userinfo = (url or "").split("//", 1)[-1].split("/", 1)[0].rpartition("@")[0]
        password = userinfo.partition(":")[2]
    register(password, f"{name}_PASSWORD")


def register_endpoint(api_key: Optional[str], url: Optional[str]) -> None:
    """An HTTP endpoint's credentials as secrets: its key and the password in its URL (an
    error it answers may quote what it was sent)."""
    register(api_key, "OPENAI_API_KEY")
    credentials_in_url(url, "OPENAI_BASE_URL")


def resolution_count() -> int:
    """How many placeholders were resolved in this process so far (it only grows)."""
    return _resolutions


def known() -> dict[str, str]:
    """value -> name for every secret redacted here: the resolved ones, ``OWRL_SECRET_*`` and
    those of the current scope (:func:`scope`)."""
    with _lock:
        found = dict(_known)
        mine = _scoped.get()
        if mine:
            found.update({k: v for k, v in mine.items() if k not in found})
    for key, value in os.environ.items():
        if key.startswith(ENV_PREFIX) and len(value) >= _MIN_LEN:
            found.setdefault(value, key[len(ENV_PREFIX):])
    return found


# ---------------------------------------------------------------------------- matching


def _ci(text: str) -> str:
    """A regex for ``text`` whose letters (hex digits) match in either case."""
    return "(?i:" + re.escape(text) + ")"


def _char(c: str) -> str:
    """A regex matching the character ``c`` in any form owrl can meet it in."""
    forms: list[tuple[str, bool]] = [(c, False)]  # (literal, hex digits in either case)
    data = c.encode("utf-8")
    forms.append(("".join(f"%{b:02X}" for b in data), True))  # percent-encoded
    forms.append(("".join(f"%25{b:02X}" for b in data), True))  # percent-encoded twice
    once = json.dumps(c)[1:-1]
    if once != c:  # " \ and control characters
        forms.append((once, False))
        forms.append((json.dumps(once)[1:-1], False))  # escaped again: JSON inside a JSON string
    escaped = json.dumps(c, ensure_ascii=True)[1:-1]
    if escaped.startswith("\\u"):
        forms.append((escaped, True))
    elif c.isascii() and not c.isalnum() and not c.isspace():
        forms.append((f"\\u{ord(c):04x}", True))  # HTML-safe JSON writes & < > ' = as \u0026 ...
    if c == "'":
        forms.append(("''", False))  # a YAML single-quoted string (aria snapshots) doubles it
    if c in "/'\"":
        forms.append(("\\" + c, False))  # JSON's \/, a JavaScript string's \' and \"
    forms.append((f"&#{ord(c)};", False))
    forms.append((f"&#x{ord(c):x};", True))
    named = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;"}.get(c)
    if named:
        forms.append((named, True))
    # longest first: the rest of a value is matched without backtracking, so "\\\\" must be
    # tried before "\\" and "&amp;" before "&"
    forms = sorted(set(forms), key=lambda f: (-len(f[0]), f[0]))
    return "(?:" + "|".join(_ci(text) if ci else re.escape(text) for text, ci in forms) + ")"


#: A run of whitespace, collapsed, kept, or encoded (form encoding writes a space as +).
_SPACE = (r"(?:\s|\+|(?i:%(?:25)?(?:20|09|0a|0d|c2%(?:25)?a0))|\\[ntr]|(?i:\\u00(?:20|a0|09|0a|0d))"
          r"|(?i:&nbsp;)|&#0*(?:32|160|9|10|13);|(?i:&#x0*(?:20|a0|9|a|d);))+")


#: Where a short value may begin: not after a letter or digit, unless that ends an escape
#: (%3D, \u003d, \n) that stands for what came before it.
_ALONE = r"(?:(?<![0-9A-Za-z])|(?<=%[0-9A-Fa-f]{2})|(?<=%25[0-9A-Fa-f]{2})|(?<=\\u[0-9A-Fa-f]{4})|(?<=\\[nrtbf]))"


@lru_cache(maxsize=512)
def _matcher(value: str) -> tuple[re.Pattern[str], tuple[re.Pattern[str], ...]]:
    """The head (the first MIN_PREFIX characters, or the whole of a shorter value) as one
    pattern, and the rest as one pattern per character, tried one after another."""
    units: list[tuple[int, str]] = []
    for piece in re.findall(r"\s+|\S", value):
        units.append((len(piece), _SPACE if piece.isspace() else _char(piece)))
    head, covered = 0, 0
    while head < len(units) and covered < MIN_PREFIX:
        covered += units[head][0]
        head += 1
    pattern = "".join(p for _, p in units[:head])
    if len(value) < MIN_PREFIX:  # a PIN, a code: only on its own, not inside a longer number or word
        pattern = f"{_ALONE}{pattern}(?![0-9A-Za-z])"
    return (re.compile(pattern), tuple(re.compile(p) for _, p in units[head:]))


def _spans(text: str, value: str) -> list[tuple[int, int]]:
    """Where ``value`` (or a prefix of it of MIN_PREFIX+ characters) is in ``text``, in any form."""
    head, tail = _matcher(value)
    found: list[tuple[int, int]] = []
    pos = 0
    while True:
        m = head.search(text, pos)
        if m is None:
            return found
        end = m.end()
        for unit in tail:  # the longest prefix of the value that goes on matching
            more = unit.match(text, end)
            if more is None:
                break
            end = more.end()
        found.append((m.start(), end))
        pos = end


class _Redactor:
    #: Characters of texts redacted already, kept to answer again at once: a trajectory is saved
    #: whole after every step, its earlier steps unchanged.
    MEMO_CHARS = 16_000_000

    def __init__(self, secrets: dict[str, str]):
        self.items = [(v, "{{secret:" + secrets[v] + "}}") for v in sorted(secrets, key=len, reverse=True)]
        self._memo: dict[str, str] = {}
        self._memo_chars = 0

    def __call__(self, text: str) -> str:
        done = self._memo.get(text)
        if done is None:
            done = self._redact(text)
            if self._memo_chars + len(text) > self.MEMO_CHARS:
                self._memo, self._memo_chars = {}, 0
            self._memo[text] = done
            self._memo_chars += len(text)
        return done

    def _redact(self, text: str) -> str:
        spans = sorted((start, end, placeholder) for value, placeholder in self.items
                       for start, end in _spans(text, value))
        if not spans:
            return text
        # overlapping matches (one secret's prefix inside another's whole value) become one
        # placeholder, the longest match's, so no piece of either is left in clear
        merged: list[list[Any]] = []
        for start, end, placeholder in spans:
            last = merged[-1] if merged else None
            if last is not None and start < last[1]:
                if end - start > last[3]:
                    last[2], last[3] = placeholder, end - start
                last[1] = max(last[1], end)
            else:
                merged.append([start, end, placeholder, end - start])
        parts, pos = [], 0
        for start, end, placeholder, _ in merged:
            parts += [text[pos:start], placeholder]
            pos = end
        parts.append(text[pos:])
        return "".join(parts)

    def found_in(self, text: str) -> bool:
        return any(_matcher(value)[0].search(text) for value, _ in self.items)


@lru_cache(maxsize=8)
def _redactor_for(secrets: tuple[tuple[str, str], ...]) -> _Redactor:
    return _Redactor(dict(secrets))


def _redactor() -> _Redactor:
    return _redactor_for(tuple(sorted(known().items())))


def redact(text: Optional[str]) -> Optional[str]:
    """``text`` with every known secret value (whole, a prefix of MIN_PREFIX+ characters, or an
    escaped or encoded form of either) put back as its placeholder."""
    if not text:
        return text
    return _redactor()(text)


def scrub(value: T) -> T:
    """A copy of ``value`` with every string in it redacted: strings, dict keys and values,
    lists, tuples and pydantic models (field by field, so bytes such as a screenshot stay).
    Everything owrl records, prints or sends goes through here (or :func:`dumps`)."""
    r = _redactor()
    if not r.items:
        return value
    # _scrub rebuilds each container as the same type (a list stays a list, a model that model)
    return cast(T, _scrub(value, r))


def _scrub(value: Any, r: _Redactor) -> Any:
    if isinstance(value, str):
        return r(value) if value else value
    if isinstance(value, dict):
        return {_scrub(k, r): _scrub(v, r) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [_scrub(v, r) for v in value]
        return items if isinstance(value, list) else tuple(items)

    if isinstance(value, BaseModel):
        update = {name: _scrub(getattr(value, name), r) for name in type(value).model_fields}
        return value.model_copy(update=update)
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` of the scrubbed value (a pydantic model is dumped in JSON mode first)."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", by_alias=True)
    return json.dumps(scrub(value), **kwargs)


# ---------------------------------------------------------------------------- traces


def found_in_file(path: Union[str, Path]) -> bool:
    """Whether any known secret (in a form :func:`redact` matches) is in the file, or in any
    member of it when it is a zip (a trace). Pictures are bytes: a secret drawn in one is not found."""
    r = _redactor()
    if not r.items:
        return False
    p = Path(path)
    try:
        if zipfile.is_zipfile(p):
            with zipfile.ZipFile(p) as z:
                return any(r.found_in(z.read(name).decode("utf-8", "replace")) for name in z.namelist())
        return r.found_in(p.read_bytes().decode("utf-8", "replace"))
    except (OSError, zipfile.BadZipFile):
        return True  # unreadable: assume the worst
