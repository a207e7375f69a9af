"""``owrl blocklist``: hosts blocked after network failures."""

from __future__ import annotations

import datetime as _dt
from typing import Optional

import click

from owrl_sdk.contract.hookspecs import Register
from owrl_sdk.contract.plugins import hookimpl


@click.group("blocklist")
def blocklist_command() -> None:
    """Hosts blocked after network failures (training skips their tasks)."""


@blocklist_command.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: the file and each host with until (epoch seconds), "
              "reason and failures.")
def list_command(as_json: bool) -> None:
    """Show blocked hosts and until when."""
    import json

    from owrl_sdk.safety.blocklist import Blocklist

    bl = Blocklist()
    rows = bl.entries()
    if as_json:
        click.echo(json.dumps({"path": str(bl.path), "hosts": [
            {"host": host, "until": until, "reason": reason, "failures": failures} for host, until, reason, failures in rows]},
            indent=2))
        return
    if not rows:
        click.echo(f"no blocked hosts ({bl.path})")
        return
    for host, until, reason, failures in rows:
        when = _dt.datetime.fromtimestamp(until).strftime("%Y-%m-%d %H:%M")
        click.echo(f"{host}  until {when}  ({failures} failure{'s' if failures != 1 else ''}: {reason})")


@blocklist_command.command("clear")
@click.argument("host", required=False)
def clear_command(host: Optional[str]) -> None:
    """Unblock HOST, or every host."""
    from owrl_sdk.safety.blocklist import Blocklist

    n = Blocklist().clear(host)
    click.echo(f"unblocked {n} host{'s' if n != 1 else ''}")


@hookimpl
def register_commands(register: Register) -> None:
    register(blocklist_command)
