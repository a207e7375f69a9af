"""Conformance of the ``openwebrl`` profile with the official OpenWebRL code, case by case (issue 61).

The official handlers, parser, format check and judge history are imported at run time from a
folder of official files and run beside owrl's own code on the same inputs; the bench prints
each pair of lines side by side and a summary of how many are identical. Nothing of the
official code is stored in this repository: the folder lives outside it.

    OWRL_OPENWEBRL_SOURCE=file:///work/openwebrl-official \\
        .venv/bin/python bench/openwebrl_conformance.py --deps /work/openwebrl-deps

    .venv/bin/python bench/openwebrl_conformance.py --official /work/openwebrl-official \\
        --deps /work/openwebrl-deps [--only status,parser,format,truncation,judge] [--json OUT.json]

Categories:

- ``status``: every declared tool and its failure paths (``call_user`` is not run: the official
  handler waits on ``input()`` and the official tool list does not declare it) on loopback
  pages this bench serves on 127.0.0.1, in one headless Chromium (the one owrl's ``BrowserHost`` launches; the official
  ``WebEnv`` gets its ``browser`` and opens its own contexts in it). Official side: the
  official ``WebEnv`` (``reset``, then ``step`` for each answer, as the rollout loop calls it),
  the official ``ToolParser`` built from the official ``tool_list.json``, the official
  ``BrowserAdapter.actions_from_parsed`` and its tool-response truncation, each answer ending
  in ``<|im_end|>\\n`` as the loop's ``_ensure_im_end_w_new_line`` leaves it. owrl's side: a
  real episode (``run_episode``) of the ``openwebrl`` policy, scripted with the same answers,
  whose status lines are ``profile.feedback(step)``, with the interface files fetched from
  the same folder (``owrl model fetch openwebrl --no-weights`` into a temporary cache).
- ``parser``: answers read by the official loop's parser (``ToolParser(tools_info)``: sglang's
  ``qwen25`` detector, its regex fallback, then ``actions_from_parsed``) and by the profile's
  ``parse``: what reaches the environment, or a parse failure.
- ``format``: the official RL format check (``reward_browser.compute_format_reward(...,
  turn_level=True)`` in ``browser_env`` mode, i.e. ``</think>`` plus ``ToolParser(parser_type=
  "regex")``) against ``owrl_train.rewards.official_format_ok``.
- ``truncation``: 180 strings cut by the official adapter (``truncate_feedback_text`` at 512)
  and by ``owrl_openwebrl.official.truncate`` with the fetched rule.
- ``judge``: the judge's action history of each ``status`` scenario: the official
  ``_build_turn_level_action_history_for_browser_env`` over turn samples built as the rollout
  loop builds them, against ``owrl_openwebrl.judge.action_history`` of owrl's trajectory;
  compared line by line (one line per step).

It exits 0 whatever the counts (it is a measurement) and 2, with a message, when the
official folder is missing or lacks a file it needs.

Building the official folder from the public sources
----------------------------------------------------

The folder is the one ``OWRL_OPENWEBRL_SOURCE=file://FOLDER owrl model fetch openwebrl
--no-weights`` reads: the official repository's layout under FOLDER. The public repository
``OpenWebRL/OpenWebRL`` holds part of it; the rest was read in a public copy of the official
``openwebrl/`` folder (a harness repository that states it carries the official folder at
commit 05f8ed4; any copy of the official repository at that commit holds them all):

    from OpenWebRL/OpenWebRL (commit 5ae7e95c737a; generate_browser.py at f4aa1dac0629):
        openwebrl/env/web_env.py            the WebEnv and its _execute_<tool> handlers
        openwebrl/generate_browser.py       the rollout loop (parse-failure message; read with ast)
        openwebrl/reward_browser.py         format reward, judge prompts, judge action history
        openwebrl/base/utils.py             ToolParser
    from the official folder at 05f8ed4 (or that public copy of it), same paths:
        openwebrl/env/prompts/system_prompt_browser_env.md
        openwebrl/env/prompts/tool_list.json
        openwebrl/feedback_utils.py         truncation (512 / 300 / 512)
        openwebrl/env/utils/keyboard.py     key names
        openwebrl/env/base_env.py           WebEnv's base class
        openwebrl/base/types.py             ToolCall, ParsedToolResult
        openwebrl/base/adapter.py           BaseGymEnvAdapter
        openwebrl/adapters/browser_adapter.py   actions_from_parsed, tool-response truncation
        openwebrl/response_format.py        browser_env mode (</think>)
        openwebrl/env/config.yaml           (optional) the environment's settings

Copy each file byte for byte to FOLDER/<path>; no ``__init__.py`` is needed (the bench imports
``openwebrl`` as a namespace package with FOLDER on ``sys.path``). Then
``OWRL_OPENWEBRL_SOURCE=file://FOLDER owrl model fetch openwebrl --no-weights --cache DIR``
must report ``missing: []``.

``openwebrl/env/utils/js.py`` (the a11y tree's JavaScript) is in no public copy: the bench
puts a stand-in in ``sys.modules`` whose script returns no element. It only feeds the
``env_message`` DOM diff of ``WebEnv.step``, which no status line contains.

The official loop reads calls with sglang's ``FunctionCallParser`` (``qwen25``), pinned at
sglang 0.5.6.post2 in the official requirements. sglang is not a dependency of owrl; install
its pure-Python wheel and the two small packages its parser needs into a folder of their own
and pass it with ``--deps`` (or ``OWRL_BENCH_DEPS``):

    .venv/bin/pip install --no-deps --target /work/openwebrl-deps \\
        sglang==0.5.6.post2 orjson partial-json-parser pybase64

Without it the official ``ToolParser`` falls back to its regex parser (as the official code
does when sglang is missing) and the bench says so above the parser results.

Third-party modules stubbed in ``sys.modules`` (only where they cannot be imported; the
official code runs unmodified):

- ``timeout_decorator``: decorates ``BaseEnv.execute_single_action`` only; the stand-in's
  ``timeout()`` returns the function unchanged.
- ``slime.utils.types`` (the slime RL framework): ``Sample``, which ``reward_browser`` imports;
  the stand-in carries the fields the judge history reads (``response``, ``metadata``,
  ``status``...).
- ``sglang.srt.managers.io_struct``: its real module imports sglang's serving runtime
  (triton, CUDA kernels); the stand-in holds its two dataclasses the parser uses,
  ``Function(description, name, parameters)`` and ``Tool(function, type)``.
- ``IPython.display``: ``sglang.utils`` imports it for notebooks only.
- ``transformers`` and ``openai`` (imported for type hints and the judge's HTTP client) when
  absent.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import contextlib
import dataclasses
import enum
import http.server
import json
import os
import socket
import sys
import tempfile
import threading
import types
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional
from urllib.parse import unquote, urlparse

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: The official files the bench needs, by what needs them.
REQUIRED = {
    "openwebrl/env/prompts/system_prompt_browser_env.md": "the fetch (system prompt)",
    "openwebrl/env/prompts/tool_list.json": "the fetch and the official parser (tool list)",
    "openwebrl/env/web_env.py": "the official handlers",
    "openwebrl/generate_browser.py": "the fetch (parse-failure message)",
    "openwebrl/feedback_utils.py": "the truncation rule",
    "openwebrl/env/utils/keyboard.py": "the official handlers (key names)",
    "openwebrl/env/base_env.py": "the official handlers (WebEnv's base class)",
    "openwebrl/base/utils.py": "the official parser (ToolParser)",
    "openwebrl/base/types.py": "the official parser (ToolCall)",
    "openwebrl/base/adapter.py": "the official adapter's base class",
    "openwebrl/adapters/browser_adapter.py": "actions_from_parsed and the tool-response truncation",
    "openwebrl/response_format.py": "the browser_env response mode",
    "openwebrl/reward_browser.py": "the format gate and the judge history",
}
SCREEN = (1280, 1000)
SOURCE_ENV = "OWRL_OPENWEBRL_SOURCE"
DEPS_ENV = "OWRL_BENCH_DEPS"
CATEGORIES = ("status", "parser", "format", "truncation", "judge")


class Missing(Exception):
    """The official folder is missing or lacks a file: exit 2 with this message."""


# ====================================================================== the official side


def official_folder(given: Optional[str]) -> Path:
    """The folder named by --official, else by $OWRL_OPENWEBRL_SOURCE (a path or a file:// URL)."""
    raw = given or os.environ.get(SOURCE_ENV)
    if not raw:
        raise Missing(f"no official folder: pass --official FOLDER or set {SOURCE_ENV}=file:///FOLDER "
                      "(see this file's docstring for how to build it from the public sources)")
    if "://" in raw:
        parsed = urlparse(raw)
        if parsed.scheme != "file":
            raise Missing(f"{SOURCE_ENV}={raw} is not a local folder: the bench imports the official Python "
                          "files, so it needs a file:// source (a folder laid out as the official repository)")
        raw = unquote(parsed.path)
    folder = Path(raw).expanduser()
    if not folder.is_dir():
        raise Missing(f"the official folder {folder} does not exist")
    lacking = [f"{path} ({why})" for path, why in REQUIRED.items() if not (folder / path).is_file()]
    if lacking:
        raise Missing(f"the official folder {folder} lacks: " + "; ".join(lacking))
    return folder


def _stub(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    module.__owrl_bench_stub__ = True  # type: ignore[attr-defined]
    sys.modules[name] = module
    return module


def _importable(name: str) -> bool:
    try:
        __import__(name)
        return True
    except Exception:  # noqa: BLE001 - any failure to import means a stand-in is needed
        return False


class _Sample:
    """Stand-in for slime's ``slime.utils.types.Sample`` (a third-party RL framework): the
    fields the official reward and judge-history code read."""

    class Status(enum.Enum):
        PENDING = "pending"
        COMPLETED = "completed"
        TRUNCATED = "truncated"
        ABORTED = "aborted"
        FAILED = "failed"

    def __init__(self, **fields: Any):
        self.index = None
        self.group_index = None
        self.prompt = ""
        self.response = ""
        self.response_length = 0
        self.tokens: list[int] = []
        self.loss_mask: list[int] = []
        self.rollout_log_probs: list[float] = []
        self.metadata: dict[str, Any] = {}
        self.status = _Sample.Status.PENDING
        self.multimodal_inputs: Optional[dict[str, Any]] = None
        self.multimodal_train_inputs = None
        self.remove_sample = False
        self.__dict__.update(fields)


def load_official(folder: Path, deps: Optional[str]) -> SimpleNamespace:
    """Import the official modules from ``folder`` (third-party imports stubbed where needed)."""
    stubs: list[str] = []
    notes: list[str] = []
    if deps:
        sys.path.insert(0, str(Path(deps).expanduser()))
    sys.path.insert(0, str(folder))

    # -- third-party modules the official files import, stubbed only when they cannot be imported
    if not _importable("timeout_decorator"):
        # decorates BaseEnv.execute_single_action (an abstract method) and nothing else
        _stub("timeout_decorator", timeout=lambda *a, **k: (lambda fn: fn))
        stubs.append("timeout_decorator (timeout() returns the function unchanged)")
    if not _importable("slime.utils.types"):
        _stub("slime")
        _stub("slime.utils")
        _stub("slime.utils.types", Sample=_Sample)
        stubs.append("slime.utils.types.Sample (the fields the reward and judge-history code read)")
    if not _importable("transformers"):
        _stub("transformers", AutoTokenizer=object)  # a type hint of TokenHandler only
        stubs.append("transformers.AutoTokenizer (a type hint)")
    if not _importable("openai"):
        _stub("openai", AsyncAzureOpenAI=object, AsyncOpenAI=object)  # the judge's HTTP clients, not called
        stubs.append("openai (the judge's HTTP clients, never called)")

    # -- the official module no public copy holds: the a11y tree's JavaScript
    _stub("openwebrl.env.utils.js", find_clickable_elements_js_code="() => []")
    stubs.append("openwebrl.env.utils.js (absent from the public sources: the a11y-tree script returns "
                 "no element; it feeds only WebEnv.step's env_message DOM diff)")

    # -- sglang's parser (the official loop's), when the deps folder or the environment has it
    sglang = _importable("sglang.srt.function_call.function_call_parser") or _sglang_with_stubs(stubs)
    if sglang and not _importable("sglang.srt.managers.io_struct"):
        @dataclasses.dataclass
        class Function:  # sglang 0.5.6.post2 io_struct.Function's fields
            description: Optional[str] = None
            name: Optional[str] = None
            parameters: Optional[object] = None

        @dataclasses.dataclass
        class Tool:  # sglang 0.5.6.post2 io_struct.Tool's fields
            function: Function
            type: Optional[str] = "function"

        _stub("sglang.srt.managers.io_struct", Function=Function, Tool=Tool)
        stubs.append("sglang.srt.managers.io_struct (its Function and Tool dataclasses; the real module "
                     "imports sglang's serving runtime)")
    if not sglang:
        notes.append("sglang's FunctionCallParser is not importable (pass --deps, see the docstring): the "
                     "official ToolParser falls back to its regex parser, as the official code does without "
                     "sglang; the parser results are not those of the official loop")

    import logging

    logging.getLogger("sglang").setLevel(logging.ERROR)  # its detector logs every skipped block
    from openwebrl.adapters.browser_adapter import BrowserAdapter, BrowserEnvConfig
    from openwebrl.base.utils import ToolParser
    from openwebrl.env.web_env import WebEnv
    from openwebrl import feedback_utils, reward_browser

    tools = json.loads((folder / "openwebrl/env/prompts/tool_list.json").read_text(encoding="utf-8"))
    policy = (folder / "openwebrl/env/prompts/system_prompt_browser_env.md").read_text(encoding="utf-8")
    parser = ToolParser(tools)
    if sglang and parser._get_sglang_parser() is None:  # noqa: SLF001 - how the official parser reports it
        notes.append("sglang was importable but the official ToolParser did not build its FunctionCallParser")
        sglang = False
    return SimpleNamespace(
        folder=folder, WebEnv=WebEnv, ToolParser=ToolParser, BrowserAdapter=BrowserAdapter,
        BrowserEnvConfig=BrowserEnvConfig, feedback=feedback_utils, reward=reward_browser, Sample=_sample_class(),
        tools=tools, policy=policy, parse_failure=_parse_failure_literal(folder), stubs=stubs, notes=notes,
        sglang=sglang)


def _sglang_with_stubs(stubs: list[str]) -> bool:
    """Import sglang's parser with IPython stubbed (``sglang.utils`` imports it for notebooks)."""
    try:
        __import__("sglang")
    except ModuleNotFoundError as err:
        if err.name and err.name.split(".")[0] == "IPython":
            display = _stub("IPython.display", HTML=lambda *a, **k: None, display=lambda *a, **k: None)
            _stub("IPython", display=display)
            stubs.append("IPython.display (sglang.utils imports it for notebooks)")
            for name in [m for m in sys.modules if m == "sglang" or m.startswith("sglang.")]:
                del sys.modules[name]
        else:
            return False
    except Exception:  # noqa: BLE001
        return False
    return _importable("sglang.srt.function_call.function_call_parser")


def _sample_class() -> Any:
    module = sys.modules.get("slime.utils.types")
    return getattr(module, "Sample", _Sample)


def _parse_failure_literal(folder: Path) -> Optional[str]:
    """The rollout loop's parse-failure message: the ``{"tool_response": "..."}`` literal of
    ``generate_browser.py`` (read with ast: the loop itself needs slime, torch and a running
    sglang to import)."""
    tree = ast.parse((folder / "openwebrl/generate_browser.py").read_text(encoding="utf-8"))
    found = {v.value for node in ast.walk(tree) if isinstance(node, ast.Dict)
             for k, v in zip(node.keys, node.values)
             if isinstance(k, ast.Constant) and k.value == "tool_response"
             and isinstance(v, ast.Constant) and isinstance(v.value, str)}
    return found.pop() if len(found) == 1 else None


def official_adapter(off: SimpleNamespace) -> Any:
    """The official adapter as the rollout loop sets it up after ``env.reset()``."""
    adapter = off.BrowserAdapter(off.BrowserEnvConfig(), SimpleNamespace())
    adapter._tools_info = off.tools  # noqa: SLF001 - as generate_browser.py does
    adapter._tool_parser = off.ToolParser(off.tools)  # noqa: SLF001
    return adapter


def official_reads(off: SimpleNamespace, adapter: Any, answer: str) -> tuple[Optional[list[dict[str, Any]]], str]:
    """What the official loop does with an answer before the environment: ``(actions, response)``
    where actions is None for a parse failure and response is the text a turn sample keeps."""
    llm_response = answer.rstrip()
    if not llm_response.endswith("<|im_end|>"):
        llm_response += "<|im_end|>"
    llm_response += "\n"  # _ensure_im_end_w_new_line
    parsed = adapter.tool_parser.parse(adapter.preprocess_response(llm_response))
    if parsed.success and len(parsed.calls) > 0:
        return adapter.actions_from_parsed(parsed.calls), llm_response
    return None, llm_response


# ====================================================================== owrl's side


def load_owrl(folder: Path, cache: Path) -> SimpleNamespace:
    """owrl's pieces, with the interface files fetched from ``folder`` into ``cache``."""
    os.environ[SOURCE_ENV] = folder.resolve().as_uri()
    os.environ["OWRL_CACHE_DIR"] = str(cache)
    from owrl_openwebrl import official as owrl_official
    from owrl_openwebrl.fetch import fetch_interface
    from owrl_openwebrl.judge import action_history
    from owrl_openwebrl.parser import render_turn
    from owrl_openwebrl.profiles import OpenWebRLProfile, SCREEN as PROFILE_SCREEN
    from owrl_openwebrl.fetch import prompt_files

    manifest = fetch_interface("openwebrl", cache)
    missing = manifest["files"]["status_templates.json"].get("missing", [])
    profile = OpenWebRLProfile.from_options({}, PROFILE_SCREEN, found=prompt_files("openwebrl", cache))
    try:
        from owrl_train.rewards import official_format_ok
    except ImportError:  # the training plugin is optional
        official_format_ok = None
    return SimpleNamespace(official=owrl_official, profile=profile, templates=profile.templates or {},
                           action_history=action_history, render_turn=render_turn, missing=missing,
                           format_ok=official_format_ok, warnings=list(profile.warnings))


def _browser_host_class() -> Any:
    """owrl's BrowserHost: the public API's when it has one, else the browser package's (the
    SDK's modules are being reorganised into subpackages)."""
    import owrl_sdk.api as api

    if "BrowserHost" in getattr(api, "__all__", ()):
        return api.BrowserHost
    for name in ("owrl_sdk.browser.host", "owrl_sdk.browser"):
        try:
            module = __import__(name, fromlist=["BrowserHost"])
            return module.BrowserHost
        except (ImportError, AttributeError):
            continue
    raise ImportError("owrl's BrowserHost was not found in owrl_sdk.api, owrl_sdk.browser.host or owrl_sdk.browser")


class Scripted:
    """A backend that answers with the scenario's answers, one per step."""

    model_id = "OpenWebRL/OpenWebRL-4B"

    def __init__(self, answers: list[str]):
        self.answers = list(answers)

    def generate(self, prompts: list[Any], sampling: Any) -> list[Any]:
        from owrl_openwebrl.backend import Generation

        out = []
        for _ in prompts:
            text = self.answers.pop(0) if self.answers else CALL("done", response="(the scenario's answers ran out)")
            out.append(Generation(text=text, prompt_tokens=1, completion_tokens=1, seconds=0.0))
        return out


# ====================================================================== pages and scenarios


STORY = " ".join(
    f"Paragraph {i}: the bench page holds a long story so that the body's text is longer than the limit "
    "of the field value note, with words that wrap over several lines." for i in range(1, 9))

INDEX = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>Bench home</title>
<style>
  body {{ margin: 0; font: 16px/1.3 sans-serif; }}
  .abs {{ position: absolute; box-sizing: border-box; margin: 0; }}
</style></head>
<body>
<div style="position:absolute; left:0; top:0; width:1px; height:3000px"></div>
<div id="topleft" class="abs" style="position:fixed; left:0; top:0; width:30px; height:30px; background:#eee">TL</div>
<a id="nav" class="abs" href="/second.html" style="left:100px; top:50px; width:500px; height:60px; display:block">
        Products
        Services and more things here
      </a>
<button id="noop" class="abs" style="left:100px; top:150px; width:500px; height:40px">Does nothing at all on this page today</button>
<a id="blank" class="abs" href="/second.html" target="_blank" style="left:100px; top:220px; width:300px; height:30px; display:block">Open the second page in a new tab</a>
<input id="check" class="abs" type="checkbox" aria-label="Subscribe to news" style="left:100px; top:280px; width:30px; height:30px">
<input id="name" class="abs" placeholder="Your name" style="left:100px; top:340px; width:300px; height:30px">
<input id="zip" class="abs" maxlength="5" aria-label="Zip code" style="left:100px; top:400px; width:300px; height:30px">
<div id="drag" class="abs" style="left:100px; top:500px; width:80px; height:40px; background:#cde">Drag me</div>
<div id="panel" class="abs" style="left:700px; top:100px; width:400px; height:300px; overflow:auto; border:1px solid #999">
  <div style="height:1200px">A scrollable panel with a tall list inside it.</div>
</div>
<div id="hoverbox" class="abs" style="left:700px; top:450px; width:400px; height:60px; background:#ffd">
        Hover target
        with a rather long label text
      </div>
<p id="story" class="abs" style="left:100px; top:650px; width:1000px">{STORY}</p>
<div id="corner" class="abs" style="position:fixed; right:0; bottom:0; width:100px; height:100px; background:#dfd">Corner</div>
</body></html>
"""

SECOND = """<!doctype html>
<html><head><meta charset="utf-8"><title>Second page</title></head>
<body style="margin:0; font:16px sans-serif"><h1 style="margin:20px">The second page</h1>
<a href="/index.html" style="margin:20px; display:block">Back home</a></body></html>
"""

PAGES = {"/index.html": INDEX, "/second.html": SECOND}


class _Pages(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        body = PAGES.get(self.path.split("?")[0])
        if body is None:
            self.send_response(404)
            self.end_headers()
            return
        data = body.encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass


def serve_pages() -> tuple[http.server.ThreadingHTTPServer, str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def closed_port() -> int:
    """A loopback port nothing listens on (a navigation to it is refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def CALL(name: str, arguments: Any = None, **kw: Any) -> str:  # noqa: N802 - reads as the answer it writes
    """One answer: a short thought, then one block per call as the model writes it."""
    return ANSWER((name, kw if arguments is None else arguments))


def ANSWER(*calls: tuple[str, Any], thought: str = "Next step.") -> str:  # noqa: N802
    blocks = "\n".join("<tool_call>\n" + json.dumps({"name": n, "arguments": a}, ensure_ascii=False) + "\n</tool_call>"
                       for n, a in calls)
    return f"{thought}\n</think>\n{blocks}"


@dataclasses.dataclass
class Scenario:
    name: str
    answers: list[tuple[str, str]]  # (label, answer text)


def scenarios(base: str) -> list[Scenario]:
    nav, noop, blank, check = [195, 80], [195, 170], [195, 235], [90, 295]
    name, zip_code, panel, hoverbox, drag = [195, 355], [195, 415], [703, 250], [703, 480], [109, 520]
    refused = f"http://127.0.0.1:{closed_port()}/nothing"
    return [
        Scenario("click and go_back", [
            ("click a button with no effect (text over 30 chars)", CALL("click", point_2d=noop)),
            ("click a checkbox with an aria-label", CALL("click", point_2d=check)),
            ("click an indented link (30-char cut) that navigates", CALL("click", point_2d=nav)),
            ("go_back", CALL("go_back", {})),
            ("go_back with nothing to go back to", CALL("go_back", {})),
            ("done", CALL("done", response="Clicked around.")),
        ]),
        Scenario("tabs", [
            ("click a target=_blank link (new tab)", CALL("click", point_2d=blank)),
            ("switch_tab 0", CALL("switch_tab", tab_index=0)),
            ("switch_tab out of range", CALL("switch_tab", tab_index=5)),
            ("new_tab", CALL("new_tab", {})),
            ("close_tab (tab 2 of 3)", CALL("close_tab", {})),
            ("close_tab (tab 1 of 2)", CALL("close_tab", {})),
            ("close_tab on the last tab", CALL("close_tab", {})),
            ("switch_tab without tab_index", CALL("switch_tab", {})),
            ("done", CALL("done", response="Tabs handled.")),
        ]),
        Scenario("write", [
            ("click a field, then write (two calls)", ANSWER(("click", {"point_2d": name}), ("write", {"message": "hello"}))),
            ("click a 5-char field, then write 7 chars", ANSWER(("click", {"point_2d": zip_code}), ("write", {"message": "1234567"}))),
            ("write an empty message", CALL("write", message="")),
            ("write without message", CALL("write", {})),
            ("done", CALL("done", response="Typed.")),
        ]),
        Scenario("write with no focus", [
            ("write with nothing focused", CALL("write", message="hello")),
            ("done", CALL("done", response="Typed into nothing.")),
        ]),
        Scenario("press_keys", [
            ("click a field", CALL("click", point_2d=name)),
            ("press_keys [a, b] presses 2", CALL("press_keys", keys=["a", "b"], presses=2)),
            ("press_keys with no valid key", CALL("press_keys", keys=["foo"])),
            ("press_keys ctrl+c as a hotkey", CALL("press_keys", keys=["ctrl", "c"], is_hotkey=True)),
            ("press_keys 'ctrl+a' in one name", CALL("press_keys", keys=["ctrl+a"])),
            ("press_keys num5", CALL("press_keys", keys=["num5"])),
            ("press_keys given as a string", CALL("press_keys", keys="Tab")),
            ("press_keys with an empty list", CALL("press_keys", keys=[])),
            ("press_keys Enter", CALL("press_keys", keys=["Enter"])),
            ("done", CALL("done", response="Keys pressed.")),
        ]),
        Scenario("scroll", [
            ("scroll with the defaults", CALL("scroll", {})),
            ("scroll up by 1", CALL("scroll", direction="up", amount=1)),
            ("scroll up at the top", CALL("scroll", direction="up")),
            ("scroll down by 3 (clamped)", CALL("scroll", direction="down", amount=3)),
            ("scroll a panel under a point", CALL("scroll", direction="down", amount=0.25, point_2d=panel)),
            ("scroll left at the left edge", CALL("scroll", direction="left", amount=0.5)),
            ("done", CALL("done", response="Scrolled.")),
        ]),
        Scenario("points", [
            ("click at (0, 0)", CALL("click", point_2d=[0, 0])),
            ("click at (1000, 1000)", CALL("click", point_2d=[1000, 1000])),
            ("hover at (1000, 1000)", CALL("hover", point_2d=[1000, 1000])),
            ("hover an indented block (30-char cut)", CALL("hover", point_2d=hoverbox)),
            ("hover without a point", CALL("hover", {})),
            ("click without a point", CALL("click", {})),
            ("click with a one-number point", CALL("click", point_2d=[500])),
            ("double right click", CALL("click", point_2d=noop, clicks=2, button="right")),
            ("drag with both points", CALL("drag", start_point_2d=drag, end_point_2d=[400, 600])),
            ("drag without points", CALL("drag", {})),
            ("drag without end point", CALL("drag", start_point_2d=drag)),
            ("done", CALL("done", response="Pointed.")),
        ]),
        Scenario("navigation", [
            ("goto_url a page", CALL("goto_url", url=f"{base}/second.html")),
            ("goto_url empty", CALL("goto_url", url="")),
            ("goto_url a refused address", CALL("goto_url", url=refused)),
            ("go_back", CALL("go_back", {})),
            ("wait 1 second", CALL("wait", seconds=1)),
            ("done", CALL("done", response="Navigated.")),
        ]),
        Scenario("unreadable answers", [
            ("an answer without a call", "I should click the button first.\n</think>\nI will click it."),
            ("click", CALL("click", point_2d=noop)),
            ("a block that is not JSON", 'Try again.\n</think>\n<tool_call>\n{"name": "click", "arguments": '
                                         '{"point_2d": [195, 170]}\n</tool_call>'),
            ("an undeclared tool after a non-object block (the parser's regex fallback)",
             "Use the list.\n</think>\n" + _block("42") + "\n" + _block(UNDECLARED)),
            ("done", CALL("done", response="Done after a slip.")),
        ]),
    ]


# ====================================================================== running the scenarios


async def run_official_scenario(off: SimpleNamespace, browser: Any, url: str, scenario: Scenario) -> dict[str, Any]:
    """The official environment through one scenario: per answer its lines, and the turn
    samples the judge history is built from."""
    env = off.WebEnv(width=SCREEN[0], height=SCREEN[1], dpr=1, max_retries=3, wait_timeout=10000,
                     screenshot_timeout=30000, start_url=url, resize_output_coords=True, resize_scale=1000,
                     image_patch_size=32, tool_list=off.tools, policy=off.policy)
    env.browser = browser  # the bench's one Chromium (WebEnv.setup() would launch its own)
    adapter = official_adapter(off)
    lines: list[list[str]] = []
    samples: list[Any] = []
    # the official code prints some errors (the a11y tree's during a navigation): keep stdout for the results
    with contextlib.redirect_stdout(sys.stderr):
        await _official_turns(off, env, adapter, url, scenario, lines, samples)
    args = SimpleNamespace(browser_response_format_mode="browser_env")
    history = off.reward._build_turn_level_action_history_for_browser_env(args, samples)  # noqa: SLF001
    return {"lines": lines, "history": history}


async def _official_turns(off: SimpleNamespace, env: Any, adapter: Any, url: str, scenario: Scenario,
                          lines: list[list[str]], samples: list[Any]) -> None:
    """The rollout loop's steps 9-10 for each answer (generate_browser._generate_turn_sample_impl)."""
    try:
        _, info = await env.reset(url)
        tools_info, _ = adapter.parse_env_info(info)
        adapter._tools_info = tools_info  # noqa: SLF001 - as generate_browser.py does
        adapter._tool_parser = off.ToolParser(tools_info)  # noqa: SLF001
        for turn, (_, answer) in enumerate(scenario.answers):
            actions, response = official_reads(off, adapter, answer)
            sample = off.Sample(response=response, metadata={"turn_index": turn})
            samples.append(sample)
            if actions is None:
                lines.append([adapter._truncate_tool_response(off.parse_failure or "")])  # noqa: SLF001
                continue
            _, _, terminated, _, info = await env.step(actions)
            responses = info.get("tool_responses", [])
            sample.metadata["step_tool_responses"] = [
                {"tool_name": item.get("tool_name", ""),
                 "tool_response": adapter._truncate_tool_response(item.get("tool_response", ""))}  # noqa: SLF001
                for item in responses if isinstance(item, dict)]
            lines.append([adapter._truncate_tool_response(r.get("tool_response", "")) for r in responses]  # noqa: SLF001
                         or [f"(no tool response; env_message: {info.get('env_message')})"])
            if terminated:
                break
    finally:
        if env.context is not None:
            try:
                await env.context.close()
            except Exception:  # noqa: BLE001 - the context may be gone already
                pass


async def run_owrl_scenario(ow: SimpleNamespace, host: Any, settings: Any, plugins: Any, url: str,
                            scenario: Scenario, run_dir: Path) -> dict[str, Any]:
    """owrl's openwebrl policy through one scenario, in a real episode."""
    from owrl_openwebrl.policy import OpenWebRLPolicy
    from owrl_sdk.api import Task, run_episode

    policy = OpenWebRLPolicy(settings, backend=Scripted([a for _, a in scenario.answers]))
    env = await host.new_env(run_dir=run_dir)
    task = Task(intent=f"Conformance bench: {scenario.name}", start_url=url)
    traj = await run_episode(task, env, policy, settings, plugins)
    lines = [policy.profile.feedback(step) for step in traj.steps]
    # as the openwebrl judge builds it: with the status lines fetched into the same cache
    history = ow.action_history(traj, SCREEN, 300, ow.templates or None)
    status = traj.outcome.status if traj.outcome else None
    failure = traj.outcome.failure if traj.outcome else None
    return {"lines": lines, "history": history,
            "outcome": f"{status}" + (f" ({failure.code}: {failure.detail})" if failure else "")}


async def run_browser(off: SimpleNamespace, ow: SimpleNamespace, work: Path) -> list[dict[str, Any]]:
    from owrl_sdk.api import Plugins, Settings

    server, base = serve_pages()
    settings = Settings()
    plugins = Plugins().bind(settings)
    results = []
    try:
        async with _browser_host_class()(settings) as host:
            print(f"browser: Chromium {host.browser.version} (headless, launched by owrl's BrowserHost; "
                  "the official WebEnv opens its contexts in it)")
            for i, scenario in enumerate(scenarios(base)):
                url = f"{base}/index.html"
                print(f"  running {scenario.name}…", file=sys.stderr, flush=True)
                official = await run_official_scenario(off, host.browser, url, scenario)
                owrl = await run_owrl_scenario(ow, host, settings, plugins, url, scenario, work / f"run{i}")
                results.append({"scenario": scenario, "official": official, "owrl": owrl})
    finally:
        server.shutdown()
        server.server_close()
    return results


# ====================================================================== the other categories


def _describe_actions(actions: Optional[list[dict[str, Any]]]) -> str:
    if actions is None:
        return "parse failure"
    return " ; ".join(f"{a.get('name')!s} {json.dumps(a.get('args'), ensure_ascii=False, sort_keys=True)}"
                      for a in actions)


def _block(body: str) -> str:
    return f"<tool_call>\n{body}\n</tool_call>"


CLICK = '{"name": "click", "arguments": {"point_2d": [500, 300]}}'
SCROLL = '{"name": "scroll", "arguments": {"direction": "down"}}'
UNDECLARED = '{"name": "select_option", "arguments": {"value": "x"}}'
THINK = "I look at the page.\n</think>\n"

#: Answers for the parser: (label, answer as the model wrote it).
PARSER_CASES: list[tuple[str, str]] = [
    ("a valid call", THINK + _block(CLICK)),
    ("two valid calls", THINK + _block(CLICK) + "\n" + _block(SCROLL)),
    ("arguments under 'parameters'", THINK + _block('{"name": "click", "parameters": {"point_2d": [1, 2]}}')),
    ("'parameters' empty, 'arguments' given", THINK + _block('{"name": "click", "parameters": {}, "arguments": {"point_2d": [3, 4]}}')),
    ("no arguments key", THINK + _block('{"name": "go_back"}')),
    ("a list of calls in one block", THINK + _block(f"[{CLICK}, {SCROLL}]")),
    ("bad JSON alone", THINK + _block('{"name": "click", "arguments": {"point_2d": [1, 2]}')),
    ("bad JSON beside a valid block", THINK + _block('{"name": "click",') + "\n" + _block(SCROLL)),
    ("a non-object block alone", THINK + _block('"click"')),
    ("a non-object block beside a valid one", THINK + _block('"click"') + "\n" + _block(SCROLL)),
    ("a non-object block beside an undeclared name", THINK + _block("42") + "\n" + _block(UNDECLARED)),
    ("a non-object block, bad JSON and a valid block", THINK + _block("[1]") + "\n" + _block('{"name": "x",') + "\n" + _block(CLICK)),
    ("an unhashable name", THINK + _block('{"name": ["click"], "arguments": {}}')),
    ("an unhashable name beside a valid block", THINK + _block('{"name": {"n": 1}, "arguments": {}}') + "\n" + _block(CLICK)),
    ("arguments as a JSON string", THINK + _block('{"name": "click", "arguments": "{\\"point_2d\\": [1, 2]}"}')),
    ("arguments null", THINK + _block('{"name": "click", "arguments": null}')),
    ("arguments []", THINK + _block('{"name": "click", "arguments": []}')),
    ("arguments a number", THINK + _block('{"name": "wait", "arguments": 5}')),
    ("an undeclared name alone", THINK + _block(UNDECLARED)),
    ("an undeclared name beside a valid block", THINK + _block(UNDECLARED) + "\n" + _block(CLICK)),
    ("no name", THINK + _block('{"arguments": {"point_2d": [1, 2]}}')),
    ("no newline inside the tags", THINK + "<tool_call>" + CLICK + "</tool_call>"),
    ("blank lines inside the tags", THINK + "<tool_call>\n\n" + CLICK + "\n\n</tool_call>"),
    ("a call inside <think> only", "I will " + _block(CLICK) + " now.\n</think>\nThat is the plan."),
    ("plain text, no call", THINK + "I would click the button."),
    ("single quotes", THINK + _block("{'name': 'click', 'arguments': {'point_2d': [1, 2]}}")),
    ("a missing closing tag", THINK + "<tool_call>\n" + CLICK),
    ("plain text beside a valid block", THINK + "First I click.\n" + _block(CLICK) + "\nThen I wait."),
]

#: Answers for the RL format gate: (label, answer).
FORMAT_CASES: list[tuple[str, str]] = [
    ("valid", THINK + _block(CLICK)),
    ("no </think>", "I look.\n" + _block(CLICK)),
    ("no call", THINK + "Nothing to do."),
    ("a block that is not JSON", THINK + _block('{"name": "click",')),
    ("an object without name", THINK + _block('{"arguments": {"point_2d": [1, 2]}}')),
    ("an empty object", THINK + _block("{}")),
    ("a plain-text block beside a valid one", THINK + _block("click the button") + "\n" + _block(CLICK)),
    ("a list block beside a valid one", THINK + _block(f"[{CLICK}]") + "\n" + _block(CLICK)),
    ("a list block alone", THINK + _block(f"[{CLICK}]")),
    ("two valid blocks", THINK + _block(CLICK) + "\n" + _block(SCROLL)),
    ("an undeclared name", THINK + _block(UNDECLARED)),
    ("a non-string name", THINK + _block('{"name": ["click"], "arguments": {}}')),
    ("no newline inside the tags", THINK + "<tool_call>" + CLICK + "</tool_call>"),
    ("text after the JSON in the block", THINK + _block(CLICK + " thanks")),
    ("with <think> opened in the answer", "<think>\n" + THINK + _block(CLICK)),
    ("a call only inside <think>", "Plan: " + _block(CLICK) + "\n</think>\nDone thinking."),
]


def parser_rows(off: SimpleNamespace, ow: SimpleNamespace) -> list[tuple[str, str, str]]:
    adapter = official_adapter(off)
    rows = []
    for label, answer in PARSER_CASES:
        try:
            actions, _ = official_reads(off, adapter, answer)
            official = _describe_actions(actions)
        except Exception as err:  # noqa: BLE001 - the official loop would end the episode on it
            official = f"error in the official loop: {type(err).__name__}: {err}"
        turn = ow.profile.parse(answer)
        if turn.parse_error:
            owrl = "parse failure"
        else:
            owrl = " ; ".join(f"{c.name} {json.dumps(c.arguments, ensure_ascii=False, sort_keys=True)}" for c in turn.calls)
        rows.append((label, official, owrl))
    return rows


def format_rows(off: SimpleNamespace, ow: SimpleNamespace) -> list[tuple[str, str, str]]:
    args = SimpleNamespace(browser_response_format_mode="browser_env")
    rows = []
    for label, answer in FORMAT_CASES:
        # the turn sample's response ends with <|im_end|>\n (the official check strips it)
        score = off.reward.compute_format_reward(args, answer + "<|im_end|>\n", turn_level=True)
        official = f"format {score:g}"
        if ow.format_ok is None:
            owrl = "(owrl_train is not installed)"
        else:
            owrl = f"format {1 if ow.format_ok(answer) else 0:g}"
        rows.append((label, official, owrl))
    return rows


def truncation_strings() -> list[str]:
    """180 strings: 60 lengths around and far past the limits, each in three spellings
    (plain words; runs of spaces, tabs and newlines; non-ASCII)."""
    lengths = [0, 1, 2, 10, 29, 30, 31, 50, 99, 100, 200, 250, 299, 300, 301, 302, 350, 400, 450, 480,
               490, 500, 505, 509, 510, 511, 512, 513, 514, 515, 516, 520, 530, 540, 550, 560, 580, 600,
               640, 700, 768, 800, 900, 1000, 1023, 1024, 1025, 1200, 1500, 1999, 2000, 2048, 3000, 4096,
               5000, 6000, 8000, 10000, 12345, 20000]
    words = "Succeed: `click` on <a> \"Products Services\" at (249, 80) executed. Page navigated to http://x/y."
    out = []
    for n in lengths:
        plain = (words + " ") * (n // len(words) + 1)
        out.append(plain[:n])
        spaced = "".join(c + ("   \t\n " if c == " " and i % 3 == 0 else "") for i, c in enumerate(plain))
        out.append(spaced[:n])
        wide = ("Écrit « ça » — 東京 🙂 " * (n // 20 + 1))
        out.append(wide[:n])
    return out


def truncation_rows(off: SimpleNamespace, ow: SimpleNamespace) -> list[tuple[str, str, str]]:
    adapter = official_adapter(off)
    rule = ow.templates.get("truncation")
    rows = []
    for i, text in enumerate(truncation_strings()):
        official = adapter._truncate_tool_response(text)  # noqa: SLF001 - the line the model reads
        owrl = ow.official.truncate(text, rule) if rule else "(no truncation rule fetched)"
        rows.append((f"string {i + 1} ({len(text)} chars)", official, owrl))
    return rows


# ====================================================================== output


def _same(a: Any, b: Any) -> bool:
    return a == b


def print_rows(title: str, rows: list[tuple[str, str, str]], quiet_same: bool = False) -> tuple[int, int]:
    same = sum(1 for _, a, b in rows if _same(a, b))
    print(f"\n== {title}: {same} of {len(rows)} identical")
    for label, official, owrl in rows:
        mark = "same" if _same(official, owrl) else "DIFF"
        if quiet_same and mark == "same":
            continue
        print(f"[{mark}] {label}")
        print(f"    official: {official}")
        print(f"    owrl:     {owrl}")
    return same, len(rows)


def status_rows(results: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    rows = []
    for result in results:
        scenario: Scenario = result["scenario"]
        off_lines, ow_lines = result["official"]["lines"], result["owrl"]["lines"]
        for i, (label, _) in enumerate(scenario.answers):
            a = off_lines[i] if i < len(off_lines) else []
            b = ow_lines[i] if i < len(ow_lines) else []
            if not a and not b:
                continue
            for j in range(max(len(a), len(b))):
                suffix = f" (call {j + 1})" if max(len(a), len(b)) > 1 else ""
                rows.append((f"{scenario.name}: {label}{suffix}",
                             a[j] if j < len(a) else "(no line)", b[j] if j < len(b) else "(no line)"))
    return rows


def judge_rows(results: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    rows = []
    for result in results:
        name = result["scenario"].name
        a = result["official"]["history"].split("\n")
        b = result["owrl"]["history"].split("\n")
        for j in range(max(len(a), len(b))):
            rows.append((f"{name}: line {j + 1}", a[j] if j < len(a) else "(no line)", b[j] if j < len(b) else "(no line)"))
    return rows


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--official", help=f"the official folder (default: ${SOURCE_ENV}, a path or file:// URL)")
    parser.add_argument("--deps", default=os.environ.get(DEPS_ENV),
                        help=f"a folder with sglang and its parser's packages (default: ${DEPS_ENV})")
    parser.add_argument("--only", default=",".join(CATEGORIES),
                        help=f"comma-separated categories among {', '.join(CATEGORIES)} (default: all)")
    parser.add_argument("--json", help="also write every row to this JSON file")
    parser.add_argument("--differences-only", action="store_true", help="print only the rows that differ")
    args = parser.parse_args(argv)
    only = [c.strip() for c in args.only.split(",") if c.strip()]
    unknown = [c for c in only if c not in CATEGORIES]
    if unknown:
        parser.error(f"unknown categories: {', '.join(unknown)}")

    try:
        folder = official_folder(args.official)
    except Missing as err:
        print(f"openwebrl_conformance: {err}", file=sys.stderr)
        return 2
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    off = load_official(folder, args.deps)
    work = Path(tempfile.mkdtemp(prefix="owrl-conformance-"))
    ow = load_owrl(folder, work / "cache")

    print(f"official folder: {folder}")
    print(f"owrl fetch from it: status-line templates missing: {ow.missing or '[]'}; "
          f"profile warnings: {ow.warnings or '[]'}")
    print(f"official parser: {'sglang FunctionCallParser (qwen25) with its regex fallback' if off.sglang else 'regex fallback only (no sglang)'}")
    for note in off.notes:
        print(f"NOTE: {note}")
    print("stubbed in sys.modules: " + ("; ".join(off.stubs) if off.stubs else "nothing"))
    if off.parse_failure is None:
        print("NOTE: the parse-failure literal was not found in generate_browser.py")

    summary: list[tuple[str, int, int]] = []
    dump: dict[str, Any] = {}

    def section(key: str, title: str, rows: list[tuple[str, str, str]]) -> None:
        same, total = print_rows(title, rows, args.differences_only)
        summary.append((title, same, total))
        dump[key] = [{"case": c, "official": a, "owrl": b, "identical": a == b} for c, a, b in rows]

    if "status" in only or "judge" in only:
        print("\nrunning the browser scenarios (one Chromium, pages on 127.0.0.1)…", file=sys.stderr)
        results = asyncio.run(run_browser(off, ow, work))
        for r in results:
            if not (r["owrl"]["outcome"] or "").startswith("success"):
                print(f"NOTE: owrl's episode '{r['scenario'].name}' ended: {r['owrl']['outcome']}")
        if "status" in only:
            section("status", "status lines", status_rows(results))
        if "judge" in only:
            section("judge", "judge action history (lines)", judge_rows(results))
            whole = [(r["scenario"].name, r["official"]["history"], r["owrl"]["history"]) for r in results]
            same = sum(1 for _, a, b in whole if a == b)
            summary.append(("judge action history (whole, per scenario)", same, len(whole)))
    if "parser" in only:
        section("parser", "parser (what reaches the environment)", parser_rows(off, ow))
    if "format" in only:
        section("format", "RL format gate", format_rows(off, ow))
    if "truncation" in only:
        section("truncation", "truncation (tool response, 512)", truncation_rows(off, ow))

    print("\n== summary")
    width = max(len(t) for t, _, _ in summary) if summary else 10
    print(f"{'category'.ljust(width)}  identical/total")
    for title, same, total in summary:
        print(f"{title.ljust(width)}  {same}/{total}")
    if args.json:
        Path(args.json).write_text(json.dumps(dump, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
