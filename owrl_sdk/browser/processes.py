"""The browser's process tree, read from /proc, so that no Chromium outlives its host.

Only Linux has /proc; elsewhere these functions find nothing and the host relies on
Playwright closing its browser (its driver kills the browser when Python goes away).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Optional

PROC = Path("/proc")


def _stat(pid: int) -> Optional[list[str]]:
    try:
        raw = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # the command name sits in parentheses and may itself hold spaces or ')'
    _, _, rest = raw.rpartition(")")
    return rest.split()


def start_time(pid: int) -> Optional[int]:
    """The process's start time in clock ticks since boot (tells a reused pid apart)."""
    fields = _stat(pid)
    return int(fields[19]) if fields and len(fields) > 19 else None


def alive(pid: int, started: Optional[int] = None) -> bool:
    """Whether ``pid`` runs (a zombie does not) and, if given, started at ``started``."""
    fields = _stat(pid)
    if not fields or fields[0] in ("Z", "X"):
        return False
    return started is None or start_time(pid) == started


def children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    if not PROC.is_dir():
        return children
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat(int(entry.name))
        if fields and len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def descendants(pid: int, tree: Optional[dict[int, list[int]]] = None) -> list[int]:
    tree = children_map() if tree is None else tree
    found, todo = [], list(tree.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo.extend(tree.get(child, []))
    return found


def command_name(pid: int) -> str:
    try:
        return (PROC / str(pid) / "comm").read_text().strip()
    except OSError:
        return ""


def group_members(pgid: int, not_before: Optional[int] = None) -> list[int]:
    """Running processes of process group ``pgid`` (started no earlier than ``not_before``)."""
    members: list[int] = []
    if not PROC.is_dir():
        return members
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat(int(entry.name))
        if not fields or len(fields) < 20 or fields[0] in ("Z", "X") or int(fields[2]) != pgid:
            continue
        if not_before is None or int(fields[19]) >= not_before:
            members.append(int(entry.name))
    return members


def kill_tree(pid: int, started: Optional[int] = None) -> list[int]:
    """SIGKILL ``pid`` (if it is still the process that started at ``started``) and its descendants.

    When ``pid`` is already gone, what is left of its process group (orphaned children that
    started after it) is killed instead. Returns the pids signalled."""
    if not alive(pid, started):
        victims = group_members(pid, started) if started is not None else []
        for victim in victims:
            try:
                os.kill(victim, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        return victims
    victims = [pid, *descendants(pid)]
    try:  # Playwright starts the browser as leader of its own process group
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for victim in victims:
        try:
            os.kill(victim, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return victims
