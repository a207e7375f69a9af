"""Docs generated from the code: the hook reference, the CLI's help texts, the public API
(``docs/api.md``) and the documents' JSON Schemas (``owrl_sdk/schemas/*.schema.json``).

    python -m owrl_sdk.docgen                 # rewrite docs/hooks.md, cli.md, api.md and the schemas
    python -m owrl_sdk.docgen --check         # exit 1 when they differ from the code
    python -m owrl_sdk.docgen --api-snapshot  # rewrite tests/api_snapshot.txt (a deliberate API change)

Tests run the check, so the reference cannot drift from the hook specs or the commands.
"""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path
from typing import Optional

DOCS = Path(__file__).resolve().parents[1] / "docs"


def hook_signature(name: str) -> str:
    from owrl_sdk.contract import hookspecs

    fn = getattr(hookspecs, name)
    sig = inspect.signature(fn)
    params = ", ".join(str(p).replace("'", "") for p in sig.parameters.values())
    ret = "" if sig.return_annotation is inspect.Signature.empty else f" -> {sig.return_annotation}".replace("'", "")
    return f"{name}({params}){ret}"


def hook_names() -> list[str]:
    from owrl_sdk.contract import hookspecs

    return [n for n, fn in vars(hookspecs).items() if inspect.isfunction(fn) and hasattr(fn, "owrl_spec")]


def hooks_markdown() -> str:
    from owrl_sdk.contract import hookspecs

    lines = ["# Hook reference", "",
             "Every hook an owrl plugin can implement, generated from `owrl_sdk/contract/hookspecs.py`",
             "(`python -m owrl_sdk.docgen`). Implement one with `@owrl_sdk.hookimpl` on a function of",
             "the same name, declaring only the arguments you use.", ""]
    # the module's own account of async hooks, failures, order and per-episode plugins
    lines += ["## How hooks are called", ""]
    for para in (hookspecs.__doc__ or "").strip().split("\n\n")[1:]:
        lines += [para, ""]
    for name in hook_names():
        fn = getattr(hookspecs, name)
        opts = fn.owrl_spec
        lines += [f"## `{hook_signature(name)}`", ""]
        if opts.get("firstresult"):
            lines += ["*First result wins.*", ""]
        lines += [inspect.getdoc(fn) or "", ""]
    return "\n".join(lines).rstrip() + "\n"


def cli_markdown() -> str:
    import click

    from owrl_sdk.cli import cli

    lines = ["# Command line", "", "The help of every `owrl` command, generated from the code "
             "(`python -m owrl_sdk.docgen`).", ""]

    def walk(cmd: click.Command, path: list[str], parent: Optional[click.Context]) -> None:
        # each context made as `owrl` makes it: the command's own settings, the rest (the
        # group's -h) inherited from the parent
        settings = {**cmd.context_settings, "terminal_width": 100, "max_content_width": 100}
        ctx = click.Context(cmd, parent=parent, info_name=path[-1], **settings)
        lines.extend([f"## `{' '.join(path)}`", "", "```", cmd.get_help(ctx).rstrip(), "```", ""])
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is not None:  # every listed name resolves; the check is for the type
                    walk(sub, [*path, name], ctx)

    walk(cli, ["owrl"], None)
    return "\n".join(lines).rstrip() + "\n"


# ------------------------------------------------------------------ the public API


def _signature(obj: object) -> str:
    try:
        text = str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "(...)"
    return re.sub(r" at 0x[0-9a-f]+", "", text).replace("'", "")


def _fields(cls: type) -> str:
    """A pydantic model's fields as its source writes them (not as pydantic prints its types,
    which changes with pydantic's own releases)."""
    fields = getattr(cls, "model_fields", {})
    written: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass.__module__.startswith("owrl_sdk"):
            written.update({k: str(v) for k, v in vars(klass).get("__annotations__", {}).items()})
    parts = []
    for name, info in fields.items():
        default = "" if info.is_required() else (" = <factory>" if info.default_factory is not None
                                                 else f" = {info.default!r}")
        parts.append(f"{info.alias or name}: {written.get(name, '?')}{default}")
    return "(*, " + ", ".join(parts) + ")" if parts else "()"


def _constructor(cls: type) -> str:
    """How a class is made: a model's fields, an ``__init__`` of owrl's own, else where it comes from."""
    if hasattr(cls, "model_fields"):
        return _fields(cls)
    owner = next((k for k in cls.__mro__ if "__init__" in vars(k)), object)
    if owner is object or owner.__module__.startswith("owrl_sdk"):
        return _signature(cls)
    return f"(...: as {owner.__module__.split('.')[0]}'s {owner.__name__})"


def _members(cls: type) -> list[str]:
    """A class's own public methods and properties (those of pydantic's BaseModel and of
    ``object`` left out), with their signatures."""
    skip: set[str] = set()
    for base in cls.__mro__[1:]:
        if not base.__module__.startswith("owrl_sdk"):
            skip |= set(vars(base))
    out = []
    for name in sorted(dir(cls)):
        if name.startswith("_") or name in skip:
            continue
        value = inspect.getattr_static(cls, name)
        if isinstance(value, property):
            out.append(f"    .{name} (property)")
        elif isinstance(value, (staticmethod, classmethod)) or inspect.isfunction(value):
            out.append(f"    .{name}{_signature(getattr(cls, name))}")
    return out


def api_entries() -> list[tuple[str, str, list[str]]]:
    """(section, name, lines) for each public name of :mod:`owrl_sdk.api`, in the sections' order."""
    from owrl_sdk import api

    out = []
    for section, names in api.SECTIONS.items():
        for name in names:
            value = getattr(api, name)
            if inspect.ismodule(value):
                lines = [f"{name}: module {value.__name__}"]
            elif inspect.isclass(value):
                bases = ", ".join(b.__name__ for b in value.__bases__ if b is not object)
                lines = [f"{name}: class{f'({bases})' if bases else ''}", f"    {name}{_constructor(value)}",
                         *_members(value)]
            else:
                lines = [f"{name}{_signature(value)}"]
            out.append((section, name, lines))
    return out


def api_snapshot() -> str:
    """Every public name with its signature, as ``tests/api_snapshot.txt`` records it."""
    lines = ["# owrl_sdk.api: every public name and its signature (python -m owrl_sdk.docgen --api-snapshot",
             "# rewrites this file: a change here is a change of the public API, said in CHANGELOG.md)"]
    for _section, _name, entry in sorted(api_entries(), key=lambda e: e[1]):
        lines += entry
    return "\n".join(lines) + "\n"


def api_markdown() -> str:
    from owrl_sdk import api

    lines = ["# The public API", "", "What plugins, templates and embedders import: `owrl_sdk.api` (and `owrl_sdk`'s own",
             "`hookimpl`, `Agent`, `__version__`). Generated from the code (`python -m owrl_sdk.docgen`).", ""]
    doc = (api.__doc__ or "").strip().split("\n\n")
    lines += ["## The promise", "", *[p + "\n" for p in doc[1:]]]
    current = ""
    for section, name, entry in api_entries():
        if section != current:
            lines += [f"## {section}", ""]
            current = section
        value = getattr(api, name)
        summary = (inspect.getdoc(value) or "").split("\n\n")[0].replace("\n", " ")
        module = api.PUBLIC[name][0]
        lines += [f"### `{name}`", "", f"From `{module}`." + (f" {summary}" if summary else ""), "", "```",
                  *entry, "```", ""]
    return "\n".join(lines).rstrip() + "\n"


FILES = {"hooks.md": hooks_markdown, "cli.md": cli_markdown, "api.md": api_markdown}


def _schema_files() -> dict[Path, str]:
    from owrl_sdk import schemas

    return {schemas.path(kind): schemas.text(kind) for kind in schemas.KINDS}


#: The record of the public API's names and signatures, compared by tests/test_public_api.py.
SNAPSHOT = Path(__file__).resolve().parents[1] / "tests" / "api_snapshot.txt"


def main(argv: list[str]) -> int:
    if "--api-snapshot" in argv:  # a deliberate change of the public API: its record rewritten
        SNAPSHOT.write_text(api_snapshot(), encoding="utf-8")
        return 0
    check = "--check" in argv
    stale = []
    generated = {DOCS / name: make() for name, make in FILES.items()} | _schema_files()
    for path, text in generated.items():
        name = path.name
        if check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
    if stale:
        print(f"docs out of date: {', '.join(stale)}; run python -m owrl_sdk.docgen", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
