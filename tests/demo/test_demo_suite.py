"""The demo-shop suite, its task file, its plugin hooks and ``owrl demo-site``."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

import owrl_demo
from owrl_demo import DemoShopSuite, load_tasks, oracle_flow, resolve_demo_url
from owrl_demo.catalogue import BY_ID
from owrl_demo.checks import CHECK_TYPES
from owrl_sdk.support.answers import numbers
from owrl_sdk.config import Settings
from owrl_sdk.types import Outcome, PolicyInfo, Trajectory

PLUGINS_DIR = Path(owrl_demo.__file__).resolve().parents[1]
SELECTOR_TOOLS = {"click", "write", "select_option", "hover"}


def test_resolve_demo_url():
    base = "http://127.0.0.1:4321"
    assert resolve_demo_url("demo:shop", base) == base + "/"
    assert resolve_demo_url("demo:shop/", base + "/") == base + "/"
    assert resolve_demo_url("demo:shop/products?category=hats", base) == base + "/products?category=hats"
    assert resolve_demo_url("https://example.com/demo:shop/", base) == "https://example.com/demo:shop/"
    assert resolve_demo_url("demo:shopping", base) == "demo:shopping"


def test_task_file_is_sound():
    tasks = load_tasks()
    assert len(tasks) >= 30
    assert len({t.id for t in tasks}) == len(tasks)
    assert {t.difficulty for t in tasks} == {1, 2, 3, 4, 5}
    for t in tasks:
        where = t.id
        assert t.suite == "demo-shop" and t.start_url.startswith("demo:shop/"), where
        assert t.checks or t.answer is not None, f"{where}: neither checks nor an answer"
        assert all(c["type"] in CHECK_TYPES for c in t.checks), where
        for c in t.checks:
            for spec in c.get("items", []):
                p = BY_ID[spec["product"]]
                assert spec.get("size", p.sizes[0]) in p.sizes and spec.get("colour", p.colours[0]) in p.colours, where
        if t.answer_match == "number":
            assert numbers(t.answer), where
        flow = oracle_flow(t)  # validates every call and expectation
        assert 1 <= len(flow.turns) <= 15, where
        calls = [c for turn in flow.turns for c in turn.calls]
        assert calls[-1].name == "done" and all(c.name != "done" for c in calls[:-1]), where
        for c in calls:
            if c.name in SELECTOR_TOOLS:
                assert "selector" in c.arguments, f"{where}: {c.describe()}"
        if "demo1234" in t.intent:
            assert t.metadata["credentials"] == {"email": "demo@shop.test", "password": "demo1234"}, where


async def test_suite_serves_its_tasks_on_the_live_shop():
    suite = DemoShopSuite(Settings())
    try:
        tasks = suite.tasks()  # before setup(): the eval runner may list tasks first
        await suite.setup()
        base = suite.base_url
        assert all(t.start_url.startswith(base + "/") for t in tasks)
        assert all(t.allowed_domains == ["127.0.0.1"] for t in tasks)
        with urllib.request.urlopen(tasks[0].start_url) as resp:
            assert resp.status == 200
        for t in tasks:
            for turn in t.metadata["oracle_turns"]:
                for call in turn["calls"]:
                    assert "demo:shop" not in str(call["arguments"].get("url", "")), t.id
    finally:
        await suite.teardown()
    assert not suite.shop.running


async def test_suite_takes_its_port_from_settings():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    suite = DemoShopSuite(Settings(plugins={"demo": {"port": port}}))
    await suite.setup()
    try:
        assert suite.base_url == f"http://127.0.0.1:{port}"
    finally:
        await suite.teardown()


async def test_check_without_a_browser_context_says_why():
    suite = DemoShopSuite(Settings())
    task = next(t for t in suite.tasks() if t.checks)
    try:
        trajectory = Trajectory(task=task, policy=PolicyInfo(name="x"), outcome=Outcome(status="success"))
        verdict = await suite.check(object(), task, trajectory)
    finally:
        await suite.teardown()
    assert not verdict.success and "no browser context" in verdict.reason


async def test_answer_tasks_are_checked_without_the_browser():
    suite = DemoShopSuite(Settings())
    task = next(t for t in suite.tasks() if t.answer and not t.checks)
    try:
        right = Trajectory(task=task, policy=PolicyInfo(name="x"), outcome=Outcome(status="success", answer=task.answer))
        wrong = Trajectory(task=task, policy=PolicyInfo(name="x"), outcome=Outcome(status="success", answer="no idea"))
        assert (await suite.check(object(), task, right)).success
        verdict = await suite.check(object(), task, wrong)
        assert not verdict.success and verdict.score == 0.0
    finally:
        await suite.teardown()


@pytest.mark.exercises("register_task_suites", "register_commands")
def test_plugin_registers_the_suite_and_the_command(plugins, register_plugin):
    if not plugins.pm.is_registered(owrl_demo):  # not yet installed through its entry point
        register_plugin(owrl_demo, name="demo")
    assert plugins.catalogue.get("task_suites", "demo-shop") is DemoShopSuite
    assert plugins.commands()["demo-site"].name == "demo-site"


def test_demo_site_serves_until_interrupted():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PLUGINS_DIR), os.environ.get("PYTHONPATH", "")])}
    code = "from owrl_demo.command import demo_site_command; demo_site_command(['--port', '0'])"
    # Ctrl-C as a terminal sends it: the child starts with SIGINT at its default, whatever the
    # test process inherited (an ignored SIGINT would be inherited and the shop never stop)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        first = proc.stdout.readline().strip()
        second = proc.stdout.readline().strip()
        assert first.startswith("Demo shop: http://127.0.0.1:"), first
        assert second == "Test account: demo@shop.test / demo1234"
        url = first.split(": ", 1)[1]
        with urllib.request.urlopen(url, timeout=10) as resp:
            assert resp.status == 200
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)  # generous: the suite may share its cores
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "Demo shop stopped." in err and "Traceback" not in err


def test_demo_site_refuses_a_busy_port():
    from click.testing import CliRunner

    from owrl_demo.command import demo_site_command
    from owrl_sdk.errors import UsageError

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        result = CliRunner().invoke(demo_site_command, ["--port", str(port)])
    assert isinstance(result.exception, UsageError)
    assert f"cannot serve the demo shop on port {port}" in str(result.exception)
