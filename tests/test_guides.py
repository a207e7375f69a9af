"""The user guides in docs/ stay true to the code.

- every field of ``RLConfig`` has a row in training.md's config reference, with its default;
- every ``owrl ...`` command line in the guides' code blocks names a command that exists,
  with options that command takes;
- every field of the trajectory models is named in trajectory-format.md;
- the site-adapter tutorial's code is the code its "whole file" holds, and that package,
  rendered from the template and installed, passes its own tests in a real Chromium.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import click
import pytest

from owrl_cli import KEEP

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DOCS = Path(__file__).resolve().parents[1] / "docs"
GUIDES = ("getting-started.md", "run-and-eval.md", "flows-and-rpa.md", "site-adapter-tutorial.md",
          "training.md", "trajectory-format.md")
#: Languages of the fenced blocks that hold shell commands; in console/text blocks only `$ ` lines are commands.
SHELL_BLOCKS = ("bash", "sh", "shell")
PROMPT_BLOCKS = ("console", "text")
SEPARATORS = {"|", "||", "&&", "&", ";", "(", ")"}


def fenced_blocks(text: str) -> Iterator[tuple[str, str]]:
    """(language, body) of every fenced code block."""
    for m in re.finditer(r"^```([\w-]*)[^\n]*\n(.*?)^```", text, re.S | re.M):
        yield m.group(1), m.group(2)


def command_lines(text: str) -> Iterator[str]:
    for lang, body in fenced_blocks(text):
        for line in body.splitlines():
            if lang in SHELL_BLOCKS:
                yield line
            elif lang in PROMPT_BLOCKS and line.startswith("$ "):
                yield line[2:]


def owrl_invocations(line: str) -> Iterator[list[str]]:
    """The argument lists of every ``owrl`` (or ``.venv/bin/owrl``) command on a shell line."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    tokens = list(lexer)
    for i, tok in enumerate(tokens):
        if tok == "owrl" or tok.endswith("/owrl"):
            args = []
            for t in tokens[i + 1:]:
                if t in SEPARATORS:
                    break
                args.append(t)
            yield args


def option_names(command: click.Command) -> set[str]:
    names = {"--help", "-h"}
    for p in command.params:
        if isinstance(p, click.Option):
            names.update(p.opts)
            names.update(p.secondary_opts)
    return names


def check_invocation(args: list[str]) -> str:
    """The resolved command path; raises AssertionError naming what does not exist."""
    from owrl_sdk.cli import cli

    command: click.Command = cli
    ctx = click.Context(cli, info_name="owrl")
    path = ["owrl"]
    rest = list(args)
    while isinstance(command, click.Group) and rest:
        tok = rest.pop(0)
        if tok.startswith("-"):
            assert tok.split("=")[0] in option_names(command), f"`{' '.join(path)}` has no option {tok}"
            continue
        sub = command.get_command(ctx, tok)
        assert sub is not None, f"`{' '.join(path)} {tok}` is not a command (known: {', '.join(command.list_commands(ctx))})"
        path.append(tok)
        command = sub
        ctx = click.Context(sub, info_name=tok, parent=ctx)
    if not isinstance(command, click.Group):
        known = option_names(command)
        for tok in rest:
            if tok.startswith("--"):
                assert tok.split("=")[0] in known, f"`{' '.join(path)}` has no option {tok}"
    return " ".join(path)


def test_command_line_parsing_finds_each_owrl_command():
    """The parser itself: two commands joined by a pipe, a path to the script, a comment, env vars."""
    line = 'OWRL_X=1 .venv/bin/owrl plugins --all | owrl doctor && owrl run --task "a b" --url demo:shop  # c'
    assert list(owrl_invocations(line)) == [["plugins", "--all"], ["doctor"],
                                            ["run", "--task", "a b", "--url", "demo:shop"]]
    assert check_invocation(["train", "rl", "--config", "x.toml"]) == "owrl train rl"
    assert check_invocation(["--debug", "run", "--flow", "f.json"]) == "owrl run"
    with pytest.raises(AssertionError, match="`owrl trian` is not a command"):
        check_invocation(["trian", "rl"])
    with pytest.raises(AssertionError, match="`owrl train rl` has no option --confg"):
        check_invocation(["train", "rl", "--confg", "x.toml"])


@pytest.mark.parametrize("guide", GUIDES)
def test_every_owrl_command_in_the_guides_exists(guide):
    text = (DOCS / guide).read_text(encoding="utf-8")
    for line in command_lines(text):
        for args in owrl_invocations(line):
            check_invocation(args)


def test_the_guides_commands_are_found():
    """The check above reads what the guides show: each subcommand a user starts with."""
    shown = set()
    for guide in GUIDES:
        for line in command_lines((DOCS / guide).read_text(encoding="utf-8")):
            shown.update(check_invocation(args) for args in owrl_invocations(line))
    for path in ("owrl run", "owrl eval", "owrl doctor", "owrl plugins", "owrl new", "owrl report", "owrl judge",
                 "owrl train sft", "owrl train rl", "owrl train export", "owrl model tiny", "owrl serve"):
        assert path in shown, f"no guide shows {path}"


# ---------------------------------------------------------------------------- training.md


def reference_rows(text: str) -> dict[str, str]:
    """``| `key` | default | meaning |`` rows: key -> the default cell."""
    rows = {}
    for m in re.finditer(r"^\| `([a-z_0-9]+)` \| (.+?) \| .+ \|$", text, re.M):
        rows[m.group(1)] = m.group(2).strip()
    return rows


def test_rl_config_reference_lists_every_field_with_its_default():
    from owrl_train.rl import RLConfig

    text = (DOCS / "training.md").read_text(encoding="utf-8")
    section = text.split("### Config reference", 1)[1].split("\n### ", 1)[0]
    rows = reference_rows(section)
    fields = dataclasses.fields(RLConfig)
    missing = [f.name for f in fields if f.name not in rows]
    assert not missing, f"RLConfig fields missing from docs/training.md's config reference: {missing}"
    extra = sorted(set(rows) - {f.name for f in fields})
    assert not extra, f"docs/training.md documents keys RLConfig does not have: {extra}"
    for f in fields:
        cell = rows[f.name]
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            continue  # model (required) and out (derived from the config's name): described in words
        default: Any = f.default_factory() if f.default is dataclasses.MISSING else f.default
        if default is None:
            assert cell == "not set", f"{f.name}: the default is None, the table says {cell}"
            continue
        assert cell.startswith("`") and cell.endswith("`"), f"{f.name}: write the default as a TOML value in backticks"
        written = tomllib.loads(f"v = {cell.strip('`')}")["v"]
        assert written == default, f"{f.name}: the default is {default!r}, the table says {written!r}"


# ---------------------------------------------------------------------------- trajectory-format.md


def test_trajectory_format_names_every_field():
    from owrl_sdk import types

    text = (DOCS / "trajectory-format.md").read_text(encoding="utf-8")
    models = ("Trajectory", "Step", "CallRecord", "ToolCall", "Expectation", "Verdict", "Outcome", "Failure",
              "Judgement", "Task", "Observation", "Turn", "ToolResult", "PolicyInfo")
    missing = []
    for name in models:
        model = getattr(types, name)
        assert f"### {name}" in text or f"## {name}" in text, f"docs/trajectory-format.md has no section for {name}"
        for field_name, field in model.model_fields.items():
            if field.exclude:  # in memory only, never in the document
                continue
            key = field.alias or field_name
            if f"`{key}`" not in text:
                missing.append(f"{name}.{key}")
    assert not missing, f"fields not described in docs/trajectory-format.md: {missing}"


# ---------------------------------------------------------------------------- site-adapter-tutorial.md


def tutorial_files(text: str) -> dict[str, str]:
    """The tutorial's complete files: python blocks whose first line is ``# file: PATH``."""
    files = {}
    for lang, body in fenced_blocks(text):
        first = body.split("\n", 1)[0]
        if lang == "python" and first.startswith("# file: "):
            files[first[len("# file: "):].strip()] = body
    return files


def test_tutorial_steps_are_the_code_of_its_whole_file():
    text = (DOCS / "site-adapter-tutorial.md").read_text(encoding="utf-8")
    files = tutorial_files(text)
    assert set(files) == {"owrl_acme/__init__.py", "tests/test_adapter.py"}
    adapter = files["owrl_acme/__init__.py"]
    snippets = [body for lang, body in fenced_blocks(text) if lang == "python" and not body.startswith("# file: ")]
    assert len(snippets) >= 6
    for snippet in snippets:
        assert snippet.rstrip("\n") in adapter, f"a step's code is not in the whole file:\n{snippet}"


@pytest.mark.slow
def test_tutorial_adapter_installs_and_passes_its_tests(tmp_path):
    """The tutorial end to end: `owrl new site-adapter`, its files replaced by the tutorial's,
    installed (into a target folder, not this environment), then its own tests, which run
    the adapter in a real Chromium on pages served on 127.0.0.1."""
    from owrl_sdk.commands.new import render

    files = tutorial_files((DOCS / "site-adapter-tutorial.md").read_text(encoding="utf-8"))
    pkg = render("site-adapter", "acme", tmp_path, {"domain": "acme.test"})
    assert pkg.name == "owrl_acme"
    for rel, body in files.items():
        assert (pkg / rel).is_file(), f"the template has no {rel} to replace"
        (pkg / rel).write_text(body, encoding="utf-8")
    target = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                          "--target", str(target), str(pkg)], capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr[-1500:]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OWRL_") or k in KEEP}
    env["PYTHONPATH"] = str(target)
    listed = subprocess.run([sys.executable, "-m", "owrl_sdk", "plugins", "--json"], capture_output=True, text=True,
                            env=env, timeout=120)
    acme = [p for p in json.loads(listed.stdout)["plugins"] if p["name"] == "acme"]
    assert acme and acme[0]["hooks"] == ["register_site_adapters"] and acme[0]["source"] == "owrl-acme 0.1.0"
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(pkg / "tests")],
                           capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert tests.returncode == 0, tests.stdout[-3000:]
    assert "6 passed" in tests.stdout
