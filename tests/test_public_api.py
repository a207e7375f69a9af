"""The public API (``owrl_sdk.api``): plugins, the built-in tools and judges and the plugin
templates import only it (and ``owrl_sdk``'s own ``hookimpl``), and a change to it is a
deliberate edit of ``tests/api_snapshot.txt``."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "tests" / "api_snapshot.txt"


def test_the_api_is_as_the_snapshot_records_it():
    from owrl_sdk.docgen import api_snapshot

    assert api_snapshot() == SNAPSHOT.read_text(), (
        "owrl_sdk.api changed: if that is meant, run python -m owrl_sdk.docgen --api-snapshot, "
        "say it in CHANGELOG.md, and review tests/api_snapshot.txt's diff with the change")


def test_an_unannounced_change_to_the_api_fails_the_snapshot(monkeypatch):
    """The check can fail: a parameter added to a public function changes the snapshot."""
    from owrl_sdk import api, docgen

    original = api.load_trajectory

    def changed(path, strict=True):  # noqa: ANN001, ANN202 - a new parameter
        return original(path)

    monkeypatch.setattr(api, "load_trajectory", changed, raising=False)
    assert docgen.api_snapshot() != SNAPSHOT.read_text()
    monkeypatch.setitem(api.SECTIONS["Types"], "NewName", ("owrl_sdk.types", "Task"))
    monkeypatch.setitem(api.PUBLIC, "NewName", ("owrl_sdk.types", "Task"))
    assert "NewName" in docgen.api_snapshot()


def test_every_public_name_loads_and_nothing_else_is_offered():
    import owrl_sdk.api as api

    assert sorted(api.__all__) == sorted(api.PUBLIC)
    for name in api.__all__:
        assert getattr(api, name) is not None
    try:
        api.BrowserHost  # noqa: B018 - not public
    except AttributeError as err:
        assert "public names" in str(err)
    else:
        raise AssertionError("a name outside the API was offered")


def test_importing_the_api_loads_nothing_heavy():
    """``from owrl_sdk.api import Tool`` loads neither Playwright nor torch."""
    code = ("import sys; from owrl_sdk.api import Tool, ToolResult, Register, Settings; "
            "print(sorted(m for m in ('playwright', 'torch', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _imports_of(text: str) -> list[str]:
    """The owrl_sdk modules a file imports from (a template's Jinja lines read as text)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:  # a cookiecutter template: its import lines are plain Python
        return re.findall(r"^\s*(?:from|import)\s+(owrl_sdk[\w.]*)", text, re.M)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names]
    return [m for m in found if m == "owrl_sdk" or m.startswith("owrl_sdk.")]


def test_plugins_builtins_and_templates_import_only_the_public_api():
    roots = [ROOT / "plugins", *ROOT.glob("builtin_*"), ROOT / "templates"]
    wrong = {}
    for root in roots:
        for path in root.rglob("*.py"):
            bad = [m for m in _imports_of(path.read_text()) if m not in ("owrl_sdk", "owrl_sdk.api")]
            if bad:
                wrong[str(path.relative_to(ROOT))] = bad
    assert not wrong, f"import from owrl_sdk.api instead: {wrong}"


def test_a_plugin_generated_by_owrl_new_imports_only_the_public_api(tmp_path):
    from owrl_cli import owrl

    for kind in ("tool", "judge", "site-adapter"):
        out = owrl("new", kind, "acme", "--out", str(tmp_path / kind))
        assert out.returncode == 0, out.stderr
        files = list((tmp_path / kind).rglob("*.py"))
        assert files
        for path in files:
            assert all(m in ("owrl_sdk", "owrl_sdk.api") for m in _imports_of(path.read_text())), path
