"""``owrl record URL --out flow.json``: record what a person does in Chromium as a flow.

The browser is shown in the display of ``DISPLAY``; without one, under an ``Xvfb`` started
here on a free display number (reach it with a VNC server or ``xwd``); without either, the
command stops with a one-line error suggesting ``--headless``. ``--headless`` records the
same way in a browser without a window, for scripted recording and tests: a script drives it
through ``--debug-port`` (Playwright's ``connect_over_cdp``) or uses
:class:`owrl_sdk.recorder.Recorder` in Python.

Ctrl-C (SIGINT or SIGTERM) or closing the browser ends the recording; the flow is checked
against the tool catalogue and written to ``--out``. Until then the flow recorded so far is
kept in ``.NAME.recording`` next to it, rewritten after every action.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Optional

import click

from owrl_sdk.cli import check_storage, storage_options
from owrl_sdk.contract.hookspecs import Register
from owrl_sdk.contract.plugins import hookimpl
from owrl_sdk.rules.urls import plugin_scheme


def _free_display() -> int:
    for number in range(99, 200):
        if not Path(f"/tmp/.X{number}-lock").exists() and not Path(f"/tmp/.X11-unix/X{number}").exists():
            return number
    raise click.ClickException("no free X display number between :99 and :199 for Xvfb")


def start_xvfb(settings: Any) -> "subprocess.Popen[bytes]":
    """An ``Xvfb`` on a free display, the size of the viewport; ``DISPLAY`` is set to it."""
    from owrl_sdk.errors import UsageError

    number = _free_display()
    size = f"{settings.viewport_width + 100}x{settings.viewport_height + 200}x24"
    proc = subprocess.Popen(["Xvfb", f":{number}", "-screen", "0", size, "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not Path(f"/tmp/.X11-unix/X{number}").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise UsageError(f"Xvfb did not start on :{number}; record with --headless instead")
        time.sleep(0.1)
    os.environ["DISPLAY"] = f":{number}"
    return proc


async def _record(recorder: Any) -> Any:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, recorder.finished.set)
    try:
        await recorder.start()
        click.echo(f"recording {recorder.url}: act in the browser; Ctrl-C or close the browser to finish", err=True)
        await recorder.wait()
        return await recorder.stop()
    finally:
        if recorder.host is not None and not recorder.host.closed:
            await recorder.host.close()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


@click.command("record")
@click.argument("url")
@click.option("--out", "-o", "--output", "out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Where to write the flow (JSON).")
@click.option("--task", default=None, metavar="TEXT",
              help='The flow\'s task (default: "Replay of the recording on HOST").')
@click.option("--input-fields", default="", metavar="NAME[,NAME]",
              help="Fields (by label or name) whose values become {{input:NAME}} placeholders, with the "
                   "recorded value as the input's default: typed text, the option chosen in a select, a "
                   "checkbox's state.")
@click.option("--headless", is_flag=True,
              help="Record in a browser without a window (for scripted recording and tests).")
@click.option("--debug-port", type=click.IntRange(1, 65535), default=None, metavar="PORT",
              help="Open Chromium's remote debugging on this port, so a script can drive the recorded browser.")
@click.option("--allow-domain", "allow_domains", multiple=True, metavar="HOST",
              help="Hosts the recording may visit (repeatable; subdomains included); a link, redirect or request "
                   "to another host is blocked and not recorded. The allowed_domains and blocked_domains "
                   "settings apply too.")
@click.option("--json", "as_json", is_flag=True,
              help='Print JSON when done: {"flow": OUT, "turns": N, "calls": N, "inputs": {...}, "missing_inputs": [...], '
                   '"warnings": [...]}.')
@storage_options
def record_command(url: str, out: Path, task: Optional[str], input_fields: str, headless: bool,
                   debug_port: Optional[int], load_storage: Optional[str] = None,
                   save_storage: Optional[str] = None, as_json: bool = False,
                   allow_domains: tuple[str, ...] = ()) -> None:
    """Open URL in Chromium and record what you do there as a flow (owrl.flow/1).

    Clicks, typing (one write per field, with its final value, however it was typed), selections, key presses
    (Enter, Escape, Tab, arrows), navigations, tab switches and dialog answers become calls,
    each with a selector (role and name first) and an expectation of what it changed.
    Alt+Shift+E over an element records an extract of its text, saved as an output.
    Password fields are written as {{secret:NAME}}, never with the typed value. End with
    Ctrl-C or by closing the browser; replay with `owrl run --flow OUT`."""
    from owrl_sdk.commands.inspect import _check_url
    from owrl_sdk.errors import UsageError
    from owrl_sdk.contract.plugins import Plugins, load_checked_settings
    from owrl_sdk.recorder import Recorder

    xvfb = None
    if not headless and not os.environ.get("DISPLAY"):
        if shutil.which("Xvfb") is None:
            raise UsageError("no display to show the browser in (DISPLAY is unset and Xvfb is not installed); "
                             "record without a window with --headless")
    plugins = Plugins()
    settings = load_checked_settings({"headless": headless, "storage_state": load_storage,
                                      "save_storage": save_storage, "allowed_domains": list(allow_domains) or None})
    check_storage(settings)
    plugins = plugins.bind(settings)
    given = str(Path(url).expanduser()) if url.startswith("~") else url
    plugin_url = plugin_scheme(given, plugins)
    from owrl_sdk.flows.runrequest import RunRequest

    # the address rules every door applies (a bare host gets https://, a path file://); _check_url
    # says what is wrong with an address in this command's words
    start_url = RunRequest(url=given).start_url(plugins, check=False) or given
    resolved = plugins.resolve_url(start_url)
    _check_url(given, resolved, settings, plugin_url=plugin_url)
    fields = tuple(f.strip() for f in input_fields.split(",") if f.strip())
    recorder = Recorder(resolved, out, settings, plugins, start_url=start_url, task=task or "", input_fields=fields)
    if debug_port is not None:
        base_hook = plugins.browser_launch_options

        def with_port(options: dict[str, Any]) -> dict[str, Any]:
            options = base_hook(options)
            options["args"] = [*options.get("args", []), f"--remote-debugging-port={debug_port}"]
            return options

        recorder.launch_hook = with_port
    if not headless and not os.environ.get("DISPLAY"):
        xvfb = start_xvfb(settings)
    try:
        flow = asyncio.run(_record(recorder))
    finally:
        if xvfb is not None:
            xvfb.terminate()
            try:
                xvfb.wait(5)
            except subprocess.TimeoutExpired:
                xvfb.kill()
    calls = sum(len(turn.calls) for turn in flow.turns)
    missing = [name for name in fields if name not in recorder.builder.inputs]
    for name in missing:
        click.echo(f"note: no field named {name!r} was typed into; the flow has no input {name}", err=True)
    for warning in recorder.warnings:  # the log said it as it happened; the end repeats it, where it is read
        click.echo(f"warning: {warning}", err=True)
    if as_json:
        import json

        click.echo(json.dumps({"flow": str(out), "turns": len(flow.turns), "calls": calls,
                               "inputs": dict(recorder.builder.inputs), "missing_inputs": missing,
                               "warnings": list(recorder.warnings)}))
        return
    click.echo(f"wrote {out}: {len(flow.turns)} turns, {calls} calls; replay with: owrl run --flow {out}")


@hookimpl
def register_commands(register: Register) -> None:
    register(record_command)
