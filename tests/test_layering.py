"""Layering: the core imports no plugin, plugins do not import each other, and flows play
with the core alone.

The import rules are the contracts in ``.importlinter`` (checked by import-linter's
``lint-imports``). Flows are a core document and their player (``owrl_sdk.flows.flowplayer``) a
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

from owrl_sdk.flows.flowplayer import FLOW_POLICY
from owrl_sdk.contract.plugins import Plugins, build_plugin_manager

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
    # its exit status says it (its wording is import-linter's own, not owrl's to pin)
    assert proc.returncode == 0, f"lint-imports found a broken contract:\n{proc.stdout}{proc.stderr}"


def test_no_entry_point_plugins_still_has_the_flow_player() -> None:
    plugins = Plugins(build_plugin_manager(environ={"OWRL_LOAD_PLUGINS": ""}))
    assert all(default for default, _, _ in plugins.pm.origins.values())  # the defaults only
    assert FLOW_POLICY in plugins.catalogue.names("policies")
    assert plugins.catalogue.owners[("policies", FLOW_POLICY)] == "owrl_sdk.flows.flowplayer"


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
    from owrl_sdk.rules.urls import plugin_scheme, resolve_url
    from owrl_sdk.errors import UsageError
    from owrl_sdk.contract.plugins import hookimpl

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


# ------------------------------------------------------------------ import cycles


def _packages() -> dict[str, Path]:
    """Every package of the tree (the core, the built-in plugins, ``plugins/*``) by name."""
    found = {name: ROOT / name for name in ("owrl_sdk", "builtin_tools", "builtin_judges")}
    found.update({d.name: d for d in sorted((ROOT / "plugins").iterdir()) if (d / "__init__.py").exists()})
    return found


def _modules() -> dict[str, Path]:
    modules = {}
    for name, folder in _packages().items():
        for path in folder.rglob("*.py"):
            parts = (name, *path.relative_to(folder).with_suffix("").parts)
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _source(module: str, node: Any, path: Path) -> str:
    """The module a ``from ... import`` statement of ``module`` (file ``path``) reads from,
    its dots resolved."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = ".".join(package[:len(package) - node.level + 1]) if node.level else ""
    return ".".join(p for p in (base, node.module or "") if p)


def import_graph(type_checking: bool = True) -> dict[str, set[str]]:
    """Module -> the modules of the tree it imports: module-level and function-local imports
    alike, and those under ``if TYPE_CHECKING:`` too (a circle a type checker walks is one a
    reader walks; ``type_checking=False`` leaves them out). ``from pkg import name`` counts the
    submodule ``pkg.name`` when there is one, else ``pkg``. An import from a module's own parent
    package counts too: a package whose ``__init__`` imports the submodule that imports it back
    is a cycle like any other."""
    import ast

    modules = _modules()

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not type_checking and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                node.body = []
        targets: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                source = _source(module, node, path)
                targets.update(f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source
                               for a in node.names)
        graph[module] = {t for t in map(owner, targets) if t and t != module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_even_through_function_local_or_type_checking_imports() -> None:
    graph = import_graph()
    assert {"owrl_sdk.types", "owrl_train.rl", "builtin_tools.browser"} <= set(graph)
    assert "owrl_sdk.browser.state" in graph["owrl_sdk.browser.expect"]  # an import for type checkers is seen
    assert "owrl_sdk.rules.outputschema" in graph["owrl_sdk.rules.inputs"]  # a module-level import is seen
    assert "owrl_sdk.contract.tools" in graph["owrl_sdk.formats.documents"]  # so is a function-local one
    assert not cycles(graph), "\n".join(" <-> ".join(c) for c in cycles(graph))


def test_the_cycle_finder_sees_a_submodule_that_imports_its_own_package() -> None:
    graph = import_graph()
    assert "owrl_memory.strategies" in graph["owrl_memory"]  # the package imports its strategies
    graph["owrl_memory.strategies"] = graph["owrl_memory.strategies"] | {"owrl_memory"}  # from . import ...
    assert any({"owrl_memory", "owrl_memory.strategies"} <= set(c) for c in cycles(graph))


def test_the_cycle_finder_finds_one_closed_by_a_function_local_import() -> None:
    graph = import_graph()
    graph["owrl_sdk.types"] = graph["owrl_sdk.types"] | {"owrl_sdk.formats.outputs"}  # outputs -> plugins -> ... -> types
    assert any({"owrl_sdk.types", "owrl_sdk.formats.outputs"} <= set(c) for c in cycles(graph))


def test_the_core_is_told_apart_by_its_packages() -> None:
    """The top level of owrl_sdk holds at most a dozen modules: the rest lives in the packages the
    layers contract names (``.importlinter``), every one of them named there."""
    top = sorted(p.stem for p in (ROOT / "owrl_sdk").glob("*.py"))
    assert len(top) <= 12, top
    packages = sorted(p.parent.name for p in (ROOT / "owrl_sdk").glob("*/__init__.py"))
    contract = (ROOT / ".importlinter").read_text().split("[importlinter:contract:core-layers]")[1].split("\n[")[0]
    named = {name.strip() for line in contract.split("layers =", 1)[1].splitlines() for name in line.split(":")}
    assert set(packages) <= named and set(top) - {"__init__"} <= named, sorted(set(packages) | set(top) - named)


# ------------------------------------------------------------------ function-local imports

#: Where owrl may import inside a function, and why: the core's command modules, the CLI and the
#: docs generator, and the plugins' command modules, are loaded by ``owrl --help`` and each defers
#: what only its own command needs; the pytest plugin is loaded by every pytest run.
DEFERRING_MODULES = ("owrl_sdk/commands/", "owrl_sdk/cli.py", "owrl_sdk/docgen.py", "owrl_sdk/testing.py",
                     "plugins/owrl_openwebrl/commands.py", "plugins/owrl_train/commands.py")

#: The core's own modules a function may import: the browser is loaded when an episode needs
#: one (its package imports Playwright only to launch), the Agent when it is first named.
DEFERRED_OWN = ("owrl_sdk.browser", "owrl_sdk.agent")

#: A plugin's package is loaded by every process that loads plugins (a server, a Ray worker, a
#: script); its ``register_commands`` hook loads the command module, and click, only for ``owrl``.
_COMMANDS = "the command module (and click) only when the owrl command asks for commands"

#: Single exceptions, each with its reason.
ALLOWED = {
    ("plugins/owrl_demo/__init__.py", "from .command import demo_site_command"): _COMMANDS,
    ("plugins/owrl_openwebrl/__init__.py", "from .commands import model_command"): _COMMANDS,
    ("plugins/owrl_train/__init__.py", "from .commands import train_command"): _COMMANDS,
    ("plugins/owrl_openwebrl/__init__.py", "from .policy import OpenAIPolicy, OpenWebRLPolicy, TextPolicy"):
        "the policies with their prompts, backends and fetch helpers (tens of ms) when a catalogue is built, not at each owrl start",
    ("plugins/owrl_openwebrl/__init__.py", "from .judge import OpenWebRLJudge"):
        "the judge with the policy module it loads models through (tens of ms) when a catalogue is built",
    ("plugins/owrl_train/__init__.py", "from .rl import MMGRPO"):
        "the trainer's modules (rl and what it imports: tens of ms) when an optimizer runs, not at each owrl start",
    ("plugins/owrl_train/__init__.py", "from .sft import train_sft"):
        "the trainer's modules when an optimizer runs, not at each owrl start",
}


def _own(module: str, node: Any, path: Path) -> str | None:
    """The module of the tree an import statement names, or None for a third-party one."""
    import ast

    name = node.names[0].name if isinstance(node, ast.Import) else _source(module, node, path)
    return name if name.split(".")[0] in _packages() else None


def test_the_core_imports_its_own_modules_at_module_level() -> None:
    """Inside a function owrl (the core, the built-in tools and judges, the packages under
    plugins/; not their tests) imports only third-party packages (optional or slow to load) and
    the modules named above: anything else goes at the top of the module, where the cycle test
    sees it and a reader finds it."""
    import ast

    found = []
    used: set[tuple[str, str]] = set()
    for module, path in _modules().items():
        where = path.relative_to(ROOT).as_posix()
        if "tests" in path.relative_to(ROOT).parts or where.startswith(DEFERRING_MODULES):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                own = _own(module, node, path)
                text = ast.unparse(node)
                if (where, text) in ALLOWED:
                    used.add((where, text))
                    continue
                if own is None or own.startswith(DEFERRED_OWN):
                    continue
                if path.name == "__init__.py" and function.name == "__getattr__":
                    continue  # a package's lazy attributes
                found.append(f"{where}:{node.lineno}: {text}")
    assert not found, ("function-local imports of owrl's own modules (move each to the top of its module; "
                       "where that would close an import cycle, load a heavy dependency or slow `owrl --help`, "
                       "list it in ALLOWED with the reason):\n" + "\n".join(found))
    stale = [f"{where}: {text}" for where, text in ALLOWED if (where, text) not in used]
    assert not stale, "ALLOWED names imports that are no longer inside a function there:\n" + "\n".join(stale)
