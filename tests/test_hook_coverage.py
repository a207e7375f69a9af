"""Every hook spec must be exercised by a test that says so with @pytest.mark.exercises."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from owrl_sdk.contract import hookspecs

TESTS = Path(__file__).parent


def spec_names() -> set[str]:
    return {
        name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
        if hasattr(fn, "owrl_spec")
    }


def exercised() -> set[str]:
    found: set[str] = set()
    for path in TESTS.rglob("test_*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "exercises"):
                found |= {a.value for a in node.args if isinstance(a, ast.Constant)}
    return found


def test_every_hook_has_a_test():
    missing = spec_names() - exercised()
    assert not missing, f"hook specs with no test marked @pytest.mark.exercises: {sorted(missing)}"


def test_marks_name_real_hooks():
    unknown = exercised() - spec_names()
    assert not unknown, f"tests claim to exercise hooks that do not exist: {sorted(unknown)}"


def test_every_hook_is_documented():
    for name in spec_names():
        doc = inspect.getdoc(getattr(hookspecs, name)) or ""
        assert "Called" in doc, f"hook {name} does not say when it is called"
