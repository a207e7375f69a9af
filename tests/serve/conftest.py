"""Fixtures for the ``owrl serve`` tests (helpers in serve_support.py)."""

from __future__ import annotations

import pytest
from serve_support import servers


@pytest.fixture
def serve(tmp_path):
    """Start servers with ``serve(*args, data_dir=None, env=None, token=TOKEN)``; any left running is killed after."""
    yield from servers(tmp_path)
