"""Matching an agent's answer against a task's expected answer."""

from __future__ import annotations

import re
import unicodedata
from typing import Optional

_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?|[-+]?\.\d+")


def normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"[\s]+", " ", text)
    return text.strip().strip(".!?\"'")


def numbers(text: str) -> list[float]:
    out = []
    for m in _NUMBER.findall(text):
        try:
            out.append(float(m.replace(",", "")))
        except ValueError:
            continue
    return out


def match_answer(expected: str, given: Optional[str], mode: str = "contains") -> bool:
    """Whether ``given`` answers ``expected`` under ``mode``.

    - ``exact``: equal after case, space and Unicode normalisation;
    - ``contains``: the expected text appears in the answer (same normalisation);
    - ``number``: the expected number appears among the answer's numbers (1,299.00 == 1299);
    - ``regex``: ``expected`` is a regular expression searched in the answer (case-insensitive).
    """
    if given is None:
        return False
    if mode == "exact":
        return normalize(expected) == normalize(given)
    if mode == "contains":
        return normalize(expected) in normalize(given)
    if mode == "number":
        want = numbers(expected)
        if not want:
            raise ValueError(f"expected answer {expected!r} holds no number")
        return any(abs(n - want[0]) < 1e-6 for n in numbers(given))
    if mode == "regex":
        return re.search(expected, given, flags=re.IGNORECASE) is not None
    raise ValueError(f"unknown answer match {mode!r}: use exact, contains, number or regex")
