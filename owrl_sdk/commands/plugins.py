"""``owrl plugins``: what is installed and which hooks each implements."""

from __future__ import annotations

import json
from typing import Any

import click

from owrl_sdk.contract.hookspecs import Register
from owrl_sdk.contract.plugins import hookimpl


@click.command("plugins")
@click.option("--all", "show_all", is_flag=True, help="Include owrl's default plugins.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def plugins_command(show_all: bool, as_json: bool) -> None:
    """List installed plugins, their versions, what each registers (policies, memories, tools,
    judges, ... by name) and the hooks they implement."""
    from owrl_sdk.contract.plugins import Plugins, plugin_infos

    plugins = Plugins()
    infos = [i for i in plugin_infos(plugins.pm) if show_all or not i.default]
    registers = registered_by(plugins.catalogue)
    if as_json:
        data = {
            "plugins": [
                {"name": i.name, "version": i.version, "hooks": i.hooks, "registers": registers.get(i.name, {}),
                 "default": i.default, "source": i.source}
                for i in infos
            ],
            "errors": [{"name": f.name, "source": f.source, "error": f.error} for f in plugins.failures],
        }
        click.echo(json.dumps(data, indent=2))
        return
    from rich.markup import escape
    from rich.table import Table

    from owrl_sdk.support.console import SafeConsole as Console  # page text cannot drive the terminal

    console = Console()
    table = Table(title="owrl plugins" + ("" if show_all else " (defaults hidden: --all shows them)"))
    for col in ("name", "version", "registers", "hooks", "source"):
        table.add_column(col, overflow="fold")
    for i in infos:  # str cells are read as markup: names, versions and sources come from installed packages
        made = "; ".join(f"{kind.replace('_', ' ')}: {', '.join(names)}" for kind, names in registers.get(i.name, {}).items())
        table.add_row(escape(i.name), escape(i.version or "-"), escape(made or "-"), escape(", ".join(i.hooks)),
                      escape(str(i.source)))
    console.print(table)
    for f in plugins.failures:
        console.print(f"[red]✗ plugin '{escape(f.name)}' ({escape(str(f.source))}) failed to load:[/red] {escape(str(f.error))}",
                      highlight=False, soft_wrap=True)


def registered_by(catalogue: Any) -> dict[str, dict[str, list[str]]]:
    """Plugin name -> kind (policies, memories, tools, judges, ...) -> the names it registered:
    what ``--policy``, the ``memory`` setting and ``--judge`` take."""
    out: dict[str, dict[str, list[str]]] = {}
    for (kind, name), owner in sorted(catalogue.owners.items()):
        out.setdefault(owner, {}).setdefault(kind, []).append(name)
    return out


@hookimpl
def register_commands(register: Register) -> None:
    register(plugins_command)
