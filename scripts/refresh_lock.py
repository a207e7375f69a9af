#!/usr/bin/env python3
"""Refresh the lock on purpose: the newest versions pyproject.toml allows, tested first.

    python3 scripts/refresh_lock.py [--workdir DIR] [--keep] [--pytest-args "-q -n 3"]

1. clones this checkout into a fresh folder and lays its working tree over the clone
   (tracked files and untracked ones git does not ignore): nothing of this checkout's
   ``.venv`` is reused;
2. runs ``scripts/setup.sh`` there with ``OWRL_LOCK=none``: every package at the newest
   version the ranges of pyproject.toml allow (torch stays the 2.13.0 that setup.sh names);
3. runs the README's test command there;
4. writes what it found to ``requirements/last-refresh.md`` (the date, the Python, the
   suite's summary line and its failures, every version that differs from the lock), and
   rewrites ``requirements/lock-pyXY.txt`` only when the suite passed.

The exit status is the suite's. Standard library only: it runs before any venv exists.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEST_COMMAND = ".venv/bin/python -m pytest"


def lock_path(python_tag: str) -> Path:
    return ROOT / "requirements" / f"lock-py{python_tag}.txt"


def read_lock(path: Path) -> dict[str, str]:
    """``{normalised name: version}`` of a lock file (comments and blank lines skipped)."""
    pins: dict[str, str] = {}
    if not path.is_file():
        return pins
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[normalise(name)] = version.strip()
    return pins


def normalise(name: str) -> str:
    """A distribution's name as the lock spells it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name.strip()).lower()


def frozen(venv_python: Path) -> dict[str, str]:
    """What a venv holds, with local version labels dropped (``torch==2.13.0+cpu`` ->
    ``2.13.0``: a constraint without a label admits every build of that version)."""
    out = subprocess.run([str(venv_python), "-m", "pip", "freeze", "--all", "--exclude-editable"],
                         capture_output=True, text=True, check=True).stdout
    pins = {}
    for line in out.splitlines():
        if "==" in line and not line.startswith("-e"):
            name, _, version = line.partition("==")
            pins[normalise(name)] = version.split("+", 1)[0].strip()
    return pins


def write_lock(path: Path, pins: dict[str, str], python: str, summary: str, when: str) -> None:
    head = [
        "# The versions the test suite was last green with, for this Python; scripts/setup.sh",
        "# installs them as pip constraints. Do not edit by hand: scripts/refresh_lock.py",
        "# resolves the newest versions pyproject.toml allows, runs the suite on them and",
        "# rewrites this file only when it passes (see docs/development.md, 'The lock').",
        f"# Python {python}, {when}: {summary}",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(head + [f"{name}=={pins[name]}" for name in sorted(pins)]) + "\n")


def differences(old: dict[str, str], new: dict[str, str]) -> list[str]:
    lines = []
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        if a != b:
            lines.append(f"- {name}: {a or '(not in the lock)'} -> {b or '(no longer installed)'}")
    return lines


def copy_tree(dest: Path) -> None:
    """A clone of this checkout's history with its working tree laid over it (uncommitted
    changes included: the refresh tests the tree that will carry the lock)."""
    subprocess.run(["git", "clone", "-q", str(ROOT), str(dest)], check=True)
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    for raw in filter(None, listed):
        src = ROOT / os.fsdecode(raw)
        if src.is_file():
            target = dest / os.fsdecode(raw)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)


def run_logged(cmd: list[str], cwd: Path, log: Path, env: dict[str, str]) -> tuple[int, str]:
    """Run ``cmd``, its output to ``log``; a line of progress every minute. Returns the exit
    status and the last line that looks like pytest's summary."""
    started = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env)
        while proc.poll() is None:
            time.sleep(5)
            if int(time.monotonic() - started) % 60 < 5:
                print(f"  ... {int(time.monotonic() - started)} s", file=sys.stderr, flush=True)
    text = log.read_text(errors="replace")
    summary = [line for line in text.splitlines() if re.search(r"\b(passed|failed|error)\b.* in [\d.]+s", line)]
    return proc.returncode, (summary[-1].strip("= ") if summary else "no summary line")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, help="where to copy the tree (default: a new temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the copy and its .venv afterwards")
    parser.add_argument("--pytest-args", default="-q -n 3", help="the test command's arguments (the README's)")
    args = parser.parse_args(argv)
    base = args.workdir or Path(tempfile.mkdtemp(prefix="owrl-refresh-"))
    work = base / "owrl"
    if work.exists():
        parser.error(f"{work} exists: give an empty --workdir")
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or "unknown"
    dirty = bool(subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout)
    try:
        print(f"copying the tree to {work}", file=sys.stderr)
        copy_tree(work)
        env = {**os.environ, "OWRL_LOCK": "none"}
        print("scripts/setup.sh with OWRL_LOCK=none (the newest allowed versions)", file=sys.stderr)
        rc, _ = run_logged(["bash", "scripts/setup.sh"], work, base / "setup.log", env)
        if rc != 0:
            print((base / "setup.log").read_text()[-3000:], file=sys.stderr)
            print(f"setup failed ({rc}); the lock is unchanged", file=sys.stderr)
            return rc
        venv_python = work / ".venv" / "bin" / "python"
        python = subprocess.run([str(venv_python), "-c", "import platform; print(platform.python_version())"],
                                capture_output=True, text=True, check=True).stdout.strip()
        tag = "".join(python.split(".")[:2])
        new = frozen(venv_python)
        old = read_lock(lock_path(tag))
        cmd = shlex.split(TEST_COMMAND) + shlex.split(args.pytest_args)
        print(f"the suite: {' '.join(cmd)} (about 15 minutes on 2 cores)", file=sys.stderr)
        started = time.monotonic()
        # OWRL_LOCK=none tells tests/test_lock.py that this venv is meant to differ from the lock
        rc, summary = run_logged(cmd, work, base / "tests.log", env)
        minutes = (time.monotonic() - started) / 60
        failures = [line for line in (base / "tests.log").read_text(errors="replace").splitlines()
                    if line.startswith(("FAILED ", "ERROR "))]
        green = rc == 0
        if green:
            write_lock(lock_path(tag), new, python, summary, when)
        report = [
            "# The last lock refresh",
            "",
            "Written by `python3 scripts/refresh_lock.py` (see docs/development.md, 'The lock').",
            "",
            f"- when: {when}",
            f"- tree: {commit}{' with uncommitted changes' if dirty else ''}",
            f"- Python: {python}",
            f"- the suite (`{' '.join(cmd)}`, {minutes:.1f} min): {summary}",
            f"- the lock `requirements/lock-py{tag}.txt`: "
            + ("rewritten with these versions" if green else "left as it was (the suite did not pass)"),
            "",
            "## Versions that differ from the lock it started from",
            "",
            *(differences(old, new) or ["- none"]),
        ]
        if failures:
            report += ["", "## Failures", "", *[f"- `{line}`" for line in failures]]
        (ROOT / "requirements").mkdir(exist_ok=True)
        (ROOT / "requirements" / "last-refresh.md").write_text("\n".join(report) + "\n")
        print("\n".join(report), file=sys.stderr)
        return rc
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
