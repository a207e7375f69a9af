"""Saved sessions: a Playwright storage state (cookies, local storage) loaded into every
episode's context, or saved when an episode ends.

A storage state holds a log-in: its cookies are credentials. So a file is written with mode
0600 (atomically, never wider, never into a runs folder), a file others can read is refused
when loaded, and every cookie value and local-storage value read or written that looks like
a credential (:data:`TOKEN_MIN` characters or more, no space, no address; the
:data:`MOST_VALUES` longest) is registered as a secret (:func:`owrl_sdk.safety.secrets.register`): a
page that echoes a session cookie has it redacted from trajectories, reports and the terminal
like a typed password. In ``owrl serve`` it belongs to the job's scope
(:func:`owrl_sdk.safety.secrets.scope`): another job's records are not touched.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, Union

from owrl_sdk.safety import secrets
from owrl_sdk.errors import UsageError
from owrl_sdk.support.files import write_atomic


#: A cookie or storage value is taken for a credential when it is this long, has no space and is
#: no address: session tokens are; ``finished``, ``en-GB`` or a page's own words are not, and
#: redacting them would blank that text wherever it shows.
TOKEN_MIN = 12
#: The most values of one state registered (the longest first): a page that sets thousands of
#: cookies must not make every redaction slow.
MOST_VALUES = 100


def _credential_like(value: str) -> bool:
    return len(value) >= TOKEN_MIN and not any(c.isspace() for c in value) and "://" not in value


def register_values(state: dict[str, Any]) -> None:
    """The credential-like values of a storage state, as secrets of the current scope."""
    found: list[tuple[str, str]] = []
    for cookie in state.get("cookies") or []:
        if isinstance(cookie, dict):
            found.append((str(cookie.get("value") or ""), f"COOKIE_{str(cookie.get('name') or '').upper()}"))
    for origin in state.get("origins") or []:
        for item in (origin.get("localStorage") or []) if isinstance(origin, dict) else []:
            if isinstance(item, dict):
                found.append((str(item.get("value") or ""), f"STORAGE_{str(item.get('name') or '').upper()}"))
    likely = sorted((pair for pair in found if _credential_like(pair[0])), key=lambda pair: -len(pair[0]))
    for value, name in likely[:MOST_VALUES]:
        secrets.register(value, name)


def load_state(path: Union[str, Path]) -> dict[str, Any]:
    """The storage state in ``path``, checked: a JSON object with ``cookies`` and ``origins``
    lists, readable by its owner only. Its values become secrets."""
    p = Path(path).expanduser()
    try:
        mode = p.stat().st_mode
        text = p.read_text(encoding="utf-8")
    except OSError as err:
        raise UsageError(f"storage state {p}: cannot be read ({err.strerror or err}); save one with --save-storage FILE") from None
    if os.name == "posix" and mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise UsageError(f"storage state {p}: other users may read it (mode {stat.S_IMODE(mode):o}); it holds log-in "
                         f"cookies: chmod 600 {p}")
    try:
        state = json.loads(text)
    except ValueError:
        raise UsageError(f"storage state {p}: not JSON (a file written by --save-storage, or Playwright's "
                         "storage_state())") from None
    return checked_state(state, f"storage state {p}")


def checked_state(state: Any, where: str = "storage state", register: bool = True) -> dict[str, Any]:
    """``state`` as a storage state (an object with ``cookies`` and ``origins`` lists), its
    values made secrets (``register``; a server registers a job's when the job runs, in its
    scope); a UsageError naming ``where`` otherwise."""
    if not isinstance(state, dict) or not isinstance(state.get("cookies", []), list) \
            or not isinstance(state.get("origins", []), list):
        raise UsageError(f"{where}: not a storage state (an object with cookies and origins lists)")
    if register:
        register_values(state)
    return {"cookies": state.get("cookies", []), "origins": state.get("origins", [])}


def check_target(path: Union[str, Path], runs_dir: Union[str, Path]) -> Path:
    """Where a storage state may be saved: not inside the runs folder, whose run folders are
    shared and shown (UsageError)."""
    p = Path(path).expanduser().resolve()
    runs = Path(runs_dir).expanduser().resolve()
    if p == runs or runs in p.parents:
        raise UsageError(f"--save-storage {path}: inside the runs folder ({runs_dir}), which is shared with whoever "
                         "reads the runs; the file holds log-in cookies: save it elsewhere")
    return p


async def save_state(context: Any, path: Union[str, Path]) -> None:
    """Write ``context``'s storage state to ``path``: mode 0600 from the first byte, replaced
    atomically; its values become secrets."""
    state = await context.storage_state()
    register_values(state)

    write_atomic(Path(path).expanduser(), json.dumps(state), mode=0o600)
