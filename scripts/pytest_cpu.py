"""A pytest plugin for contributors: wall time and CPU per test file, the CPU of the whole process
tree (the Chromiums, the ``owrl`` and script subprocesses, a Ray cluster) and not only Python's.

    PYTHONPATH=scripts .venv/bin/python -m pytest -q -n 2 -p pytest_cpu

Each worker times the files it runs; at the end the controller prints the files that took the
most CPU, their wall time, and the total (see docs/development.md, "Where the time goes").
The CPU of a file is read from /proc: every live process under the worker, with what each has
collected from its ended children (a Chromium closed inside a file counts to it through its
parent). A process that leaves the tree (one that daemonises) is lost from the count.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

TICK = os.sysconf("SC_CLK_TCK")
FOLDER = Path(os.environ.get("PYTEST_CPU_DIR") or Path(tempfile.gettempdir()) / f"pytest-cpu-{os.getuid()}")
SHOWN = int(os.environ.get("PYTEST_CPU_SHOW", "25"))


def _stat(pid: str) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()  # after the command name, which may hold spaces


def tree_cpu(root: int) -> float:
    """CPU seconds of ``root`` and every live process under it, their ended children's included."""
    children: dict[int, list[tuple[int, list[str]]]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat(entry)) is not None:
            children.setdefault(int(fields[1]), []).append((int(entry), fields))
    top = _stat(str(root))
    if top is None:
        return 0.0
    ticks, todo = 0, [(root, top)]
    while todo:
        pid, fields = todo.pop()
        ticks += sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
        todo.extend(children.get(pid, []))
    return ticks / TICK


class _Files:
    def __init__(self) -> None:
        self.current: str | None = None
        self.started = self.cpu = 0.0
        self.seen: dict[str, list[float]] = {}

    def switch(self, name: str | None) -> None:
        if name == self.current:
            return
        now, cpu = time.monotonic(), tree_cpu(os.getpid())
        if self.current is not None:
            wall_cpu = self.seen.setdefault(self.current, [0.0, 0.0])
            wall_cpu[0] += now - self.started
            wall_cpu[1] += cpu - self.cpu
        self.current, self.started, self.cpu = name, now, cpu


FILES = _Files()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    FILES.switch(item.nodeid.split("::")[0])  # a module's fixtures count to the file that built them


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # the controller (or a run without xdist)
        FOLDER.mkdir(parents=True, exist_ok=True)
        for old in FOLDER.glob("*.json"):
            old.unlink()


def pytest_sessionfinish(session: pytest.Session) -> None:
    FILES.switch(None)
    if FILES.seen:
        FOLDER.mkdir(parents=True, exist_ok=True)
        (FOLDER / f"{os.getpid()}.json").write_text(json.dumps(FILES.seen))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if hasattr(terminalreporter.config, "workerinput"):
        return
    files: dict[str, list[float]] = {}
    for part in FOLDER.glob("*.json"):
        for name, (wall, cpu) in json.loads(part.read_text()).items():
            files.setdefault(name, [0.0, 0.0])
            files[name][0] += wall
            files[name][1] += cpu
    if not files:
        return
    write = terminalreporter.write_line
    write("")
    write(f"CPU per test file (process tree), the {min(SHOWN, len(files))} largest of {len(files)}:")
    write(f"{'cpu s':>8} {'wall s':>8}  file")
    for name, (wall, cpu) in sorted(files.items(), key=lambda kv: -kv[1][1])[:SHOWN]:
        write(f"{cpu:8.1f} {wall:8.1f}  {name}")
    write(f"{sum(c for _, c in files.values()):8.1f} {sum(w for w, _ in files.values()):8.1f}  all files")
