"""``owrl run``: one task, one episode, a live view of every step."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional, Union

import click

from owrl_sdk.cli import PathArg, check_storage, remote_browser, storage_options
from owrl_sdk.flows.flowplayer import FLOW_POLICY
from owrl_sdk.contract.hookspecs import Register
from owrl_sdk.contract.plugins import Plugins, hookimpl

STATUS_EXIT = {"success": 0, "fail": 1, "aborted": 1, "infra_error": 3}


class LiveView:
    """Prints each step as it finishes: thought, calls, feedback and verdicts. A plugin of the
    episode it shows (``Agent.run(hooks=[view])``): its ``step_end`` sees a step once the run
    folder has written it."""

    def __init__(self, console: Any, max_steps: int):
        self.console = console
        self.started = time.perf_counter()
        self.max_steps = max_steps
        self.status: Any = None

    def reads_changes(self) -> bool:
        """The view prints each call's change feedback: it is computed for the episode."""
        return True

    def thinking(self, index: int) -> None:
        if self.status is not None:
            self.status.update(f"step {index + 1}: waiting for the policy…")

    def step_end(self, step: Any) -> None:
        from rich.markup import escape
        from rich.panel import Panel

        from owrl_sdk.safety.secrets import scrub

        step = scrub(step)  # every string shown (the title's URL, a verdict's detail) without secrets

        lines = []
        if step.turn.thought:
            lines.append(f"[italic]{escape(step.turn.thought)}[/italic]")
        if step.turn.parse_error:
            lines.append(f"[red]unreadable answer:[/red] {escape(step.turn.parse_error)}")
        for record in step.calls:
            head = escape(record.call.describe())
            if record.skipped:
                lines.append(f"[dim]⏭ {head}: not run ({escape(record.skip_reason or '')})[/dim]")
                continue
            result = record.result
            mark = "[green]✓[/green]" if result.ok else "[red]✗[/red]"
            text = escape(result.feedback if result.ok else f"error: {result.error}")
            lines.append(f"{mark} {head}\n   {text}")
            if record.verdict is not None:
                vmark = "[green]expect ✓[/green]" if record.verdict.ok else "[red]expect ✗[/red]"
                lines.append(f"   {vmark} {escape(record.verdict.describe())}")
        elapsed = time.perf_counter() - self.started
        title = f"step {step.index + 1}/{self.max_steps} · {escape(step.observation.url)} · {elapsed:.1f}s"
        self.console.print(Panel("\n".join(lines) or "[dim](no calls)[/dim]", title=title, title_align="left"))
        self.thinking(step.index + 1)


@click.command("run")
@click.option("--task", "intent", help="What the agent should do (taken from the flow when omitted).")
@click.option("--url", help="Start URL (taken from the flow when omitted).")
@click.option("--policy", help="Policy plugin (default: the 'policy' setting).")
@click.option("--model", help="Model id or local path for model policies.")
@click.option("--profile", type=click.Choice(["openwebrl", "owrl"]),
              help="Interface profile of model policies: openwebrl (the released OpenWebRL models' contract) or owrl "
              "(default: by checkpoint).")
@click.option("--flow", "flow_file", type=PathArg("file", "a flow file"), help=f"Play this flow (owrl.flow/1, JSON or YAML) with the {FLOW_POLICY} policy.")
@click.option("--replay", type=PathArg("any", "a trajectory file or run folder"), help="Replay the calls of a recorded trajectory (file or run folder).")
@click.option("--heal-with", "healer", help="With --flow: hand over to this policy when the flow's expectations fail; "
              "a repaired run is saved as a new flow version next to the flow.")
@click.option("--allow-domain", "allow_domains", multiple=True,
              help="Only these hosts (and their subdomains) may be visited; repeat for more.")
@click.option("--max-steps", type=int, help="Steps before the episode ends as failed (default 30).")
@click.option("--headed", is_flag=True, help="Show the browser window.")
@click.option("--browser-endpoint", metavar="WS_URL", help="Connect to a Playwright browser server "
              "(playwright run-server) at this ws:// address instead of launching Chromium.")
@click.option("--cdp-endpoint", metavar="URL", help="Connect over CDP to a running Chromium at this http:// "
              "(or ws://) DevTools address instead of launching one.")
@click.option("--out", type=PathArg("folder", "a folder for run folders"), help="Folder for run folders (default: runs); with --inputs, the batch folder (default: "
              "runs/batch-<time>-<flow>).")
@click.option("--trace", is_flag=True, help="Record a Playwright trace (trace.zip) in the run folder; refused when the "
              "run uses secrets (traces are not redacted).")
@click.option("--trace-with-secrets", is_flag=True, help="Record a trace even though the run uses secrets: it holds "
              "them in clear (the trajectory warns).")
@click.option("--inputs", "inputs_file", type=PathArg("file", "a .csv, .jsonl or .xlsx file of input rows"),
              help="With --flow: run a batch, one episode per row of this .csv (a header naming the flow's inputs), "
              ".jsonl file (an object of inputs per line) or .xlsx workbook (its first sheet, as a CSV; the excel "
              "extra); re-running with the same --out resumes the rows not yet done.")
@click.option("--workers", type=click.IntRange(min=1), help="With --inputs: rows run at a time, each in its own "
              "browser context (default 1).")
@click.option("--retry-failed", is_flag=True, help="With --inputs and an existing --out: run the rows that failed "
              "again, in the same folder, with this flow even if it changed (rows that succeeded are kept; rows that "
              "stopped after their point of no return are not run: see --retry-needs-review).")
@click.option("--retry-needs-review", is_flag=True, help="With --retry-failed: run the needs_review rows again too "
              "(after checking the site for what they created).")
@click.option("--retries", type=click.IntRange(min=0), default=0, show_default=True,
              help="With --inputs: run a row again up to N times when it ends in an infrastructure error before "
              "its point of no return.")
@click.option("--max-failures", type=click.IntRange(min=1), help="With --inputs: stop the batch after N rows failed "
              "(the rows not started stay pending).")
@click.option("--stop-after-same-failure", type=click.IntRange(min=1), help="With --inputs: stop the batch after N "
              "rows in a row failed with the same failure kind.")
@click.option("--key", "key", metavar="COLUMN", help="With --inputs: a row is the row whose COLUMN has this value "
              "(an order number): editing its other values keeps its history and its point of no return (default: "
              "the row's whole content).")
@storage_options
@click.option("--json", "as_json", is_flag=True, help="Print a JSON result to stdout instead of the live view.")
@click.option("--input", "given_inputs", multiple=True, metavar="NAME=VALUE",
              help="A value for {{input:NAME}} in the flow or the task; repeat for more. Checked against the "
              "flow's declared inputs (type, default) before the browser starts.")
def run_command(intent: Optional[str], url: Optional[str], policy: Optional[str], model: Optional[str], profile: Optional[str],
                flow_file: Optional[str], replay: Optional[str], healer: Optional[str], allow_domains: tuple[str, ...], max_steps: Optional[int], headed: bool,
                browser_endpoint: Optional[str], cdp_endpoint: Optional[str],
                out: Optional[str], trace: bool, trace_with_secrets: bool, as_json: bool,
                given_inputs: tuple[str, ...] = (), inputs_file: Optional[str] = None,
                workers: Optional[int] = None, retry_failed: bool = False, retry_needs_review: bool = False,
                retries: int = 0, max_failures: Optional[int] = None,
                stop_after_same_failure: Optional[int] = None, load_storage: Optional[str] = None,
                save_storage: Optional[str] = None, key: Optional[str] = None) -> None:
    """Run one task in a real Chromium and show each step.

    With --flow and --inputs, run a batch: the flow once per row of a CSV or JSONL file."""
    batch_options = {"retry_failed": retry_failed, "retry_needs_review": retry_needs_review, "retries": retries,
                     "max_failures": max_failures, "stop_after_same_failure": stop_after_same_failure, "key": key}
    if inputs_file is not None or workers is not None:
        run_batch(flow_file, inputs_file, workers, intent=intent, url=url, policy=policy, replay=replay, healer=healer,
                  allow_domains=allow_domains, max_steps=max_steps, headed=headed, browser_endpoint=browser_endpoint,
                  cdp_endpoint=cdp_endpoint, out=out, trace=trace or trace_with_secrets, as_json=as_json,
                  given_inputs=given_inputs, storage={"storage_state": load_storage, "save_storage": save_storage},
                  **batch_options)
        return
    from owrl_sdk.errors import UsageError
    from owrl_sdk.contract.plugins import load_checked_settings as load_settings

    given = [f"--{k.replace('_', '-')}" for k, v in batch_options.items() if v]
    if given:
        raise UsageError(f"{', '.join(given)}: for a batch only: give --flow FILE --inputs ROWS too")
    if browser_endpoint and cdp_endpoint:
        raise UsageError("give --browser-endpoint or --cdp-endpoint, not both")
    plugins = Plugins()
    one = prepare_one(plugins, intent, url, policy, flow_file, replay, healer, given_inputs)
    trace = check_trace(trace, trace_with_secrets, one.task.intent, one.flow)
    settings = load_settings({"policy": one.policy, "model": model, "profile": profile, "max_steps": max_steps,
                              "headless": False if headed else None,
                              "allowed_domains": list(allow_domains) or None,
                              "storage_state": load_storage, "save_storage": save_storage,
                              **remote_browser(browser_endpoint, cdp_endpoint)})
    check_storage(settings)
    plugins = plugins.bind(settings)
    agent = one_agent(settings, plugins, one.flow, healer)

    from rich.markup import escape

    from owrl_sdk.support.console import SafeConsole as Console  # page text cannot drive the terminal

    console = Console(stderr=as_json, quiet=as_json)
    view = LiveView(console, settings.max_steps)
    # Everything in these lines that came from a user, a flow, a page or a model is escaped:
    # rich would read "[red]" in an answer or 'role=link[name="Bag"]' in an error as markup.
    console.print(f"[bold]task[/bold] {escape(one.task.intent)}\n[bold]url[/bold]  {escape(one.task.start_url)}\n"
                  f"[bold]policy[/bold] {escape(agent.policy.name)}", highlight=False, soft_wrap=True)

    async def go() -> Any:
        try:
            with console.status("starting the browser…") as status:
                view.status = status
                return await agent.run(one.task, out=out, trace=trace, hooks=[view], trace_with_secrets=trace_with_secrets)
        finally:
            await agent.close()

    traj = asyncio.run(go())
    if healer and flow_file and traj.outcome.status == "success" and getattr(agent.policy, "healed_at", None) is not None:
        save_repair(traj, flow_file, console)
    print_outcome(traj, console, as_json)
    code = STATUS_EXIT[traj.outcome.status]
    if code:
        sys.exit(code)


class OneRun:
    """What ``owrl run`` plays: the prepared task, the flow (None for a policy's task) and the
    policy that plays it."""

    def __init__(self, task: Any, flow: Any, policy: Optional[str]):
        self.task, self.flow, self.policy = task, flow, policy


def prepare_one(plugins: Plugins, intent: Optional[str], url: Optional[str], policy: Optional[str],
                flow_file: Optional[str], replay: Optional[str], healer: Optional[str],
                given_inputs: tuple[str, ...]) -> OneRun:
    """Everything checked before a browser starts: the flow's tools, its inputs and the start
    URL (a plugin scheme resolved). A task or a flow is prepared as every door prepares one (a
    batch row, a server job, ``Agent.run`` and ``Agent.run_flow``: ``RunRequest``)."""
    from owrl_sdk.formats.documents import Flow, check_flow_tools, load_flow, load_trajectory
    from owrl_sdk.errors import UsageError
    from owrl_sdk.rules.inputs import apply_inputs
    from owrl_sdk.flows.runrequest import RunRequest

    if flow_file and replay:
        raise UsageError("give --flow or --replay, not both")
    if healer and not flow_file:
        raise UsageError("--heal-with repairs a flow: give --flow FILE too")

    def note(text: str) -> None:
        click.echo(text, err=True)

    if not (flow_file or replay):
        if not intent:
            raise UsageError("missing --task TEXT (what the agent should do)")
        if not url:
            raise UsageError("missing --url URL (where the agent starts)")
        request = RunRequest(inputs=parse_inputs(given_inputs), url=url, intent=intent, source="--task")
        # the input values travel with the task (Trajectory.inputs records them)
        return OneRun(request.task(plugins, note=note, given_as="--url"), None, policy)
    flow = load_flow(flow_file) if flow_file else Flow.from_trajectory(load_trajectory(str(replay)))
    source = str(flow_file or replay)
    # every call against the tool catalogue now: a typo in turn 9 should not cost a browser and 8 turns
    check_flow_tools(flow, plugins.catalogue.items["tools"], source)
    if policy not in (None, FLOW_POLICY):
        raise UsageError(f"--flow/--replay play with the {FLOW_POLICY} policy, not '{policy}'")
    if not (intent or flow.task):
        raise UsageError("missing --task TEXT (what the agent should do)")
    if not (url or flow.start_url):
        raise UsageError("missing --url URL (where the agent starts)")
    request = RunRequest(flow=flow, inputs=parse_inputs(given_inputs), url=url, intent=intent, source=source)
    values = request.values()
    if values:
        flow = apply_inputs(flow, values)
        check_flow_tools(flow, plugins.catalogue.items["tools"], source)  # the values filled in
    # the flow's output schema and the input values travel with the task
    task = request.task(plugins, values, note=note, given_as="--url" if url else f"{source}: start_url")
    return OneRun(task, flow, FLOW_POLICY)


def check_trace(trace: bool, trace_with_secrets: bool, intent: str, flow: Any) -> bool:
    """Whether to record a trace; one that would hold secrets in clear needs --trace-with-secrets."""
    from owrl_sdk.errors import UsageError

    if trace_with_secrets:
        return True
    if trace and uses_secrets(intent, flow):
        raise UsageError("--trace records the typed values and pages in clear and cannot be redacted, and this run "
                         "uses secrets ({{secret:...}} in the task or flow, or OWRL_SECRET_* set): pass "
                         "--trace-with-secrets to record it anyway, or leave out --trace")
    return trace


def one_agent(settings: Any, plugins: Plugins, flow: Any, healer: Optional[str]) -> Any:
    """The Agent of ``owrl run``: the settings' policy, the flow's player, or the player that
    hands over to ``healer`` when the flow breaks."""
    from owrl_sdk.agent import Agent
    from owrl_sdk.flows.flowplayer import HealingPolicy, flow_memory

    if flow is None:
        return Agent(settings=settings, plugins=plugins)
    memory = flow_memory(plugins.catalogue, settings)
    if healer:
        healing = HealingPolicy(settings, flow=flow, healer=plugins.catalogue.build("policies", healer, settings))
        return Agent(healing, settings=settings, plugins=plugins, memory=memory)
    return Agent(settings=settings, plugins=plugins, memory=memory, flow=flow)


def save_repair(traj: Any, flow_file: str, console: Any) -> None:
    """A healed run's calls saved as the flow's next version (and named in its run folder)."""
    from rich.markup import escape

    from owrl_sdk.formats.documents import Flow, save_trajectory

    target = next_flow_version(flow_file)
    target.write_text(Flow.from_trajectory(traj).to_json(), encoding="utf-8")
    traj.metadata["repaired_flow"] = str(target)
    if traj.metadata.get("run_dir"):  # the run folder was written before the repair: again, with it
        save_trajectory(traj, Path(traj.metadata["run_dir"]) / "trajectory.json")
    console.print(f"[green]flow repaired:[/green] {escape(str(target))}", highlight=False, soft_wrap=True)


def print_outcome(traj: Any, console: Any, as_json: bool) -> None:
    """The outcome, scrubbed of secrets: a JSON object on stdout, or lines for a person."""
    from rich.markup import escape

    from owrl_sdk.safety import secrets
    from owrl_sdk.formats.report import REPORT_NAME, write_run_report

    outcome = secrets.scrub(traj.outcome)
    run_dir = traj.metadata.get("run_dir")
    if as_json:
        result = {"run_dir": run_dir, "outcome": {"status": outcome.status, "answer": outcome.answer,
                                                  "failure": outcome.failure.model_dump() if outcome.failure else None},
                  "steps": len(traj.steps), "inputs": traj.inputs, "outputs": outcome.outputs}
        if "repaired_flow" in traj.metadata:
            result["repaired_flow"] = traj.metadata["repaired_flow"]
        click.echo(secrets.dumps(result))
        return
    colour = "green" if outcome.status == "success" else "red"
    # soft_wrap: an answer or a selector is printed whole, not cut at the terminal's width
    console.print(f"[bold {colour}]{escape(outcome.status)}[/bold {colour}]"
                  + (f" · answer: {escape(outcome.answer)}" if outcome.answer else "")
                  + (f" · {escape(outcome.failure.kind)}: {escape(outcome.failure.detail)}" if outcome.failure else ""),
                  highlight=False, soft_wrap=True)
    for warning in secrets.scrub(traj.warnings):
        console.print(f"[yellow]warning:[/yellow] {escape(warning)}", highlight=False, soft_wrap=True)
    console.print(f"run folder: {escape(str(run_dir))}", highlight=False, soft_wrap=True)
    if run_dir:
        page = Path(run_dir) / REPORT_NAME  # the run folder wrote it when the episode ended
        console.print(f"report: {escape(str(page if page.exists() else write_run_report(run_dir)))}",
                      highlight=False, soft_wrap=True)


def parse_inputs(given: tuple[str, ...]) -> dict[str, str]:
    """``--input NAME=VALUE`` options as a mapping; a malformed one or a name given twice is a UsageError."""
    from owrl_sdk.errors import UsageError

    values: dict[str, str] = {}
    for item in given:
        name, eq, value = item.partition("=")
        name = name.strip()
        if not eq or not name:
            raise UsageError(f"--input {item!r}: write it as NAME=VALUE (e.g. --input name=Maria)")
        if name in values:
            raise UsageError(f"--input {name} is given twice")
        values[name] = value
    return values


def uses_secrets(intent: Optional[str], flow: Any) -> bool:
    """Whether a run may type a secret: a placeholder in the task or the flow, or any OWRL_SECRET_*
    set (a model can be told a placeholder's name). A secret-store plugin can answer others; the run
    folder deletes a trace of an episode that resolved one anyway."""
    import os

    from owrl_sdk.safety import secrets

    if secrets.has_placeholder(intent or "") or (flow is not None and secrets.has_placeholder(flow.to_json())):
        return True
    return any(key.startswith(secrets.ENV_PREFIX) for key in os.environ)


def next_flow_version(path: Union[str, Path]) -> Path:
    """Where a repaired flow is saved (:func:`owrl_sdk.flows.flowplayer.next_flow_version`)."""
    from owrl_sdk.flows.flowplayer import next_flow_version as nxt

    return nxt(path)


def run_batch(flow_file: Optional[str], inputs_file: Optional[str], workers: Optional[int], *, intent: Optional[str],
              url: Optional[str], policy: Optional[str], replay: Optional[str], healer: Optional[str],
              allow_domains: tuple[str, ...], max_steps: Optional[int], headed: bool, browser_endpoint: Optional[str],
              cdp_endpoint: Optional[str], out: Optional[str], trace: bool, as_json: bool,
              given_inputs: tuple[str, ...] = (), storage: Optional[dict[str, Any]] = None,
              **batch_options: Any) -> None:
    """``owrl run --flow F --inputs ROWS``: a :class:`owrl_sdk.flows.batch.Batch` with a progress bar on
    stderr (``--input`` values apply to every row; a row's own value wins); exit 0 when every row
    succeeded, 1 when any failed."""
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from owrl_sdk.flows.batch import NEEDS_REVIEW, Batch, RowResult
    from owrl_sdk.formats.documents import check_flow_tools
    from owrl_sdk.errors import UsageError
    from owrl_sdk.contract.plugins import load_checked_settings

    from owrl_sdk.support.console import SafeConsole as Console  # page text cannot drive the terminal

    if inputs_file is None:
        raise UsageError("--workers runs the rows of a batch in parallel: give --inputs FILE too")
    if batch_options.get("retry_needs_review") and not batch_options.get("retry_failed"):
        batch_options["retry_failed"] = True  # --retry-needs-review is a wider --retry-failed
    if not flow_file:
        raise UsageError("--inputs runs a flow once per row: give --flow FILE too")
    refuse_in_batch(replay=replay, healer=healer, intent=intent, trace=trace, policy=policy,
                    two_browsers=bool(browser_endpoint and cdp_endpoint))
    settings = load_checked_settings({**(storage or {}), "max_steps": max_steps, "headless": False if headed else None,
                                      "allowed_domains": list(allow_domains) or None,
                                      **remote_browser(browser_endpoint, cdp_endpoint)})
    check_storage(settings)
    plugins = Plugins().bind(settings)
    console = Console(stderr=True)

    def note(text: str) -> None:
        console.print(escape(text), highlight=False, soft_wrap=True)

    start = batch_start_url(url, flow_file, plugins, note)
    counts = {"ok": 0, "failed": 0, "review": 0}
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[counts]}"), TimeElapsedColumn(), console=console)

    def on_row(result: RowResult) -> None:
        if result.status == "success":
            counts["ok"] += 1
        else:  # the same statuses as the summary's: a row past its point of no return needs review
            counts["review" if result.status == NEEDS_REVIEW else "failed"] += 1
            why = f"{result.failure}: {result.detail}" if result.detail else str(result.failure)
            console.print(f"[red]row {result.row}: {escape(result.status)}[/red] · {escape(why)}", highlight=False,
                          soft_wrap=True)
        review = f" · {counts['review']} need review" if counts["review"] else ""
        progress.update(bar, advance=1, counts=f"{counts['ok']} ok · {counts['failed']} failed{review}")

    if batch_options.get("retry_failed") and not (out and (Path(out) / "rows.jsonl").exists()):
        raise UsageError("--retry-failed runs the failed rows of an earlier batch again: give its folder as --out")
    batch = Batch(flow_file, inputs_file, out, workers or 1, settings, plugins, url=start, on_row=on_row,
                  common=parse_inputs(given_inputs), **batch_options)
    check_flow_tools(batch.flow, plugins.catalogue.items["tools"], flow_file)
    total, todo = len(batch.rows), len(batch.pending())
    with progress:
        bar = progress.add_task(escape(f"{Path(flow_file).stem} · batch"), total=total, completed=total - todo,
                                counts="")
        if todo < total:
            console.print(f"resuming: {total - todo} of {total} rows already done in {escape(str(batch.out))}",
                          highlight=False, soft_wrap=True)
        try:
            summary = asyncio.run(batch.run_async())
        except KeyboardInterrupt:
            left = len(batch.pending())
            console.print(f"interrupted: {total - left} of {total} rows done, {left} left; the same command resumes "
                          f"them ({escape(str(batch.out / 'batch.json'))})", highlight=False, soft_wrap=True)
            from owrl_sdk.support.interrupts import exit_code

            sys.exit(exit_code())
    print_batch_summary(summary, batch.out, console, as_json)
    if summary["failed"] or summary["needs_review"] or summary["stopped"]:
        sys.exit(1)


def refuse_in_batch(*, replay: Optional[str], healer: Optional[str], intent: Optional[str], trace: bool,
                    policy: Optional[str], two_browsers: bool) -> None:
    """The options a batch cannot take: it plays its flow as it is, with the flow's player."""
    from owrl_sdk.errors import UsageError

    for given, name in ((replay, "--replay"), (healer, "--heal-with"), (intent, "--task"), (trace, "--trace")):
        if given:
            raise UsageError(f"{name} is not available with --inputs (a batch plays its flow as it is)")
    if policy not in (None, FLOW_POLICY):
        raise UsageError(f"--flow plays with the {FLOW_POLICY} policy, not '{policy}'")
    if two_browsers:
        raise UsageError("give --browser-endpoint or --cdp-endpoint, not both")


def batch_start_url(url: Optional[str], flow_file: str, plugins: Plugins, note: Callable[[str], None]) -> Optional[str]:
    """The batch's start URL resolved once: ``--url``, else the flow's own address as a single
    run reads it; None where a row's values fill a placeholder in it (each row resolves its own)."""
    from owrl_sdk.flows.runrequest import RunRequest

    if url:
        return RunRequest(url=url).start_url(plugins, note=note, given_as="--url")
    from owrl_sdk.formats.documents import load_flow
    from owrl_sdk.rules.inputs import PLACEHOLDER

    flow = load_flow(flow_file)
    if not flow.start_url or PLACEHOLDER.search(flow.start_url):
        return None
    return RunRequest(flow=flow, source=flow_file).start_url(plugins, note=note)


def print_batch_summary(summary: dict[str, Any], folder: Path, console: Any, as_json: bool) -> None:
    """The batch's counts on stderr (and the summary as JSON on stdout with --json)."""
    from rich.markup import escape

    if as_json:
        click.echo(json.dumps(summary, indent=2, ensure_ascii=False))
    colour = "green" if not (summary["failed"] or summary["needs_review"]) else "red"
    n = summary["needs_review"]
    review = f", {n} need{'s' if n == 1 else ''} review" if n else ""
    console.print(f"[bold {colour}]{summary['succeeded']} succeeded, {summary['failed']} failed{review}[/bold {colour}] "
                  f"of {summary['rows']} rows ({summary['ran']} run now)", highlight=False, soft_wrap=True)
    if summary["stopped"]:
        console.print(f"[red]stopped: {escape(summary['stopped'])}; {summary['pending']} rows not run[/red]",
                      highlight=False, soft_wrap=True)
    console.print(f"batch: {escape(str(folder / 'batch.json'))} · {escape(str(folder / 'batch.csv'))} · "
                  f"{escape(str(folder / 'report.html'))}", highlight=False, soft_wrap=True)


@hookimpl
def register_commands(register: Register) -> None:
    register(run_command)
