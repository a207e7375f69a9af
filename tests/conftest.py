from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

# the suites' tables (security attacks, injected faults) are printed by the process that
# reports, which under pytest-xdist is not the one that ran the tests: their modules are
# importable here, and the rows travel in the reports (see pytest_runtest_makereport)
for _folder in ("security", "faults"):
    if str(Path(__file__).parent / _folder) not in sys.path:
        sys.path.insert(0, str(Path(__file__).parent / _folder))

# On a pytest-xdist worker the cores are shared with the other workers: torch (OpenMP) gets its
# share of them, not all, so its threads do not spin against each other's. Measured on 2 cores
# with two workers: the training tests took 94 s with two threads per worker, 58 s with one.
# Set before anything imports torch; subprocesses (owrl run with a tiny model) inherit it.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    os.environ.setdefault("OMP_NUM_THREADS",
                          str(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))))

# Persistent state (the host blocklist) goes to a throwaway folder, for subprocesses too.
os.environ["OWRL_STATE_DIR"] = tempfile.mkdtemp(prefix="owrl-state-")

import background_checks  # noqa: E402 - tests/ is on the path (pyproject.toml)
from owrl_sdk.config import Settings  # noqa: E402 - after OWRL_STATE_DIR is set
from owrl_sdk.contract.plugins import Plugins  # noqa: E402


@pytest.fixture
def settings() -> Settings:
    return Settings()


@pytest.fixture
def plugins(owrl_plugins) -> Plugins:
    """A fresh plugin manager per test: owrl's own fixture (owrl_sdk.testing), by a shorter name."""
    return owrl_plugins


@pytest.fixture
def register_plugin(owrl_register_plugin):
    """Register a throwaway plugin for one test; it is unregistered afterwards."""
    return owrl_register_plugin


# ---------------------------------------------------------------- the tables, under xdist too


_ON_WORKER = False


def pytest_configure(config: Any) -> None:
    global _ON_WORKER
    _ON_WORKER = hasattr(config, "workerinput")
    background_checks.start(config)  # mypy beside the tests, on the leading process only


def pytest_unconfigure(config: Any) -> None:
    background_checks.stop()


def _tables() -> dict[str, tuple[list, type]]:
    import fault_support
    import security_support

    return {"owrl_security_row": (security_support.ROWS, security_support.Row),
            "owrl_fault_row": (fault_support.ROWS, fault_support.FaultRow)}


#: How many of each table's rows this worker has sent: the rows stay where they were made, for
#: the tests that read the whole table at the end of their module (the fault table's summary).
_SENT: dict[str, int] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Any:
    """On an xdist worker, the rows a test added leave with its teardown report."""
    outcome = yield
    report = outcome.get_result()
    if report.when == "teardown" and _ON_WORKER:
        for key, (rows, _) in _tables().items():
            report.user_properties.extend((key, asdict(row)) for row in rows[_SENT.get(key, 0):])
            _SENT[key] = len(rows)


def pytest_runtest_logreport(report: Any) -> None:
    """On the process that reports (xdist's controller), the rows the workers sent."""
    if _ON_WORKER or not getattr(report, "user_properties", None) or report.when != "teardown":
        return
    tables = _tables()
    for key, value in report.user_properties:
        if key in tables and isinstance(value, dict):
            rows, row_type = tables[key]
            rows.append(row_type(**value))


def pytest_terminal_summary(terminalreporter: Any, config: Any) -> None:
    if _ON_WORKER:
        return
    from fault_support import print_table as print_faults
    from security_support import print_table as print_attacks

    print_attacks(terminalreporter)
    print_faults(terminalreporter)


# ---------------------------------------------------------------- the order, on two workers


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """Under pytest-xdist, the files holding the most ``slow`` tests come first.

    The suite runs with ``--dist loadfile`` (``pyproject.toml``): a file goes whole to one worker,
    so a module's fixtures (a Ray cluster, the demo shop's replayed oracles) are built once and
    its tests keep their order. A worker takes the next file when it is done with one; with the
    heaviest files handed out first, the run does not end with one worker still in a long file
    while the other waits. Each worker collects, so the order must be the same on all of them:
    it is computed from the marks alone. A serial run keeps the files' own order.
    """
    if not hasattr(config, "workerinput"):
        return
    slow: dict[str, int] = {}
    for item in items:
        slow[item.nodeid.split("::")[0]] = slow.get(item.nodeid.split("::")[0], 0) + bool(
            item.get_closest_marker("slow"))
    rank = {path: i for i, path in enumerate(sorted(slow, key=lambda p: -slow[p]))}  # stable: ties keep file order
    items.sort(key=lambda item: rank[item.nodeid.split("::")[0]])


# ---------------------------------------------------------------- no browser left behind

@pytest.fixture(scope="module", autouse=True)
def _no_browser_left_behind(request: Any) -> Any:
    """A test file that leaves a Chromium running fails here, at its own end, not in a later
    file's check for stray processes (on a worker, files follow each other in any order)."""
    from session_browsers import HOSTS, browser_processes

    before = browser_processes(HOSTS)
    yield
    import time

    deadline = time.monotonic() + 5.0  # a browser being closed may take a moment to exit
    left = browser_processes(HOSTS) - before
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = browser_processes(HOSTS) - before
    if left:
        pytest.fail(f"{request.module.__name__} left {len(left)} Chromium processes running (pids "
                    f"{sorted(left)}): close every browser it launches, on every path", pytrace=False)
