"""``owrl tasks [SUITE]``: the task suites plugins registered, or the tasks of one suite or task file."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Optional

import click

from owrl_sdk.contract.hookspecs import Register
from owrl_sdk.contract.plugins import hookimpl

TASK_FILE_SUFFIXES = (".jsonl", ".json")


def _close(suite: Any) -> None:
    """Stop what listing a suite's tasks started (the demo shop serves itself until teardown)."""
    try:
        asyncio.run(suite.teardown())
    except Exception:  # noqa: BLE001 - listing is done; a teardown problem is not the user's
        pass


def as_written(suite: Any, url: str) -> str:
    """A task's start URL as a user would type it.

    A suite that serves its own site (``demo-shop``) gives start URLs on a port that lives
    only as long as the suite; when the suite names its URL scheme (``scheme``, ``demo:shop``)
    and its ``base_url``, the URL is shown in that scheme."""
    scheme = getattr(suite, "scheme", None)
    base = getattr(suite, "base_url", None)
    if isinstance(scheme, str) and isinstance(base, str) and base and url.startswith(base.rstrip("/")):
        return scheme + url[len(base.rstrip("/")):]
    return url


def suite_rows(plugins: Any, settings: Any) -> list[dict[str, Any]]:
    """Every registered task suite: name, plugin, number of tasks (None if it cannot list them), description."""
    rows = []
    catalogue = plugins.catalogue
    for name in catalogue.names("task_suites"):
        cls = catalogue.items["task_suites"][name]
        row: dict[str, Any] = {"suite": name, "plugin": catalogue.owners[("task_suites", name)], "tasks": None,
                               "description": getattr(cls, "description", "") or "", "error": None}
        suite = None
        try:
            suite = cls(settings)
            row["tasks"] = len(suite.tasks())
        except Exception as err:  # noqa: BLE001 - one suite that cannot list its tasks must not hide the others
            row["error"] = str(err) or type(err).__name__
        finally:
            if suite is not None:
                _close(suite)
        rows.append(row)
    return rows


def task_rows(suite: str, plugins: Any, settings: Any) -> tuple[str, list[dict[str, Any]], list[str]]:
    """(suite name, its tasks as {id, intent, start_url, difficulty}, skipped-record warnings)."""
    from owrl_sdk.errors import UsageError
    from owrl_sdk.formats.taskfiles import load_tasks

    path = Path(suite)
    if path.is_file():
        tasks, bad = load_tasks(path)
        warnings = [f"skipped {suite} {b.where}: {b.error}" for b in bad]
        if not tasks:
            raise UsageError(f"{suite}: no readable task")
        return path.stem, [_task_row(t, t.start_url) for t in tasks], warnings
    known = plugins.catalogue.names("task_suites")
    if suite not in known:
        looks_like_file = path.suffix in TASK_FILE_SUFFIXES or "/" in suite or "\\" in suite
        what = f"{suite}: no such task file" if looks_like_file else f"no task suite named '{suite}'"
        raise UsageError(f"{what} (task suites: {', '.join(known) or 'none'}; a .jsonl/.json task file works too)")
    the_suite = plugins.catalogue.items["task_suites"][suite](settings)
    try:
        return suite, [_task_row(t, as_written(the_suite, t.start_url)) for t in the_suite.tasks()], []
    finally:
        _close(the_suite)


def _task_row(task: Any, start_url: str) -> dict[str, Any]:
    return {"id": task.id, "intent": task.intent, "start_url": start_url, "difficulty": task.difficulty}


@click.command("tasks")
@click.argument("suite", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def tasks_command(suite: Optional[str], as_json: bool) -> None:
    """List the task suites (for `owrl eval --suite`), or the tasks of SUITE.

    SUITE is a suite name or a task file (.jsonl/.json). Without it: each suite, the plugin
    that registered it and its number of tasks. With it: each task's id, difficulty, start
    URL and intent."""
    from rich.markup import escape
    from rich.table import Table

    from owrl_sdk.contract.plugins import Plugins
    from owrl_sdk.contract.plugins import load_checked_settings as load_settings

    from owrl_sdk.support.console import SafeConsole as Console  # page text cannot drive the terminal

    plugins = Plugins()
    settings = load_settings()
    console = Console()
    if suite is None:
        rows = suite_rows(plugins, settings)
        if as_json:
            click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
            return
        table = Table(title="task suites")
        for col in ("suite", "plugin", "tasks", "description"):
            table.add_column(col, justify="right" if col == "tasks" else "left", overflow="fold")
        for r in rows:
            count = str(r["tasks"]) if r["tasks"] is not None else "[red]?[/red]"
            about = escape(r["description"]) if r["error"] is None else f"[red]cannot list: {escape(r['error'])}[/red]"
            table.add_row(escape(r["suite"]), escape(r["plugin"]), count, about)
        console.print(table)
        console.print("`owrl tasks SUITE` lists a suite's tasks; `owrl eval --suite SUITE` runs them.",
                      highlight=False, markup=False)
        return
    name, rows, warnings = task_rows(suite, plugins, settings)
    errors = Console(stderr=True)
    for warning in warnings:
        errors.print(f"[yellow]{escape(warning)}[/yellow]", highlight=False, soft_wrap=True)
    if as_json:
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    table = Table(title=escape(f"{name}: {len(rows)} task(s)"))
    for col in ("id", "difficulty", "start URL", "intent"):
        table.add_column(col, overflow="fold")
    for r in rows:
        level = str(r["difficulty"]) if r["difficulty"] is not None else "-"
        table.add_row(escape(r["id"]), level, escape(r["start_url"]), escape(r["intent"]))
    console.print(table)


@hookimpl
def register_commands(register: Register) -> None:
    register(tasks_command)
