"""The host: one browser, a fresh context per episode, warnings for unsafe options, no leaked process."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
import zipfile

import pytest
from browser_support import act, task, quick_settings
from session_browsers import browser_processes

from owrl_sdk import hookimpl
from owrl_sdk.browser import BrowserHost, processes
from owrl_sdk.errors import InfraError


def our_browser_processes(besides: BrowserHost | None = None) -> set[int]:
    """Running Chromium processes in this Python process's tree, less the tree of ``besides``."""
    return browser_processes([besides] if besides is not None else [])


def strays_after_settling(besides: BrowserHost, seconds: float = 5.0) -> set[int]:
    """Our browser processes outside ``besides``, given a moment to exit (a closing one may still run)."""
    deadline = time.monotonic() + seconds
    left = our_browser_processes(besides)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = our_browser_processes(besides)
    return left


def wait_until_gone(pids: set[int], seconds: float = 10.0) -> set[int]:
    deadline = time.monotonic() + seconds
    left = {p for p in pids if processes.alive(p)}
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = {p for p in left if processes.alive(p)}
    return left


async def test_each_episode_gets_a_fresh_context(env, site):
    await env.reset(task(f"{site}/basic.html"))
    await env.page.evaluate("document.cookie = 'seen=1; path=/'; localStorage.setItem('k', 'v')")
    assert "seen=1" in await env.page.evaluate("document.cookie")
    first_context = env.context
    await env.reset(task(f"{site}/basic.html"))
    assert env.context is not first_context
    assert await env.page.evaluate("document.cookie") == ""
    assert await env.page.evaluate("localStorage.getItem('k')") is None
    assert len(env.pages) == 1


async def test_viewport_and_observation(env, site):
    await env.reset(task(f"{site}/basic.html"))
    obs = await env.observe()
    assert await env.page.evaluate("[innerWidth, innerHeight]") == [1280, 1000]
    from io import BytesIO

    from PIL import Image

    image = Image.open(BytesIO(obs.screenshot))
    assert image.format == "JPEG" and image.size == (1280, 1000)
    assert obs.url == f"{site}/basic.html" and obs.title == "Basic page"
    assert '[ref=e' in obs.aria


async def test_a_killed_browser_raises_infra_errors_and_leaves_no_process(site, tmp_path, host):
    shared = host  # the session's browser, which stays up
    assert strays_after_settling(shared) == set()
    async with BrowserHost(quick_settings()) as host:
        assert host.pid not in shared.pids()
        env = await host.new_env(run_dir=tmp_path)
        for _ in range(3):
            await env.reset(task(f"{site}/basic.html"))
            await env.observe()
            await act(env, "click", selector="#go")
        tree = set(host.pids())
        assert host.pid in tree and len(tree) > 1
        assert tree <= our_browser_processes(shared)

        os.kill(host.pid, signal.SIGKILL)  # the browser dies mid-episode
        assert not wait_until_gone({host.pid}), "the browser did not die"
        with pytest.raises(InfraError) as raised:
            await act(env, "click", selector="#go")
        assert raised.value.code == "browser_crash"
        with pytest.raises(InfraError) as raised:
            await env.observe()
        assert raised.value.code == "browser_crash"

        # the next episode relaunches the browser and says so
        await env.reset(task(f"{site}/basic.html"))
        assert any("relaunched" in w for w in env.warnings)
        assert (await act(env, "click", selector="#go")).ok
        second_tree = set(host.pids())

        # a deliberate relaunch ends the running episode too, under another code
        await host.relaunch()
        with pytest.raises(InfraError) as raised:
            await act(env, "click", selector="#go")
        assert raised.value.code == "browser_disconnected"
        await env.reset(task(f"{site}/basic.html"))
        assert (await act(env, "click", selector="#go")).ok
        second_tree |= set(host.pids())
        await env.close()
    assert not wait_until_gone(tree | second_tree), "processes of the browser outlived the host"
    assert strays_after_settling(shared) == set()


@pytest.mark.exercises("browser_launch_options")
async def test_launch_hook_and_unsafe_options_put_warnings_in_the_trajectory(site, tmp_path, plugins, register_plugin):
    class Loosen:
        @hookimpl
        def browser_launch_options(self, options):
            return {"args": ["--disable-web-security"]}

    register_plugin(Loosen(), name="loosen")
    async with BrowserHost(quick_settings(), launch_hook=plugins.browser_launch_options) as host:
        assert "--disable-web-security" in host.launch_options["args"]
        assert "--no-sandbox" in host.launch_options["args"]
        env = await host.new_env(run_dir=tmp_path, unsafe={"ignore_https_errors": True})
        await env.reset(task(f"{site}/basic.html"))
        assert any("--disable-web-security" in w for w in env.warnings)
        assert any("ignore_https_errors" in w for w in env.warnings)
        await env.close()


async def test_safe_defaults_carry_no_warning(env, site, host):
    await env.reset(task(f"{site}/basic.html"))
    assert env.warnings == []
    assert not any("disable-web-security" in a for a in host.launch_options["args"])


async def test_trace_and_downloads_land_in_the_run_folder(host, site, tmp_path):
    env = await host.new_env(run_dir=tmp_path, trace=True)
    await env.reset(task(f"{site}/basic.html"))
    await env.page.evaluate(
        "() => { const a = document.createElement('a'); a.href = 'second.html'; a.download = 'notes.txt';"
        " a.id = 'dl'; a.textContent = 'Download notes'; document.body.appendChild(a); }"
    )
    result = await act(env, "click", selector="#dl")
    assert result.ok, result.error
    feedback = result.feedback
    if "download" not in feedback:  # announced after the click's feedback: the next call reports it
        feedback = (await act(env, "wait", seconds=0.5)).feedback
    assert 'a download started: "notes.txt"' in feedback
    await env.close()
    assert (tmp_path / "downloads" / "notes.txt").read_text().startswith("<!doctype html>")
    with zipfile.ZipFile(tmp_path / "trace.zip") as trace:
        assert any(name.endswith(".trace") for name in trace.namelist())


def test_a_host_never_closed_leaves_no_browser_when_python_exits(tmp_path):
    script = tmp_path / "forget.py"
    script.write_text(textwrap.dedent(
        """
        import asyncio, sys
        from owrl_sdk.browser import BrowserHost
        from owrl_sdk.config import Settings

        async def main():
            host = BrowserHost(Settings())
            await host.start()
            print(host.pid, flush=True)
            sys.exit(0)  # no close(): the atexit guard must kill the browser

        asyncio.run(main())
        """
    ))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    pid = int(run.stdout.split()[0])
    assert not wait_until_gone({pid}), "the browser outlived its Python process"


def test_a_python_process_killed_outright_leaves_no_browser(tmp_path):
    script = tmp_path / "crash.py"
    script.write_text(textwrap.dedent(
        """
        import asyncio
        from owrl_sdk.browser import BrowserHost
        from owrl_sdk.config import Settings

        async def main():
            host = BrowserHost(Settings())
            await host.start()
            print(host.pid, flush=True)
            await asyncio.sleep(60)

        asyncio.run(main())
        """
    ))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(proc.stdout.readline())
        tree = {pid, *processes.descendants(pid)}
        proc.kill()  # SIGKILL: no atexit; Playwright's driver sees its pipe close and kills the browser
        proc.wait(timeout=10)
        assert not wait_until_gone(tree), "the browser outlived a killed Python process"
    finally:
        proc.kill()


async def test_a_crashed_page_is_an_infra_error(env, site):
    await env.reset(task(f"{site}/basic.html"))
    session = await env.context.new_cdp_session(env.page)
    try:  # the reply never comes: the renderer is gone
        await asyncio.wait_for(session.send("Page.crash"), 1)
    except Exception:
        pass
    with pytest.raises(InfraError) as raised:
        for _ in range(50):  # the crash event arrives a moment later
            await asyncio.wait_for(env.observe(), 5)
            await asyncio.sleep(0.05)
    assert raised.value.code == "renderer_crash", str(raised.value)
    await env.reset(task(f"{site}/basic.html"))  # the next episode is fine
    assert (await act(env, "click", selector="#go")).ok


async def test_an_unreachable_start_page_is_an_infra_error(env):
    with pytest.raises(InfraError) as raised:
        await env.reset(task("http://127.0.0.1:9/"))
    assert raised.value.code == "start_page_unreachable"
    assert "ERR_" in str(raised.value)


async def test_episodes_run_side_by_side_in_one_browser(host, site, tmp_path):
    envs = [await host.new_env(run_dir=tmp_path / str(i)) for i in range(3)]

    async def episode(env, clicks: int) -> str:
        await env.reset(task(f"{site}/basic.html"))
        for _ in range(clicks):
            assert (await act(env, "click", selector="#go")).ok
        await env.observe()
        return await env.page.locator("#out").inner_text()

    try:
        results = await asyncio.gather(*(episode(env, n + 1) for n, env in enumerate(envs)))
    finally:
        for env in envs:
            await env.close()
    assert results == ["Clicked 1", "Clicked 2", "Clicked 3"]


async def test_no_chromium_is_a_clear_infra_error():
    from owrl_sdk.browser.chromium import REMEDY

    host = BrowserHost(quick_settings(chromium="/nonexistent/chromium"))
    try:
        with pytest.raises(InfraError) as raised:
            await host.start()
    finally:
        await host.close()
    assert raised.value.code == "no_browser"
    assert "/nonexistent/chromium" in str(raised.value) and REMEDY in str(raised.value)


async def test_a_headless_launch_takes_the_headless_shell_and_a_chosen_chromium_wins(site, tmp_path):
    """Where the system has Chromium's headless shell, a headless host launches it (lighter than
    the full browser, bench/bench_chromium.py); a headed one would get the full browser, and the
    chromium setting (OWRL_CHROMIUM) still chooses."""
    from owrl_sdk.browser.chromium import find_chromium, headless_shell

    shell = headless_shell()
    if shell is None:  # pragma: no cover - setup installs it beside a system Chromium
        pytest.skip("no chromium-headless-shell on this machine")
    full = find_chromium(check_managed=False)
    assert full is not None and full.path != shell and "headless" not in full.path
    assert find_chromium(check_managed=False, headless=True).path == shell
    async with BrowserHost(quick_settings()) as host:
        assert host.launch_options["executable_path"] == shell
        assert os.readlink(f"/proc/{host.pid}/exe") == os.path.realpath(shell)  # the process running is the shell
        env = await host.new_env()
        await env.reset(task(f"{site}/basic.html"))
        assert (await env.observe()).screenshot  # it draws pages like the full browser
        await env.close()
    assert find_chromium(headless=False, check_managed=False).path == full.path  # a headed run's
    async with BrowserHost(quick_settings(chromium=full.path)) as host:
        assert host.launch_options["executable_path"] == full.path
        assert "headless" not in os.readlink(f"/proc/{host.pid}/exe")
