"""Docs generated from the code: the hook reference, the CLI's help texts and the documents'
JSON Schemas (``owrl_sdk/schemas/*.schema.json``).

    python -m owrl_sdk.docgen          # rewrite docs/hooks.md, docs/cli.md and the schemas
    python -m owrl_sdk.docgen --check  # exit 1 when they differ from the code

Tests run the check, so the reference cannot drift from the hook specs or the commands.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Optional

DOCS = Path(__file__).resolve().parents[1] / "docs"


def hook_signature(name: str) -> str:
    from . import hookspecs

    fn = getattr(hookspecs, name)
    sig = inspect.signature(fn)
    params = ", ".join(str(p).replace("'", "") for p in sig.parameters.values())
    ret = "" if sig.return_annotation is inspect.Signature.empty else f" -> {sig.return_annotation}".replace("'", "")
    return f"{name}({params}){ret}"


def hook_names() -> list[str]:
    from . import hookspecs

    return [n for n, fn in vars(hookspecs).items() if inspect.isfunction(fn) and hasattr(fn, "owrl_spec")]


def hooks_markdown() -> str:
    from . import hookspecs

    lines = ["# Hook reference", "",
             "Every hook an owrl plugin can implement, generated from `owrl_sdk/hookspecs.py`",
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

    from .cli import cli

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


FILES = {"hooks.md": hooks_markdown, "cli.md": cli_markdown}


def _schema_files() -> dict[Path, str]:
    from . import schemas

    return {schemas.path(kind): schemas.text(kind) for kind in schemas.KINDS}


def main(argv: list[str]) -> int:
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
