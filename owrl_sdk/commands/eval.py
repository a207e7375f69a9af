"""``owrl eval``: a suite's tasks, N episodes each, on W browser contexts; judged and summarised."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import click

from owrl_sdk.cli import remote_browser
from owrl_sdk.contract.hookspecs import Register
from owrl_sdk.contract.plugins import hookimpl

if TYPE_CHECKING:
    from owrl_sdk.scheduling.evaluation import EpisodeRecord


def _fmt_rate(block: dict[str, Any]) -> str:
    low, high = block["ci95"]
    return f"{block['success_rate']:.0%} [{low:.0%}, {high:.0%}]"


@click.command("eval")
@click.option("--suite", required=True, help="A task suite name (owrl tasks lists them) or a task file (.jsonl/.json).")
@click.option("--tasks", "task_ids", help="Comma-separated task ids to run (default: all).")
@click.option("--episodes", type=click.IntRange(min=1), default=1, show_default=True, help="Episodes per task.")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True, help="Episodes in parallel: browser contexts (local backend) or Ray actors (ray).")
@click.option("--policy", help="Policy plugin (default: the 'policy' setting).")
@click.option("--model", help="Model id or local path for model policies.")
@click.option("--profile", type=click.Choice(["openwebrl", "owrl"]),
              help="Interface profile of model policies: openwebrl (the released OpenWebRL models' contract) or owrl "
              "(default: by checkpoint).")
@click.option("--judge", default="composite", show_default=True, help="Judge plugin that scores each episode.")
@click.option("--max-steps", type=int, help="Steps per episode (default: the task's, else 30).")
@click.option("--browser-endpoint", metavar="WS_URL", help="Connect to a Playwright browser server "
              "(playwright run-server) at this ws:// address instead of launching Chromium.")
@click.option("--cdp-endpoint", metavar="URL", help="Connect over CDP to a running Chromium at this http:// "
              "(or ws://) DevTools address instead of launching one.")
@click.option("--backend", default="local", show_default=True, metavar="NAME",
              help="The executor that runs the episodes: local (this process), ray (Ray actors each owning one "
              "browser) or one a plugin registers (register_executors).")
@click.option("--ray-address", metavar="ADDR", help="(ray) A running Ray cluster to join (default: RAY_ADDRESS, else a local Ray for the run).")
@click.option("--contexts", type=click.IntRange(min=1), default=1, show_default=True,
              help="(ray) Browser contexts, i.e. episodes in flight, per worker.")
@click.option("--out", type=click.Path(file_okay=False), help="Output folder (default: eval/<suite>-<policy>).")
@click.option("--json", "as_json", is_flag=True, help="Print summary.json to stdout instead of the table.")
@click.option("--fail-under", type=click.FloatRange(0, 1), metavar="RATE",
              help="Exit 1 when the success rate (of the judged episodes, 0 to 1) is below RATE: a CI gate.")
def eval_command(suite: str, task_ids: Optional[str], episodes: int, workers: int, policy: Optional[str],
                 model: Optional[str], profile: Optional[str], judge: str, max_steps: Optional[int], browser_endpoint: Optional[str],
                 cdp_endpoint: Optional[str], backend: str, ray_address: Optional[str], contexts: int,
                 out: Optional[str], as_json: bool, fail_under: Optional[float]) -> None:
    """Evaluate a policy on a task suite; re-running the same command resumes."""
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from owrl_sdk.errors import UsageError
    from owrl_sdk.scheduling.evaluation import EvalPlan, Evaluation
    from owrl_sdk.scheduling.executors import executor_class
    from owrl_sdk.contract.plugins import Plugins
    from owrl_sdk.contract.plugins import load_checked_settings as load_settings

    from owrl_sdk.support.console import SafeConsole as Console  # page text cannot drive the terminal

    if ray_address and backend != "ray":
        raise UsageError("--ray-address needs --backend ray")
    if browser_endpoint and cdp_endpoint:
        raise UsageError("give --browser-endpoint or --cdp-endpoint, not both")
    settings = load_settings({"policy": policy, "model": model, "profile": profile, "max_steps": max_steps,
                              **remote_browser(browser_endpoint, cdp_endpoint)})
    plugins = Plugins().bind(settings)
    executor_cls = executor_class(plugins, backend)  # an unknown backend fails here, naming the known ones
    console = Console(stderr=True)
    the_suite, tasks, suite_name = suite_and_tasks(suite, task_ids, settings, plugins, console)
    plugins.catalogue.get("judges", judge)
    plugins.catalogue.get("policies", settings.policy)
    executor = executor_cls(settings, plugins, workers, address=ray_address, contexts=contexts)
    out_dir = Path(out or f"eval/{suite_name}-{settings.policy}")
    plan = EvalPlan(suite=the_suite, tasks=tasks, episodes=episodes, workers=workers, policy=settings.policy,
                    judge=judge, out=out_dir)

    evaluation = Evaluation(plan, settings, plugins, executor=executor)
    total = len(tasks) * episodes
    done_before = total - len(evaluation.pending())  # what episodes.jsonl already holds
    wins = {"ok": 0, "judged": 0}
    # A TextColumn's text is read as markup after formatting: the description (a file's stem, a
    # policy's name) is escaped where it is made.
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), console=console)

    with progress:
        bar = progress.add_task(escape(f"{suite_name} · {settings.policy}"), total=total, completed=done_before, rate="")
        if done_before:
            console.print(f"resuming: {done_before} of {total} episodes already in {escape(str(out_dir / 'episodes.jsonl'))}",
                          highlight=False, soft_wrap=True)

        def on_record(record: EpisodeRecord) -> None:
            if not record.infra:
                wins["judged"] += 1
                wins["ok"] += bool(record.success)
            rate = f"success {wins['ok'] / wins['judged']:.0%}" if wins["judged"] else ""
            progress.update(bar, advance=1, rate=rate)

        evaluation.on_record = on_record
        summary = asyncio.run(evaluation.run())

    from owrl_sdk.formats.report import write_eval_report

    console.print(f"report: {escape(str(write_eval_report(out_dir)))}", highlight=False, soft_wrap=True)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        _gate(summary, fail_under)
        return
    print_eval_table(summary, f"{suite_name} · policy {settings.policy} · judge {judge}", backend, out_dir)
    _gate(summary, fail_under)


def _gate(summary: dict[str, Any], fail_under: Optional[float]) -> None:
    """``--fail-under``: exit 1, with a line saying why, when the success rate is below it."""
    if fail_under is None:
        return
    rate = float(summary.get("success_rate") or 0.0)
    if rate < fail_under:
        click.echo(f"success rate {rate:.1%} is below --fail-under {fail_under:.1%}", err=True)
        sys.exit(1)


def suite_and_tasks(suite: str, task_ids: Optional[str], settings: Any, plugins: Any,
                    console: Any) -> tuple[Any, list[Any], str]:
    """The suite (a task file, or a registered suite by name), the tasks ``--tasks`` picks from
    it (an unknown id is a UsageError naming a few known ones), and the suite's name."""
    from rich.markup import escape

    from owrl_sdk.errors import UsageError
    from owrl_sdk.scheduling.evaluation import TaskFileSuite
    from owrl_sdk.formats.taskfiles import load_tasks

    if Path(suite).is_file():
        tasks, bad = load_tasks(suite)
        for b in bad:
            console.print(f"[yellow]skipped {escape(suite)} {escape(str(b.where))}: {escape(str(b.error))}[/yellow]",
                          highlight=False, soft_wrap=True)
        if not tasks:
            raise UsageError(f"{suite}: no readable task")
        the_suite: Any = TaskFileSuite(settings, tasks)
        suite_name = Path(suite).stem
    else:
        the_suite = plugins.catalogue.get("task_suites", suite)(settings)
        tasks = the_suite.tasks()
        suite_name = suite
    if task_ids:
        wanted = [t.strip() for t in task_ids.split(",") if t.strip()]
        known = {t.id: t for t in tasks}
        missing = [w for w in wanted if w not in known]
        if missing:
            sample = ", ".join(list(known)[:8])
            raise UsageError(f"unknown task id(s) in --tasks: {', '.join(missing)} (e.g. {sample})")
        tasks = [known[w] for w in wanted]
    return the_suite, list(tasks), suite_name


def print_eval_table(summary: dict[str, Any], title: str, backend: str, out_dir: Path) -> None:
    """The per-task table and where the results are, on stdout."""
    from rich.markup import escape
    from rich.table import Table

    from owrl_sdk.support.console import SafeConsole as Console

    # Table cells and titles given as str are read as markup: task ids and names are escaped.
    table = Table(title=escape(title))
    for col in ("task", "episodes", "success [95% CI]", "mean steps", "mean time", "infra errors"):
        table.add_column(col, justify="left" if col == "task" else "right")
    for tid, b in summary["per_task"].items():
        table.add_row(escape(tid), str(b["episodes"]), _fmt_rate(b), f"{b['mean_steps']:.1f}", f"{b['mean_seconds']:.1f}s",
                      str(b["infra_errors"]))
    table.add_section()
    table.add_row("[bold]overall[/bold]", str(summary["episodes"]), _fmt_rate(summary), f"{summary['mean_steps']:.1f}",
                  f"{summary['mean_seconds']:.1f}s", str(summary["infra_errors"]))
    out_console = Console()
    out_console.print(table)
    if summary.get("workers_lost") or summary.get("episodes_retried") or summary.get("backend", "local") != "local":
        out_console.print(f"{escape(backend)}: {summary['workers_lost']} worker(s) lost, {summary['episodes_retried']} episode(s) retried")
    out_console.print(f"results: {escape(str(out_dir / 'summary.json'))} · episodes: {escape(str(out_dir / 'episodes.jsonl'))}",
                      highlight=False, soft_wrap=True)


@hookimpl
def register_commands(register: Register) -> None:
    register(eval_command)
