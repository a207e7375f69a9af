"""Fixtures of the fault-injection suite. Its table is printed in the terminal summary by
tests/conftest.py (fault_support.print_table).

The table is written through the terminal reporter, so it shows in CI output with or
without ``-s``. Each fault launches a Chromium of its own (see fault_support.run_fault), so
tests here need no shared browser and run in their own event loops.
"""

from __future__ import annotations

from typing import Any

import pytest

from fault_support import start_server


@pytest.fixture(scope="session")
def fault_site() -> Any:
    """Base URL of the faulty site, served on 127.0.0.1 by a threaded HTTP server."""
    server, base = start_server()
    yield base
    server.shutdown()
    server.server_close()
