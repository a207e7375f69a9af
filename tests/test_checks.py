"""The static checks run inside the test suite, so the README's one test command covers them.

ruff lints the whole repository and mypy checks ``owrl_sdk`` strictly, both with the settings
in pyproject.toml; building the wheel prints no setuptools warnings.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(args: list[str], cwd: Path = ROOT, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "PYTHONWARNINGS": ""}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _module_available(name: str) -> bool:
    return _run([sys.executable, "-c", f"import {name}"]).returncode == 0


def test_ruff_is_clean() -> None:
    if not _module_available("ruff"):
        pytest.fail("ruff is not installed: it is in the dev extra (pip install -e '.[dev]')")
    proc = _run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."])
    assert proc.returncode == 0, f"ruff found problems:\n{proc.stdout}{proc.stderr}"


def test_mypy_strict_is_clean() -> None:
    if not _module_available("mypy"):
        pytest.fail("mypy is not installed: it is in the dev extra (pip install -e '.[dev]')")
    # files, strictness and the cache folder (.mypy_cache, ignored by git) come from pyproject.toml
    proc = _run([sys.executable, "-m", "mypy", "--no-error-summary", "--no-color-output"])
    assert proc.returncode == 0, f"mypy --strict found problems:\n{proc.stdout}{proc.stderr}"


def test_building_the_wheel_prints_no_setuptools_warnings(tmp_path: Path) -> None:
    # --no-build-isolation: the venv's setuptools, no download; the wheel goes to a temporary folder
    proc = _run(
        [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation", "--no-cache-dir", "-w", str(tmp_path)],
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    output = proc.stdout + proc.stderr
    warnings = [line.strip() for line in output.splitlines() if re.search(r"warning", line, re.IGNORECASE)]
    assert not warnings, "building the wheel printed warnings:\n" + "\n".join(warnings) + "\n\n" + output
    assert list(tmp_path.glob("openwebrl_sdk-*.whl"))
