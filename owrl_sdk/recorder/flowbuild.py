"""Turning recorded actions into an ``owrl.flow/1`` flow: selectors, expectations and turns.

Pure functions and one accumulating :class:`FlowBuilder`; no browser here, so each rule can be
tested on its own. The browser side is :mod:`owrl_sdk.recorder.session`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, Union
from urllib.parse import parse_qsl, unquote_plus, urlsplit, urlunsplit

from owrl_sdk.formats.documents import FLOW_SCHEMA, Flow, flow_from_data

#: Query parameters that carry a session, a token or a time: never part of an expected URL.
_VOLATILE_PARAMS = re.compile(r"^(token|session|sid|csrf|nonce|ts|t|timestamp|_|utm_.*|state|code)$", re.I)
#: Query parameters that may carry a credential: a URL holding one keeps no query at all.
_SECRET_PARAMS = re.compile(r"pass|pwd|secret|token|auth|key", re.I)
#: A path segment or query value that looks like an id (changes from run to run).
_ID_LIKE = re.compile(r"^(?=.*\d)[\w-]{6,}$|^\d+$|^[0-9a-f]{8,}$|^[0-9a-f-]{36}$", re.I)

#: The most characters of an accessible name put in a selector (a longer one is cut at a word).
NAME_LIMIT = 48
#: The most characters of a ``text_visible`` expectation.
TEXT_LIMIT = 60


def upper_snake(text: str, fallback: str = "FIELD") -> str:
    """``"Email address"`` -> ``EMAIL_ADDRESS``; ``fallback`` when nothing is left."""
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", text)
    cleaned = re.sub(r"[^A-Za-z0-9]+", "_", words).strip("_").upper()
    if cleaned and cleaned[0].isdigit():
        cleaned = "F_" + cleaned
    return cleaned or fallback


def short_name(name: str) -> str:
    """An accessible name cut to :data:`NAME_LIMIT` at a word (role selectors match a part of the name)."""
    if len(name) <= NAME_LIMIT:
        return name
    cut = name[:NAME_LIMIT].rsplit(" ", 1)[0]
    return cut if len(cut) >= 8 else name[:NAME_LIMIT]


def stable_url_part(url: str, start_url: str = "") -> Optional[str]:
    """The part of ``url`` a replay will see again: the path up to the first id-like segment,
    then the first query parameter when it is a stable one; the host only when it differs from
    ``start_url``'s. None when all that is left is ``/`` on the start host."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https", "file"):
        return None
    segments = parts.path.split("/")
    kept: list[str] = []
    whole = True
    for segment in segments:
        if segment and _ID_LIKE.match(segment):
            whole = False
            kept.append("")  # keep the slash before the id: "/order/"
            break
        kept.append(segment)
    path = "/".join(kept) or "/"
    secretish = any(_SECRET_PARAMS.search(k) for k, _ in parse_qsl(parts.query, keep_blank_values=True))
    if whole and parts.query and not secretish:
        first = parse_qsl(parts.query, keep_blank_values=True)[:1]
        if first:
            key, value = first[0]
            if not _VOLATILE_PARAMS.match(key) and not _ID_LIKE.match(value) and len(value) <= 40:
                raw = parts.query.split("&", 1)[0]
                path = f"{path}?{raw}"
    start_host = urlsplit(start_url).netloc if start_url else ""
    if parts.netloc and start_host and parts.netloc != start_host and not start_url.startswith(("demo:",)):
        return parts.netloc + path
    return None if path == "/" else path


#: Query (or fragment) parameter names that carry a credential, matched whole (``keyword`` and
#: ``passengers`` are not credentials): ``password``, ``pwd``, ``access_token``, ``api_key``, ...
_CREDENTIAL_NAME = re.compile(r"(?:\w*[-_])?(?:pass(?:word|wd|code|phrase)?|pwd|pin|otp|secret|token|auth"
                              r"|api[-_]?key|apikey|key|session(?:id)?|sid)", re.I)


def without_secret_params(url: str) -> str:
    """``url`` without the query and fragment parameters named like credentials (``password``,
    ``access_token``, ...); the rest kept as written. A navigation recorded as ``goto_url`` goes
    into the flow as it is."""
    parts = urlsplit(url)

    def keep(text: str) -> str:
        pieces = text.split("&")
        kept = [p for p in pieces if not _CREDENTIAL_NAME.fullmatch(unquote_plus(p.split("=", 1)[0]))]
        return "&".join(kept) if len(kept) < len(pieces) else text

    query = keep(parts.query)
    fragment = keep(parts.fragment) if "=" in parts.fragment else parts.fragment
    if (query, fragment) == (parts.query, parts.fragment):
        return url
    return urlunsplit(parts._replace(query=query, fragment=fragment))


def _pieces(text: str) -> list[str]:
    """The runs of words of ``text`` between the words holding a digit, each cut to
    :data:`TEXT_LIMIT` characters (the first run first)."""
    runs: list[list[str]] = [[]]
    for word in text.split():
        if re.search(r"\d", word):
            runs.append([])
        else:
            runs[-1].append(word)
    out = []
    for words in runs:
        cut = " ".join(words)
        if len(cut) > TEXT_LIMIT:
            cut = cut[:TEXT_LIMIT].rsplit(" ", 1)[0]
        out.append(cut.strip(" ,:;-()"))
    return out


def _expectable(text: str, before: Iterable[str]) -> Optional[str]:
    """The piece of a new ``text`` to expect: its words before any number, or, where those are
    too short or were on the page before the action already (a heading "New invoice" holds
    "Invoice"), the longest other run of words that was not; None when none is."""
    seen = [b.lower() for b in before]

    def fresh(piece: str) -> bool:
        return len(piece.strip(" .,:;!-")) >= 4 and not any(piece.lower() in b for b in seen)

    first, *rest = _pieces(text) or [""]
    if fresh(first):
        return first
    others = sorted((p for p in rest if fresh(p)), key=len, reverse=True)
    return others[0] if others else None


def choose_text(texts: list[dict[str, Any]], before: Iterable[str] = ()) -> Optional[str]:
    """The new text to expect after an action: one in a status or alert region first, then the
    nearest the target, then the longest; only its words before any number, cut short, or
    another run of its words where those were on the page before (``before``) already."""
    ranked = []
    before = list(before)
    for t in texts:
        cut = _expectable(str(t.get("text") or ""), before)
        if cut is not None:
            ranked.append(((not t.get("live"), round(float(t.get("distance") or 1e9) / 300), -min(len(cut), 40)), cut))
    return min(ranked)[1] if ranked else None


@dataclass
class Call:
    """One recorded call, its expectation and a note for the turn's thought."""

    name: str
    arguments: dict[str, Any]
    note: str
    expect: dict[str, Any] = field(default_factory=dict)
    #: the URL a navigation after this call reached (turned into url_contains)
    navigated: Optional[str] = None
    #: the action opened a new tab
    opened_tab: bool = False
    #: the URL the action was taken on, and the texts visible then (to tell what a navigation changed)
    url_before: str = ""
    before: frozenset[str] = frozenset()
    #: a new text on the page a navigation led to
    landing_text: Optional[str] = None
    #: the output name an extract's text is saved under
    save_as: Optional[str] = None

    def to_data(self, start_url: str) -> dict[str, Any]:
        expect = dict(self.expect)
        if self.navigated:
            part = stable_url_part(self.navigated, start_url)
            expect.pop("text_visible", None)
            if part and part != stable_url_part(self.url_before, start_url):
                expect = {"url_contains": part}
            elif self.landing_text:  # back on the same page (a form that posts and returns): what it now says
                expect["text_visible"] = self.landing_text
        if self.opened_tab:
            expect["new_tab"] = True
        data: dict[str, Any] = {"name": self.name, "arguments": self.arguments}
        if self.save_as:
            data["save_as"] = self.save_as
        if expect:
            data["expect"] = expect
        return data


def _replace_values(data: Any, quoted: dict[str, str]) -> Any:
    """``data`` with each recorded input value in its strings replaced by the input's placeholder."""
    if not quoted:
        return data
    if isinstance(data, str):
        for value in sorted(quoted, key=len, reverse=True):  # the longest first: "Globex Ltd" before "Globex"
            data = data.replace(value, quoted[value])
        return data
    if isinstance(data, dict):
        return {k: _replace_values(v, quoted) for k, v in data.items()}
    if isinstance(data, list):
        return [_replace_values(v, quoted) for v in data]
    return data


@dataclass
class FlowBuilder:
    """The calls recorded so far and how they become a flow."""

    start_url: str
    task: str = ""
    calls: list[Call] = field(default_factory=list)
    #: declared inputs: name -> the value typed while recording
    inputs: dict[str, Union[str, bool]] = field(default_factory=dict)

    def add(self, call: Call) -> Call:
        self.calls.append(call)
        return call

    def turns(self) -> list[dict[str, Any]]:
        turns: list[dict[str, Any]] = []
        current: list[Call] = []
        #: the recorded value of each input already filled in -> its placeholder: a later selector or
        #: expectation that quotes the value (the option picked after typing it, "created for X")
        #: quotes the placeholder, so that every row looks for its own value
        quoted: dict[str, str] = {}

        def data(call: Call) -> dict[str, Any]:
            out = _replace_values(call.to_data(self.start_url), quoted)
            text = json.dumps(out)
            for name, value in self.inputs.items():
                if isinstance(value, str) and len(value.strip()) >= 3 and f"{{{{input:{name}}}}}" in text:
                    quoted.setdefault(value, f"{{{{input:{name}}}}}")
            return dict(out)

        def close() -> None:
            if current:
                calls = [data(c) for c in current]
                notes = [c.note for c in current if c.note]  # an input's value in a note is quoted too
                turns.append({"thought": _replace_values(" ".join(notes), quoted)[:300], "calls": calls})
                current.clear()

        for call in self.calls:
            current.append(call)
            if call.expect or call.navigated or call.opened_tab:
                close()
        close()
        turns.append({"thought": "The recorded steps are done.",
                      "calls": [{"name": "done", "arguments": {"response": "Replayed the recording."}}]})
        return turns

    def flow_data(self) -> dict[str, Any]:
        host = urlsplit(self.start_url).netloc or self.start_url.split("/")[0]
        data: dict[str, Any] = {"schema": FLOW_SCHEMA, "task": self.task or f"Replay of the recording on {host}",
                                "start_url": self.start_url, "turns": self.turns()}
        if self.inputs and "inputs" in Flow.model_fields:  # declared inputs, where Flow knows them
            data["inputs"] = {name: {"type": "boolean", "default": value, "description": "set while recording"}
                              if isinstance(value, bool) else
                              {"type": "string", "default": value, "description": "typed while recording"}
                              for name, value in self.inputs.items()}
        return data

    def flow(self) -> Flow:
        return flow_from_data(self.flow_data(), "recording")
