"""The lock: what ``scripts/setup.sh`` installs is what the suite was last green with.

``requirements/lock-pyXY.txt`` pins every distribution that setup installs, as pip
constraints. These tests read the venv the suite runs in: each package the project needs
(with the extras setup installs, followed through their own requirements) is named in the
lock, and at the version the lock names. A dependency added to pyproject.toml without a
refresh of the lock, or a venv set up before the lock changed, fails here with what to run.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import sys
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
TAG = "%d%d" % sys.version_info[:2]
LOCK = ROOT / "requirements" / f"lock-py{TAG}.txt"
REFRESH = os.environ.get("OWRL_LOCK") == "none"  # scripts/refresh_lock.py: the newest versions, on purpose


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins() -> dict[str, str]:
    out = {}
    for line in LOCK.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            out[norm(name)] = version
    return out


def setup_extras() -> list[str]:
    (extras,) = re.findall(r'-e "\.\[([a-z,]+)\]"', (ROOT / "scripts" / "setup.sh").read_text())
    return extras.split(",")


def needed(project: str, extras: list[str]) -> set[str]:
    """The distributions ``project[extras]`` needs on this machine, transitively, as installed."""
    seen: set[str] = set()
    todo: list[tuple[str, tuple[str, ...]]] = [(project, tuple(extras))]
    while todo:
        name, wanted = todo.pop()
        for raw in md.requires(name) or []:
            req = Requirement(raw)
            if req.marker and not any(req.marker.evaluate({**default_environment(), "extra": e})
                                      for e in (wanted or ("",))):
                continue
            key = norm(req.name)
            if key not in seen:
                seen.add(key)
                todo.append((req.name, tuple(req.extras)))
    return seen


def installed() -> dict[str, str]:
    return {norm(d.metadata["Name"]): d.version.split("+", 1)[0] for d in md.distributions()}


def test_setup_has_a_lock_for_the_python_ci_runs():
    assert LOCK.is_file(), f"no lock for Python {TAG}: run python3 scripts/refresh_lock.py"
    locked = pins()
    assert all(re.fullmatch(r"[0-9][0-9A-Za-z.!]*", v) for v in locked.values()), "exact versions only"
    # torch is pinned by setup.sh itself too; the lock must agree with it
    assert locked["torch"] == re.search(r'"torch==([\d.]+)"', (ROOT / "scripts" / "setup.sh").read_text()).group(1)


@pytest.mark.skipif(REFRESH, reason="OWRL_LOCK=none: a lock refresh runs the suite on the newest versions")
def test_every_package_the_project_needs_is_installed_at_the_locked_version():
    locked, have = pins(), installed()
    missing, differ = [], []
    for name in sorted(needed("openwebrl-sdk", setup_extras())):
        if name not in locked:
            missing.append(f"{name}=={have.get(name, '?')}")
        elif have.get(name) != locked[name]:
            differ.append(f"{name}: installed {have.get(name)}, locked {locked[name]}")
    assert not missing, (f"not in {LOCK.name} (a dependency added without a refresh): {missing}; "
                         "run python3 scripts/refresh_lock.py")
    assert not differ, f"this venv differs from {LOCK.name}: {differ}; run bash scripts/setup.sh"


def test_the_needed_set_follows_extras_and_markers():
    """The walk itself: an extra's packages count, a marker for another platform does not."""
    every = needed("openwebrl-sdk", setup_extras())
    core = needed("openwebrl-sdk", [])
    assert {"playwright", "pluggy", "jsonschema"} <= core
    assert "torch" not in core and "torch" in every and "pytest-xdist" in every
    assert "tomli" not in core or sys.version_info < (3, 11)  # tomli; python_version < '3.11'
