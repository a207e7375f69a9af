"""``owrl schema KIND``: the JSON Schema of a flow, a trajectory or a task."""

from __future__ import annotations

from typing import Optional

import click

from owrl_sdk.contract.hookspecs import Register
from owrl_sdk.contract.plugins import hookimpl


@click.command("schema")
@click.argument("kind", type=click.Choice(["flow", "trajectory", "task"]))
@click.option("--out", type=click.Path(dir_okay=False), help="Write the schema to FILE instead of printing it.")
def schema_command(kind: str, out: Optional[str]) -> None:
    """Print the JSON Schema of a document: flow (owrl.flow/1), trajectory (owrl.trajectory/1)
    or task. An editor that reads JSON Schema checks a flow against it as it is typed; the same
    files ship in the package (owrl_sdk/schemas/KIND.schema.json)."""
    from owrl_sdk import schemas

    text = schemas.text(kind)
    if out:
        from pathlib import Path

        Path(out).write_text(text, encoding="utf-8")
        click.echo(out)
        return
    click.echo(text, nl=False)


@hookimpl
def register_commands(register: Register) -> None:
    register(schema_command)
