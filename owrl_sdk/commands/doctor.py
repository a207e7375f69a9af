"""``owrl doctor``: every component owrl relies on, its state and what to do about it."""

from __future__ import annotations

import importlib.util
import platform
import sys
from dataclasses import dataclass
from typing import Callable, Optional, Union

import click

from owrl_sdk.contract.hookspecs import Register
from owrl_sdk.contract.plugins import hookimpl


@dataclass
class Check:
    name: str
    status: str  # "ok", "warn", "fail"
    state: str
    remedy: str = ""


def _python() -> Check:
    v = sys.version_info
    ok = v >= (3, 10)
    return Check("python", "ok" if ok else "fail", platform.python_version(), "" if ok else "use Python 3.10 or newer")


def _playwright() -> Check:
    try:
        from importlib.metadata import version

        return Check("playwright", "ok", version("playwright"))
    except Exception:  # noqa: BLE001
        return Check("playwright", "fail", "not installed", "pip install playwright")


def _chromium() -> list[Check]:
    from owrl_sdk.browser.chromium import BASE_ARGS, REMEDY, find_chromium

    choice = find_chromium(headless=True)  # what a headless run launches
    if choice is None:
        return [Check("chromium", "fail", "none found", REMEDY)]
    where = choice.path or "Playwright's managed browser"
    found = Check("chromium", "ok", f"{where} (from {choice.source})")
    try:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=choice.path, args=list(BASE_ARGS), headless=True)
            version = browser.version
            browser.close()
        return [found, Check("chromium launch", "ok", f"launched headless, version {version}")]
    except Exception as err:  # noqa: BLE001
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return [found, Check("chromium launch", "fail", first[:160], "check the executable runs: CHROMIUM --headless --version")]


def _remote_browser() -> list[Check]:
    """The browser_endpoint / cdp_endpoint setting, when one is set: connected to and asked its version."""
    import asyncio

    from owrl_sdk.browser import BrowserHost
    from owrl_sdk.errors import OwrlError
    from owrl_sdk.contract.plugins import load_checked_settings as load_settings

    try:
        settings = load_settings()
    except OwrlError as err:
        return [Check("settings", "fail", str(err), "fix the setting in owrl.toml or the OWRL_* variable")]
    endpoint = settings.browser_endpoint or settings.cdp_endpoint
    if not endpoint:
        return []

    async def version() -> str:
        host = BrowserHost(settings)
        try:
            await host.start()
            version: str = host.browser.version
            return version
        finally:
            await host.close()

    try:
        return [Check("browser endpoint", "ok", f"{endpoint}: Chromium {asyncio.run(version())}")]
    except OwrlError as err:
        return [Check("browser endpoint", "fail", str(err)[:300],
                      "start the browser server (python -m playwright run-server --port PORT) or fix the address")]


def _torch() -> list[Check]:
    if importlib.util.find_spec("torch") is None:
        return [Check("torch", "warn", "not installed", "needed for model policies and training: pip install 'openwebrl-sdk[models]'")]
    import torch

    checks = [Check("torch", "ok", torch.__version__)]
    if torch.cuda.is_available():
        checks.append(Check("cuda", "ok", f"{torch.cuda.device_count()} device(s): {torch.cuda.get_device_name(0)}"))
    else:
        checks.append(Check("cuda", "warn", "no CUDA device", "4-bit policies need a GPU; on CPU models load unquantized"))
    if importlib.util.find_spec("bitsandbytes") is None:
        checks.append(Check("bitsandbytes", "warn", "not installed", "pip install bitsandbytes (for 4-bit loading)"))
    else:
        from importlib.metadata import version

        checks.append(Check("bitsandbytes", "ok", version("bitsandbytes")))
    return checks


def _plugins() -> list[Check]:
    from owrl_sdk.contract.plugins import Plugins, plugin_infos

    plugins = Plugins()
    infos = plugin_infos(plugins.pm)
    checks = [Check("plugins", "ok", f"{len(infos)} loaded ({sum(not i.default for i in infos)} from entry points)")]
    try:
        cat = plugins.catalogue
        checks.append(Check("catalogue", "ok", f"{len(cat.names('tools'))} tools, {len(cat.names('policies'))} policies"))
    except Exception as err:  # noqa: BLE001
        checks.append(Check("catalogue", "fail", str(err), "disable the plugin named with OWRL_DISABLE_PLUGINS"))
    for f in plugins.failures:
        checks.append(Check(f"plugin {f.name}", "fail", f.error, f"reinstall or fix {f.source}, or OWRL_DISABLE_PLUGINS={f.name}"))
    return checks


CHECKS: tuple[Callable[[], Union[Check, list[Check]]], ...] = (_python, _playwright, _chromium, _remote_browser, _torch, _plugins)


def run_checks() -> list[Check]:
    out: list[Check] = []
    for check in CHECKS:
        result = check()
        out.extend(result if isinstance(result, list) else [result])
    return out


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def doctor_command(as_json: bool) -> Optional[int]:
    """Check Python, Playwright, Chromium, torch/CUDA/bitsandbytes and the plugins."""
    checks = run_checks()
    if as_json:
        import json

        click.echo(json.dumps([c.__dict__ for c in checks], indent=2))
    else:
        from rich.markup import escape

        from owrl_sdk.support.console import SafeConsole as Console  # page text cannot drive the terminal

        console = Console(highlight=False)
        marks = {"ok": "[green]✓[/green]", "warn": "[yellow]![/yellow]", "fail": "[red]✗[/red]"}
        for c in checks:  # a state is often an exception's text (a path, a selector): never markup
            line = f"{marks[c.status]} {escape(f'{c.name:<16}')} {escape(c.state)}"
            if c.remedy:
                line += f"\n    [dim]→ {escape(c.remedy)}[/dim]"
            console.print(line)
    if any(c.status == "fail" for c in checks):
        sys.exit(3)
    return None


@hookimpl
def register_commands(register: Register) -> None:
    register(doctor_command)
