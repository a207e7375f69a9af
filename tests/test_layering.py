"""Layering: the core imports no plugin, plugins do not import each other, and flows play
with the core alone.

The import rules are the contracts in ``.importlinter`` (checked by import-linter's
``lint-imports``). Flows are a core document and their player (``owrl_sdk.flowplayer``) a
default plugin, so ``owrl run --flow`` and the ``owrl_run_flow`` fixture work with no
entry-point plugin loaded (``OWRL_LOAD_PLUGINS=""``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from owrl_cli import owrl

from owrl_sdk.flowplayer import FLOW_POLICY
from owrl_sdk.plugins import Plugins, build_plugin_manager

ROOT = Path(__file__).resolve().parent.parent

PAGE = """<!doctype html><title>Layers</title>
<h1>Layers</h1>
<button onclick="document.querySelector('#out').textContent = 'pressed'">Press</button>
<p id="out">not yet</p>"""

TURNS: list[dict[str, Any]] = [
    {"thought": "press it", "calls": [{"name": "click", "arguments": {"selector": "button"},
                                       "expect": {"text_visible": "pressed"}}]},
    {"calls": [{"name": "done", "arguments": {"response": "pressed"}}]},
]


def test_import_contracts_are_kept() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    if not lint.exists():
        pytest.fail("import-linter is not installed: it is in the dev extra (pip install -e '.[dev]')")
    # the root packages are found as installed (the editable install maps plugins/ too)
    proc = subprocess.run([str(lint), "--no-cache", "--config", str(ROOT / ".importlinter")], cwd=ROOT,
                          capture_output=True, text=True, timeout=240, env={**os.environ, "NO_COLOR": "1"})
    assert proc.returncode == 0, f"lint-imports found a broken contract:\n{proc.stdout}{proc.stderr}"
    assert "broken" in proc.stdout and " 0 broken" in proc.stdout


def test_no_entry_point_plugins_still_has_the_flow_player() -> None:
    plugins = Plugins(build_plugin_manager(environ={"OWRL_LOAD_PLUGINS": ""}))
    assert all(default for default, _, _ in plugins.pm.origins.values())  # the defaults only
    assert FLOW_POLICY in plugins.catalogue.names("policies")
    assert plugins.catalogue.owners[("policies", FLOW_POLICY)] == "owrl_sdk.flowplayer"


def test_owrl_run_flow_without_entry_point_plugins(tmp_path: Path, owrl_page_server: Any) -> None:
    url = owrl_page_server({"/": PAGE})
    flow = tmp_path / "flow.json"
    flow.write_text(json.dumps({"schema": "owrl.flow/1", "task": "Press the button", "start_url": url,
                                "turns": TURNS}), encoding="utf-8")
    out = owrl("run", "--flow", str(flow), "--json", "--out", str(tmp_path / "runs"), cwd=tmp_path,
               env={"OWRL_LOAD_PLUGINS": ""})
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["outcome"] == {"status": "success", "answer": "pressed", "failure": None}
    assert result["steps"] == 2
    trajectory = json.loads((Path(result["run_dir"]) / "trajectory.json").read_text(encoding="utf-8"))
    assert trajectory["policy"]["name"] == FLOW_POLICY


@pytest.fixture
def owrl_plugins() -> Plugins:
    """The fixtures' plugins with no entry-point plugin: what ``OWRL_LOAD_PLUGINS=""`` loads."""
    return Plugins(build_plugin_manager(environ={"OWRL_LOAD_PLUGINS": ""}))


def test_the_run_flow_fixture_without_entry_point_plugins(owrl_plugins: Plugins, owrl_page_server: Any,
                                                          owrl_run_flow: Any) -> None:
    assert not any(name in owrl_plugins.catalogue.names("memories") for name in ("default", "crop"))
    url = owrl_page_server({"/": PAGE})
    trajectory = owrl_run_flow(TURNS, url)
    assert trajectory.outcome.status == "success", trajectory.outcome
    assert trajectory.outcome.answer == "pressed"
    assert [r.verdict.ok for r in trajectory.steps[0].calls if r.verdict is not None] == [True]


def test_a_plugin_scheme_is_the_one_a_resolve_url_hook_resolves(owrl_plugins: Plugins, owrl_register_plugin: Any) -> None:
    from owrl_sdk.urls import plugin_scheme, resolve_url
    from owrl_sdk.errors import UsageError
    from owrl_sdk.plugins import hookimpl

    class Mine:
        @hookimpl
        def resolve_url(self, url: str) -> Any:
            return "http://127.0.0.1:1/" + url[len("mine:"):] if url.startswith("mine:") else None

    with pytest.raises(UsageError, match="not a valid address"):  # nobody resolves it yet
        resolve_url("mine:shop", given_as="--url", plugins=owrl_plugins)
    owrl_register_plugin(Mine())
    assert plugin_scheme("mine:shop", owrl_plugins)
    assert resolve_url("mine:shop", given_as="--url", plugins=owrl_plugins) == "mine:shop"  # for the hook
    assert not plugin_scheme("localhost:8000", owrl_plugins)
    assert resolve_url("localhost:8000/x", plugins=owrl_plugins) == "https://localhost:8000/x"
    assert resolve_url("about:blank", plugins=owrl_plugins) == "about:blank"
    # without plugins to ask: a scheme that is not the web's, a browser's or file's, and not a port
    assert plugin_scheme("mine:shop") and not plugin_scheme("example.com:8080") and not plugin_scheme("https://x")
