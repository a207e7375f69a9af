"""Fixtures of the fault-injection suite, and its table in the terminal summary.

The table is written through the terminal reporter, so it shows in CI output with or
without ``-s``. Each fault launches a Chromium of its own (see fault_support.run_fault), so
tests here need no shared browser and run in their own event loops.
"""

from __future__ import annotations

from typing import Any

import pytest

from fault_support import ROWS, start_server, table


@pytest.fixture(scope="session")
def fault_site() -> Any:
    """Base URL of the faulty site, served on 127.0.0.1 by a threaded HTTP server."""
    server, base = start_server()
    yield base
    server.shutdown()
    server.server_close()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not ROWS:
        return
    terminalreporter.section("fault injection")
    for line in table(ROWS):
        terminalreporter.write_line(line)
    wrong = sum(1 for r in ROWS if not r.classified_right)
    broken = sum(1 for r in ROWS if not r.trajectory_intact)
    left = sum(r.processes_left for r in ROWS)
    terminalreporter.write_line(
        f"{len(ROWS)} faults: {len(ROWS) - wrong} classified right, {len(ROWS) - broken} trajectories intact, "
        f"{left} browser processes left"
    )
    for r in ROWS:
        if not (r.classified_right and r.trajectory_intact) or r.processes_left:
            terminalreporter.write_line(f"  {r.fault}: {r.note}")
        elif r.remark:
            terminalreporter.write_line(f"  {r.fault}: {r.remark} ({r.seconds:.1f} s)")
