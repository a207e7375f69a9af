"""``owrl report``: a self-contained HTML page of a run folder, an evaluation folder or a batch folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import click

from owrl_sdk.cli import PathArg
from owrl_sdk.contract.hookspecs import Register
from owrl_sdk.contract.plugins import hookimpl


@click.command("report")
@click.argument("path", type=PathArg("folder", "a run, evaluation or batch folder", exists=True))
@click.option("--out", type=PathArg("file", "a report file"),
              help="The page to write (default: PATH/report.html). An evaluation's or a batch's run reports "
                   "always go next to each run's trajectory.json.")
@click.option("--json", "as_json", is_flag=True, help='Print JSON: {"report": PAGE, "kind": run|evaluation|batch}.')
def report_command(path: str, out: Optional[str], as_json: bool = False) -> None:
    """Write an HTML report of a run folder, an evaluation folder or a batch folder.

    A run's page holds every step (screenshot, thought, calls, results, verdicts, feedback)
    and the judgements; an evaluation's page holds the summary and per-task tables and links
    each episode to its run's page, written next to that run's trajectory.json; a batch's page
    holds its counts and one line per row (inputs, outputs, status, failure, the last
    screenshot of a row that did not succeed) linked to the row's run page."""
    from owrl_sdk.formats.report import write_report

    folder = Path(path)
    _check_eval_inputs(folder)
    page = write_report(path, out)
    if as_json:
        kind = ("run" if (folder / "trajectory.json").is_file() else
                "batch" if (folder / "batch.json").is_file() else "evaluation")
        click.echo(json.dumps({"report": str(page), "kind": kind}))
        return
    click.echo(str(page))


def _check_eval_inputs(folder: Path) -> None:
    """An evaluation folder's own files, read once before the report: one that is not UTF-8, or
    that is nested too deeply to parse, is an error naming that file. (A run folder's
    trajectory.json gets the same from its loader; a line that is merely not JSON is skipped
    by the report, as by ``owrl eval``.)"""
    from owrl_sdk.formats.documents import json_lines, read_text, too_deep
    from owrl_sdk.errors import DocumentError

    if (folder / "trajectory.json").is_file():
        return
    for name in ("episodes.jsonl", "summary.json"):
        file = folder / name
        if not file.is_file():
            continue
        text = read_text(file)
        for piece in json_lines(text) if name.endswith(".jsonl") else [text]:
            try:
                data = json.loads(piece)
            except ValueError:
                continue
            except RecursionError:
                raise DocumentError(too_deep(file)) from None
            if name == "summary.json" and not isinstance(data, dict):
                raise DocumentError(f"{file}: not a JSON object (an evaluation's summary)")


@hookimpl
def register_commands(register: Register) -> None:
    register(report_command)
