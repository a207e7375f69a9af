"""Remote browsers: a Playwright browser server (``playwright run-server``) and a Chromium driven
over CDP, both real processes on 127.0.0.1, with real episodes on the demo shop through them.

The browser server here launches Debian's Chromium because the client names it in the launch
options header (``remote_chromium``), which the server honours only with ``--unsafe``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from owrl_cli import owrl
from owrl_sdk.browser import BrowserHost, processes
from owrl_sdk.browser.host import launch_options_header
from owrl_sdk.config import Settings
from owrl_sdk.formats.documents import load_flow, load_trajectory
from owrl_sdk.errors import InfraError
from owrl_sdk.failures import KINDS, classify

ROOT = Path(__file__).resolve().parents[2]
FLOW = ROOT / "examples" / "flows" / "add-oxford-shirts.json"
CHROMIUM = "/usr/bin/chromium"

if not Path(CHROMIUM).exists():  # pragma: no cover - the suite's machines have it
    pytest.skip(f"the browser server here launches {CHROMIUM}", allow_module_level=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int) -> subprocess.Popen:
    """``playwright run-server`` on 127.0.0.1:port, in a process group of its own; waits until it listens."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "playwright", "run-server", "--host", "127.0.0.1", "--port", str(port), "--unsafe"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    line = proc.stdout.readline().decode()  # "Listening on ws://127.0.0.1:P/"
    assert f"ws://127.0.0.1:{port}" in line, line
    return proc


def stop(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the server and the browsers it launched
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


def chromium_pids(root: int, tree: Any = None) -> set[int]:
    return {p for p in processes.descendants(root, tree) if "chrom" in processes.command_name(p)}


@pytest.fixture(scope="module")
def browser_server() -> Any:
    port = free_port()
    proc = start_server(port)
    yield f"ws://127.0.0.1:{port}/", proc
    stop(proc)


@pytest.fixture
def cdp_chromium(tmp_path: Path) -> Any:
    """A headless Chromium with a DevTools port; its address is read from DevToolsActivePort."""
    profile = tmp_path / "profile"
    proc = subprocess.Popen(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--remote-debugging-port=0",
         "--remote-debugging-address=127.0.0.1", f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    active = profile / "DevToolsActivePort"
    deadline = time.monotonic() + 20
    while not (active.exists() and active.read_text().strip()):
        assert time.monotonic() < deadline and proc.poll() is None, "Chromium did not open its DevTools port"
        time.sleep(0.05)
    port = int(active.read_text().split()[0])
    yield f"http://127.0.0.1:{port}", proc
    stop(proc)


def closed_endpoint() -> str:
    return f"ws://127.0.0.1:{free_port()}/"  # nothing listens there


# ============================================================================ browser server


def test_owrl_run_through_a_browser_server(browser_server: Any, tmp_path: Path) -> None:
    url, _ = browser_server
    out = owrl("run", "--flow", str(FLOW), "--browser-endpoint", url, "--json", "--out", "runs", cwd=tmp_path,
               env={"OWRL_REMOTE_CHROMIUM": CHROMIUM}, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    assert result["outcome"]["status"] == "success" and result["steps"] == 5
    traj = load_trajectory(result["run_dir"])
    assert all(c.verdict.ok for s in traj.steps for c in s.calls if c.verdict)
    assert (Path(result["run_dir"]) / "screenshots" / "0004.jpg").stat().st_size > 1000


async def test_python_api_runs_in_the_servers_browser(browser_server: Any, tmp_path: Path) -> None:
    from owrl_sdk import Agent

    url, server = browser_server
    flow = load_flow(FLOW)
    def ours() -> set[int]:
        """The browsers this process launched: Chromium processes under it whose parent is no
        Chromium (a browser already running, from another test, may start renderers meanwhile;
        the server is a child of this process too, and its browsers are left out)."""
        tree = processes.children_map()  # one reading of the process table for both
        mine = chromium_pids(os.getpid(), tree) - chromium_pids(server.pid, tree)
        parent = {child: p for p, children in tree.items() for child in children}
        return {pid for pid in mine if parent.get(pid) not in mine}

    ours_before = ours()
    seen: dict[str, Any] = {}

    def on_step(trajectory: Any, step: Any) -> None:
        if step is not None and step.index == 0:
            seen["server"] = chromium_pids(server.pid)
            seen["ours"] = ours()

    settings = Settings(runs_dir=str(tmp_path), browser_endpoint=url, remote_chromium=CHROMIUM)
    async with Agent(policy="scripted", flow=flow, settings=settings) as agent:
        traj = await agent.run(flow.task, flow.start_url, on_step=on_step)
        host = agent._host
        assert host.remote and host.pid is None and host.pids() == []
        assert host.launch_options["executable_path"] == CHROMIUM
    assert traj.outcome.status == "success", traj.outcome
    # the browser ran under the server, none was launched here
    # (a subset: a browser an earlier test closed may still be exiting when ours_before is read)
    assert seen["server"] and seen["ours"] <= ours_before, (seen, ours_before)
    assert server.poll() is None  # closing the agent disconnected; the server lives on
    deadline = time.monotonic() + 30
    while chromium_pids(server.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not chromium_pids(server.pid)  # and it closed the browser it had launched for us


def test_launch_options_header_uses_the_servers_names() -> None:
    options = {"headless": True, "args": ["--no-sandbox"], "executable_path": CHROMIUM, "chromium_sandbox": None}
    assert launch_options_header(options) == {"headless": True, "args": ["--no-sandbox"], "executablePath": CHROMIUM}


async def test_without_remote_chromium_the_server_uses_its_own_browser(browser_server: Any) -> None:
    """No executable is sent then. Where Playwright's managed browser is not installed (as on the
    suite's machines) the server cannot launch one, and the error says so, naming the endpoint."""
    from owrl_sdk.browser.chromium import _playwright_managed

    url, _ = browser_server
    host = BrowserHost(Settings(browser_endpoint=url))
    try:
        if _playwright_managed():  # pragma: no cover - a machine where `playwright install` ran
            await host.start()
            assert host.connected
        else:
            with pytest.raises(InfraError) as caught:
                await host.start()
            assert caught.value.code == "browser_connect_failed"
            assert url in str(caught.value) and "Executable doesn't exist" in str(caught.value)
    finally:
        await host.close()
    assert "executable_path" not in host.launch_options and host.launch_options["args"]


# ============================================================================ CDP


def test_owrl_run_over_cdp_leaves_the_browser_running(cdp_chromium: Any, tmp_path: Path) -> None:
    url, proc = cdp_chromium
    out = owrl("run", "--flow", str(FLOW), "--cdp-endpoint", url, "--json", "--out", "runs", cwd=tmp_path,
               timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout)["outcome"]["status"] == "success"
    assert proc.poll() is None  # disconnected from, never killed
    with urllib.request.urlopen(f"{url}/json/list", timeout=5) as answer:
        pages = json.loads(answer.read())
    assert not [p for p in pages if "/product" in p.get("url", "")]  # the episode's context was closed


# ============================================================================ unreachable


def test_unreachable_endpoints_are_infra_errors_naming_the_address(tmp_path: Path) -> None:
    url = closed_endpoint()
    out = owrl("run", "--flow", str(FLOW), "--browser-endpoint", url, "--out", "runs", cwd=tmp_path)
    assert out.returncode == 3, out.stderr
    assert f"could not connect to the browser server at {url}" in out.stderr
    assert "Traceback" not in out.stderr

    # the setting from the environment, for owrl eval
    url = closed_endpoint()
    out = owrl("eval", "--suite", "demo-shop", "--tasks", "shop-002", "--policy", "oracle", "--out", "ev",
               cwd=tmp_path, env={"OWRL_BROWSER_ENDPOINT": url})
    assert out.returncode == 3, out.stderr
    assert f"at {url}" in out.stderr

    # the setting from owrl.toml, over CDP
    cdp = f"http://127.0.0.1:{free_port()}"
    (tmp_path / "owrl.toml").write_text(f'cdp_endpoint = "{cdp}"\n')
    out = owrl("run", "--flow", str(FLOW), "--out", "runs", cwd=tmp_path)
    assert out.returncode == 3, out.stderr
    assert f"could not connect over CDP at {cdp}" in out.stderr


async def test_connect_failure_is_its_own_infra_kind() -> None:
    url = closed_endpoint()
    host = BrowserHost(Settings(browser_endpoint=url))
    started = time.monotonic()
    with pytest.raises(InfraError) as caught:
        await host.start()
    await host.close()
    assert time.monotonic() - started < 10  # a first connection is not retried
    failure = classify(caught.value, "reset")
    assert failure.kind == "infra.browser_connect_failed" and failure.kind in KINDS
    assert url in failure.detail


def test_bad_endpoint_values_are_usage_errors(tmp_path: Path) -> None:
    out = owrl("run", "--flow", str(FLOW), "--browser-endpoint", "http://127.0.0.1:1/", cwd=tmp_path)
    assert out.returncode == 2 and "browser_endpoint" in out.stderr and "ws://" in out.stderr
    out = owrl("eval", "--suite", "demo-shop", "--browser-endpoint", "ws://127.0.0.1:1/",
               "--cdp-endpoint", "http://127.0.0.1:2", cwd=tmp_path)
    assert out.returncode == 2 and "not both" in out.stderr


# ============================================================================ the server dies mid-eval


@pytest.mark.slow
async def test_server_killed_mid_eval_runs_the_episode_again_once_reconnected(
        tmp_path: Path, plugins: Any, register_plugin: Any) -> None:
    from owrl_baselines import OraclePolicy
    from owrl_sdk.scheduling.evaluation import EvalPlan, Evaluation, read_records
    from owrl_sdk.contract.plugins import hookimpl

    port = free_port()
    state = {"server": start_server(port), "killed": False}
    restarted = threading.Event()

    def restart_later() -> None:  # a browser pod coming back behind its Service, a moment later
        time.sleep(1.0)
        state["server"] = start_server(port)
        restarted.set()

    class ServerKiller(OraclePolicy):
        """The oracle, except that its second turn of the first episode kills the browser server first."""

        name = "server-killer"

        async def act(self, context: Any) -> Any:
            if len(context.history) == 1 and not state["killed"]:
                state["killed"] = True
                stop(state["server"])
                threading.Thread(target=restart_later, daemon=True).start()
            return await super().act(context)

    class Plugin:
        @hookimpl
        def register_policies(self, register: Any) -> None:
            register(ServerKiller)

    register_plugin(Plugin(), name="server-killer")
    settings = Settings(browser_endpoint=f"ws://127.0.0.1:{port}/", remote_chromium=CHROMIUM,
                        action_timeout=3.0, navigation_timeout=10.0)
    suite = plugins.catalogue.get("task_suites", "demo-shop")(settings)
    tasks = {t.id: t for t in suite.tasks()}
    plan = EvalPlan(suite=suite, tasks=[tasks["shop-003"], tasks["shop-002"]], policy="server-killer",
                    judge="benchmark", out=tmp_path / "ev", record_blocklist=False)
    try:
        summary = await Evaluation(plan, settings, plugins).run()
    finally:
        restarted.wait(20)
        stop(state["server"])
    records = {r.task_id: r for r in read_records(tmp_path / "ev" / "episodes.jsonl")}
    killed, after = records["shop-003"], records["shop-002"]
    assert state["killed"]
    # the episode the lost connection broke ran again on the reconnected browser (as a lost Ray
    # actor's would); nothing was counted against the policy, and the next episode ran there too
    assert killed.status == "success" and killed.success, killed
    assert after.status == "success" and after.success, after
    assert summary["infra_errors"] == 0 and summary["success_rate"] == 1.0
    assert summary["workers_lost"] == 1 and summary["episodes_retried"] == 1


# ============================================================================ owrl doctor


def test_doctor_checks_the_configured_endpoint(browser_server: Any, tmp_path: Path, monkeypatch: Any) -> None:
    from owrl_sdk.commands.doctor import _remote_browser

    monkeypatch.chdir(tmp_path)
    for name in [k for k in os.environ if k.startswith("OWRL_") and k != "OWRL_STATE_DIR"]:
        monkeypatch.delenv(name)
    assert _remote_browser() == []  # nothing configured, nothing to check

    url, _ = browser_server
    monkeypatch.setenv("OWRL_BROWSER_ENDPOINT", url)
    monkeypatch.setenv("OWRL_REMOTE_CHROMIUM", CHROMIUM)
    (check,) = _remote_browser()
    assert check.status == "ok" and check.state.startswith(f"{url}: Chromium ")

    closed = closed_endpoint()
    monkeypatch.setenv("OWRL_BROWSER_ENDPOINT", closed)
    (check,) = _remote_browser()
    assert check.status == "fail" and closed in check.state and "run-server" in check.remedy
