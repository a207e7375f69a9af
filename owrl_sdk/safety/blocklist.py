"""Hosts that failed with network errors, blocked for a while (SQLite, one small file).

Training samples no task whose start host is blocked, so a dead site is not practised
again and again as if the model were failing it. Entries expire after ``ttl`` seconds
(default 24 h). ``owrl blocklist list|clear`` shows and empties it. Loopback hosts
(127.0.0.0/8, ::1, localhost) are never blocked.
"""

from __future__ import annotations

import ipaddress
import sqlite3
import time
from pathlib import Path
from typing import Optional, Union
from urllib.parse import urlsplit

from owrl_sdk.support.dirs import state_dir

DEFAULT_TTL = 24 * 3600


def default_path() -> Path:
    return state_dir() / "blocklist.sqlite"


def host_of(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


def is_loopback(host: str) -> bool:
    host = host.lower().strip("[]")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Blocklist:
    def __init__(self, path: Union[str, Path, None] = None, ttl: float = DEFAULT_TTL):
        self.path = Path(path) if path is not None else default_path()
        self.ttl = ttl
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._db() as db:
            db.execute("CREATE TABLE IF NOT EXISTS blocked (host TEXT PRIMARY KEY, until REAL, reason TEXT, failures INTEGER)")

    def _db(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=10)

    def add(self, host: str, reason: str, now: Optional[float] = None) -> None:
        """Block ``host`` for ``ttl`` seconds. This machine's own addresses are never blocked:
        a local server that is down is the user's to restart, not a site to avoid for a day."""
        if not host or is_loopback(host):
            return
        now = time.time() if now is None else now
        with self._db() as db:
            db.execute(
                "INSERT INTO blocked VALUES (?, ?, ?, 1) ON CONFLICT(host) DO UPDATE SET "
                "until = excluded.until, reason = excluded.reason, failures = failures + 1",
                (host.lower(), now + self.ttl, reason[:300]))

    def blocked(self, host: str, now: Optional[float] = None) -> bool:
        now = time.time() if now is None else now
        with self._db() as db:
            row = db.execute("SELECT until FROM blocked WHERE host = ?", (host.lower(),)).fetchone()
        return row is not None and row[0] > now

    def entries(self, now: Optional[float] = None) -> list[tuple[str, float, str, int]]:
        now = time.time() if now is None else now
        with self._db() as db:
            return db.execute("SELECT host, until, reason, failures FROM blocked WHERE until > ? ORDER BY host",
                              (now,)).fetchall()

    def clear(self, host: Optional[str] = None) -> int:
        with self._db() as db:
            if host:
                return db.execute("DELETE FROM blocked WHERE host = ?", (host.lower(),)).rowcount
            return db.execute("DELETE FROM blocked").rowcount
