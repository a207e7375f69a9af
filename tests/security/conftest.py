"""The security suite's table of attacks in the terminal summary (see security_support)."""

from __future__ import annotations

from typing import Any

from security_support import ROWS, table


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not ROWS:
        return
    terminalreporter.section("security: attacks tried")
    for line in table(ROWS):
        terminalreporter.write_line(line)
    held = sum(r.held for r in ROWS)
    terminalreporter.write_line(f"{len(ROWS)} attacks: {held} stopped, {len(ROWS) - held} got through")
