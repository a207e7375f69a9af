"""``owrl run``: one task, one episode, a live view of every step."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any, Optional

import click

from owrl_sdk.plugins import hookimpl

STATUS_EXIT = {"success": 0, "fail": 1, "aborted": 1, "infra_error": 3}


class LiveView:
    """Prints each step as it finishes: thought, calls, feedback and verdicts."""

    def __init__(self, console: Any, max_steps: int):
        self.console = console
        self.started = time.perf_counter()
        self.max_steps = max_steps
        self.status: Any = None

    def thinking(self, index: int) -> None:
        if self.status is not None:
            self.status.update(f"step {index + 1}: waiting for the policy…")

    def __call__(self, trajectory: Any, step: Any) -> None:
        if step is None:
            return
        from rich.markup import escape
        from rich.panel import Panel

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
@click.option("--flow", "flow_file", type=click.Path(dir_okay=False), help="Play this flow (owrl.flow/1, JSON or YAML) with the scripted policy.")
@click.option("--replay", type=click.Path(), help="Replay the calls of a recorded trajectory (file or run folder).")
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
@click.option("--out", type=click.Path(file_okay=False), help="Folder for run folders (default: runs).")
@click.option("--trace", is_flag=True, help="Record a Playwright trace (trace.zip) in the run folder.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON result to stdout instead of the live view.")
def run_command(intent: Optional[str], url: Optional[str], policy: Optional[str], model: Optional[str], profile: Optional[str],
                flow_file: Optional[str], replay: Optional[str], healer: Optional[str], allow_domains: tuple[str, ...], max_steps: Optional[int], headed: bool,
                browser_endpoint: Optional[str], cdp_endpoint: Optional[str],
                out: Optional[str], trace: bool, as_json: bool) -> None:
    """Run one task in a real Chromium and show each step."""
    from owrl_sdk.agent import Agent
    from owrl_sdk.config import load_settings
    from owrl_sdk.documents import Flow, load_flow, load_trajectory
    from owrl_sdk.errors import UsageError

    if flow_file and replay:
        raise UsageError("give --flow or --replay, not both")
    if healer and not flow_file:
        raise UsageError("--heal-with repairs a flow: give --flow FILE too")
    if browser_endpoint and cdp_endpoint:
        raise UsageError("give --browser-endpoint or --cdp-endpoint, not both")
    flow: Optional[Flow] = None
    if flow_file:
        flow = load_flow(flow_file)
    elif replay:
        flow = Flow.from_trajectory(load_trajectory(replay))
    if flow is not None:
        if policy not in (None, "scripted"):
            raise UsageError(f"--flow/--replay play with the scripted policy, not '{policy}'")
        policy = "scripted"
        intent = intent or flow.task
        url = url or flow.start_url
    if not intent:
        raise UsageError("missing --task TEXT (what the agent should do)")
    if not url:
        raise UsageError("missing --url URL (where the agent starts)")
    url = resolve_url(url)

    settings = load_settings({"policy": policy, "model": model, "profile": profile, "max_steps": max_steps,
                              "headless": False if headed else None,
                              "allowed_domains": list(allow_domains) or None,
                              **remote_browser(browser_endpoint, cdp_endpoint)})
    if healer:
        from owrl_scripted import HealingPolicy
        from owrl_sdk.plugins import Plugins

        plugins = Plugins()
        healing = HealingPolicy(settings, flow=flow, healer=plugins.catalogue.get("policies", healer)(settings))
        agent = Agent(healing, settings=settings, plugins=plugins)
    else:
        agent = Agent(settings=settings, **({"flow": flow} if flow is not None else {}))

    from rich.console import Console

    console = Console(stderr=as_json, quiet=as_json)
    view = LiveView(console, settings.max_steps)
    from rich.markup import escape

    # Everything in these lines that came from a user, a flow, a page or a model is escaped:
    # rich would read "[red]" in an answer or 'role=link[name="Bag"]' in an error as markup.
    console.print(f"[bold]task[/bold] {escape(intent)}\n[bold]url[/bold]  {escape(url)}\n"
                  f"[bold]policy[/bold] {escape(agent.policy.name)}", highlight=False, soft_wrap=True)

    async def go():
        try:
            with console.status("starting the browser…") as status:
                view.status = status
                return await agent.run(intent, url, out=out, trace=trace, on_step=view)
        finally:
            await agent.close()

    traj = asyncio.run(go())
    outcome = traj.outcome
    if healer and outcome.status == "success" and getattr(agent.policy, "healed_at", None) is not None:
        repaired = Flow.from_trajectory(traj)
        target = next_flow_version(flow_file)
        target.write_text(repaired.to_json(), encoding="utf-8")
        traj.metadata["repaired_flow"] = str(target)
        console.print(f"[green]flow repaired:[/green] {escape(str(target))}", highlight=False, soft_wrap=True)
    run_dir = traj.metadata.get("run_dir")
    failure = outcome.failure.model_dump() if outcome.failure else None
    if as_json:
        result = {"run_dir": run_dir, "outcome": {"status": outcome.status, "answer": outcome.answer,
                                                  "failure": failure}, "steps": len(traj.steps)}
        if "repaired_flow" in traj.metadata:
            result["repaired_flow"] = traj.metadata["repaired_flow"]
        click.echo(json.dumps(result))
    else:
        colour = "green" if outcome.status == "success" else "red"
        # soft_wrap: an answer or a selector is printed whole, not cut at the terminal's width
        console.print(f"[bold {colour}]{escape(outcome.status)}[/bold {colour}]"
                      + (f" · answer: {escape(outcome.answer)}" if outcome.answer else "")
                      + (f" · {escape(outcome.failure.kind)}: {escape(outcome.failure.detail)}" if outcome.failure else ""),
                      highlight=False, soft_wrap=True)
        for warning in traj.warnings:
            console.print(f"[yellow]warning:[/yellow] {escape(warning)}", highlight=False, soft_wrap=True)
        console.print(f"run folder: {escape(str(run_dir))}", highlight=False, soft_wrap=True)
        if run_dir:
            from owrl_sdk.report import write_run_report

            console.print(f"report: {escape(str(write_run_report(run_dir)))}", highlight=False, soft_wrap=True)
    code = STATUS_EXIT[outcome.status]
    if code:
        sys.exit(code)


def remote_browser(browser_endpoint: Optional[str], cdp_endpoint: Optional[str]) -> dict[str, Optional[str]]:
    """Settings overrides for --browser-endpoint / --cdp-endpoint: one given on the command line replaces
    both settings, so that an endpoint from the environment or owrl.toml does not join it."""
    if not (browser_endpoint or cdp_endpoint):
        return {}
    return {"browser_endpoint": browser_endpoint or "", "cdp_endpoint": cdp_endpoint or ""}


def next_flow_version(path):
    from owrl_scripted import next_flow_version as nxt

    return nxt(path)


def resolve_url(url: str) -> str:
    """URLs as users type them: a bare host gets https://, a path becomes a file:// URL."""
    if "://" in url or url.startswith(("about:", "data:", "demo:")):
        return url  # plugin schemes (demo:shop) are resolved by the resolve_url hook
    p = Path(url)
    if p.exists():
        return p.resolve().as_uri()
    return "https://" + url


@hookimpl
def register_commands(register):
    register(run_command)
