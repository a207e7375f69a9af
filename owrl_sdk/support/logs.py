"""The one log handler owrl installs itself: stderr as it is when a record is written (a test's
or an application's replacement of ``sys.stderr`` is followed), for the CLI's ``-v``/``-q``
and the hook trace. The library only logs under ``owrl.*``; routing is the application's."""

from __future__ import annotations

import logging
import sys
from typing import Any


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A StreamHandler on whatever ``sys.stderr`` is at each record."""

    def __init__(self, fmt: str = "%(message)s") -> None:
        super().__init__(sys.stderr)
        self.setFormatter(logging.Formatter(fmt))

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:  # StreamHandler assigns it; the current stderr always wins
        pass
