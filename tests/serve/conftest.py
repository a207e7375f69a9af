"""Fixtures for the ``owrl serve`` tests (helpers in serve_support.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pytest
from serve_support import TOKEN, Served


@pytest.fixture
def serve(tmp_path):
    """Start servers with ``serve(*args, data_dir=None, env=None, token=TOKEN)``; any left running is killed after."""
    started: list[Served] = []

    def start(*args: str, data_dir: Optional[Path] = None, env: Optional[dict] = None, token: Any = TOKEN) -> Served:
        server = Served(data_dir or tmp_path / "data", tuple(args), dict(env or {}), token)
        started.append(server.start())
        return server

    yield start
    for server in started:
        if server.proc is not None and server.proc.poll() is None:
            server.kill()
