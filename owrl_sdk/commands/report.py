"""``owrl report``: a self-contained HTML page of a run folder or of an evaluation folder."""

from __future__ import annotations

from typing import Optional

import click

from owrl_sdk.plugins import hookimpl


@click.command("report")
@click.argument("path", type=click.Path(exists=True, file_okay=False))
@click.option("--out", type=click.Path(dir_okay=False),
              help="The page to write (default: PATH/report.html). An evaluation's run reports always go "
                   "next to each run's trajectory.json.")
def report_command(path: str, out: Optional[str]) -> None:
    """Write an HTML report of a run folder or an evaluation folder.

    A run's page holds every step (screenshot, thought, calls, results, verdicts, feedback)
    and the judgements; an evaluation's page holds the summary and per-task tables and links
    each episode to its run's page, written next to that run's trajectory.json."""
    from owrl_sdk.report import write_report

    click.echo(str(write_report(path, out)))


@hookimpl
def register_commands(register):
    register(report_command)
