"""The static checks run inside the test suite, so the README's one test command covers them.

ruff lints the whole repository and mypy checks ``owrl_sdk``, the plugins and ``builtin_*``
strictly, both with the settings in pyproject.toml; building the wheel prints no setuptools
warnings; no function is longer than 80 lines.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import background_checks
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


@pytest.mark.slow
def test_mypy_strict_is_clean() -> None:
    if not _module_available("mypy"):
        pytest.fail("mypy is not installed: it is in the dev extra (pip install -e '.[dev]')")
    # files, strictness and the cache folder (.mypy_cache, ignored by git) come from pyproject.toml;
    # a whole run started it beside the tests (tests/background_checks.py), else it runs here
    started = background_checks.result()
    if started is None:
        proc = _run(background_checks.COMMAND)
        started = proc.returncode, proc.stdout + proc.stderr
    returncode, output = started
    assert returncode == 0, f"mypy --strict found problems:\n{output}"


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
    wheels = list(tmp_path.glob("openwebrl_sdk-*.whl"))
    assert wheels
    import zipfile

    names = zipfile.ZipFile(wheels[0]).namelist()
    assert "owrl_sdk/py.typed" in names  # PEP 561: embedders type-check against owrl's hints
    # every source file of every import package is in the wheel: an installed owrl imports whole
    # (owrl_sdk.failures was once left out of the package list, and a pip-installed owrl failed
    # to import its own browser environment)
    roots = {"owrl_sdk": ROOT / "owrl_sdk", "builtin_tools": ROOT / "builtin_tools",
             "builtin_judges": ROOT / "builtin_judges",
             **{p.name: p for p in (ROOT / "plugins").iterdir() if (p / "__init__.py").is_file()}}
    sources = {f"{name}/{path.relative_to(root).as_posix()}" for name, root in roots.items()
               for path in root.rglob("*.py") if "__pycache__" not in path.parts}
    missing = sorted(sources - set(names))
    assert not missing, f"source files left out of the wheel (add their package to pyproject.toml): {missing}"
    metadata = zipfile.ZipFile(wheels[0]).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "Provides-Extra: scaffold" in metadata and "Provides-Extra: bench" in metadata


#: Import names whose distribution is named otherwise.
_DISTRIBUTIONS = {"PIL": "pillow", "yaml": "pyyaml", "python_multipart": "python-multipart"}


def _imported_packages() -> dict[str, set[str]]:
    """Third-party top-level packages imported anywhere in owrl's own code (every import,
    function-local ones included), with the files that import them."""
    import ast

    found: dict[str, set[str]] = {}
    for root in ("owrl_sdk", "plugins", "builtin_tools", "builtin_judges"):
        for path in (ROOT / root).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                         else [])
                for name in names:
                    top = name.split(".")[0]
                    if top not in sys.stdlib_module_names and not top.startswith(("owrl", "builtin_")):
                        found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_package_owrl_imports_is_declared() -> None:
    """A package imported by owrl's code but named in no requirement installs only by luck
    (as another package's dependency). owrl_sdk/testing.py is pytest's plugin: pytest loads it."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    declared = {re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements}
    missing = {}
    for package, files in _imported_packages().items():
        if package == "pytest" and files == {"owrl_sdk/testing.py"}:
            continue
        if _DISTRIBUTIONS.get(package, package).lower().replace("_", "-") not in declared:
            missing[package] = sorted(files)
    assert not missing, f"imported but declared in no requirement of pyproject.toml: {missing}"



#: The longest a function may be, in lines (docstring included): what a reader holds at once.
MAX_FUNCTION_LINES = 80


def test_no_function_is_longer_than_80_lines() -> None:
    """Everything outside bench/ (the SDK, the plugins, the builtins): a longer function is split
    into named steps. Nested functions count within the function that holds them."""
    import ast

    long = []
    for root in ("owrl_sdk", "plugins", "builtin_tools", "builtin_judges"):
        for path in (ROOT / root).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > MAX_FUNCTION_LINES:
                        long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


#: Where printing is the job: the CLI's output (commands, cli, console) and the docs generator's main.
_PRINTERS = ("owrl_sdk/commands/", "owrl_sdk/cli.py", "owrl_sdk/support/console.py", "owrl_sdk/docgen.py")


def test_the_library_logs_instead_of_printing() -> None:
    """Code that embeds owrl routes its messages through ``logging`` (the ``owrl.*`` loggers);
    a print() in the library would go to the embedding application's stdout."""
    import ast

    found = []
    for root in ("owrl_sdk", "plugins", "builtin_tools", "builtin_judges"):
        for path in (ROOT / root).rglob("*.py"):
            rel = str(path.relative_to(ROOT))
            if rel.startswith(_PRINTERS) or "/commands" in rel:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                    found.append(f"{rel}:{node.lineno}")
    assert not found, f"print() in library code (log under owrl.* instead): {found}"


def test_verbose_and_quiet_set_the_library_log_level() -> None:
    import logging

    from owrl_sdk.cli import main

    log = logging.getLogger("owrl")
    before = log.level
    try:
        for args, level in ((["-vv"], logging.DEBUG), (["-v"], logging.INFO), (["-q"], logging.ERROR), ([], logging.WARNING)):
            try:
                main([*args, "plugins", "--help"])  # the group's options are read before the command's help
            except SystemExit:
                pass
            assert log.level == level, args
        assert sum(type(h).__name__ == "StderrHandler" for h in log.handlers) == 1  # set up once
    finally:
        log.setLevel(before)
