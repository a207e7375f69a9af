"""SIGTERM read as Ctrl-C: what systemd, Kubernetes and ``kill`` send to stop a command.

:func:`install` (called by the CLI's ``main``) makes SIGTERM raise the SIGINT that Ctrl-C
raises, so every command stops the way it does on Ctrl-C: a batch writes its summary and
releases its lock, a run writes its folder. The command then exits 143 (128 + 15, the code a
process killed by SIGTERM reports) instead of 130, so a supervisor sees what stopped it.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

_terminated = False


def _on_sigterm(signum: int, frame: Any) -> None:
    global _terminated
    _terminated = True
    signal.raise_signal(signal.SIGINT)


def install() -> None:
    """Read SIGTERM as Ctrl-C from now on (main thread only; elsewhere signals cannot be set)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)


def requested() -> bool:
    """Whether SIGTERM arrived: sticky, for work that must stop even where the cancellation
    the signal caused was lost (Python 3.11's ``wait_for`` can drop one that arrives as its
    inner task ends, and the work would then run on to its end)."""
    return _terminated


def exit_code() -> int:
    """The exit code of a command that was interrupted: 143 after SIGTERM, 130 after Ctrl-C."""
    return 143 if _terminated else 130
