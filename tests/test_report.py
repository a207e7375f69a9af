"""`owrl report`: run and evaluation pages, built from real runs and opened in a real headless Chromium.

Runs are scripted episodes in a real Chromium on pages served on 127.0.0.1 (and the demo
shop for the evaluation); the reports are then loaded from file:// in a separate headless
Chromium driven by Playwright's sync API.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from pathlib import Path

import pytest

from owrl_cli import owrl
from owrl_sdk.browser.chromium import BASE_ARGS, find_chromium
from owrl_sdk.config import Settings
from owrl_sdk.formats.documents import load_trajectory, save_trajectory
from owrl_sdk.formats.report import write_run_report
from owrl_sdk.types import Observation, PolicyInfo, Step, Task, Trajectory, Turn

CHROMIUM = find_chromium(check_managed=False, headless=True)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine")

HOSTILE_TASK = 'Press Go <script>window.__pwned = "task"</script><img src=x onerror="window.__pwned=1">'
HOSTILE_ANSWER = '<script>window.__pwned = "answer"</script>pressed & done'
PAGE = """<!doctype html><title>Go page</title><h1 id="h">Waiting</h1>
<button onclick="document.getElementById('h').textContent = 'Pressed'">Go</button>"""


@contextlib.contextmanager
def opened(path: Path):
    """A local HTML file in a fresh headless Chromium: (page, URLs it requested besides file: and data:).

    Playwright's sync API holds an event loop in this thread while it runs, so the page is
    opened only after the episodes (which run their own loop) have finished."""
    from playwright.sync_api import sync_playwright

    outside: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM.path, args=list(BASE_ARGS))
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1000})
            page.on("request", lambda r: None if r.url.startswith(("file:", "data:")) else outside.append(r.url))
            page.goto(path.resolve().as_uri())
            yield page, outside
        finally:
            browser.close()


def judge_with_rule(run_dir: Path) -> Trajectory:
    from builtin_judges.rules import RuleJudge

    traj = load_trajectory(run_dir)
    traj.judgements.append(asyncio.run(RuleJudge(Settings()).judge(traj)))
    save_trajectory(traj, run_dir / "trajectory.json")
    return traj


def test_run_report_shows_every_step_and_runs_no_page_text(owrl_page_server, owrl_run_flow):
    url = owrl_page_server({"/": PAGE})
    flow = {"task": HOSTILE_TASK, "turns": [
        {"thought": "Press <b>Go</b> then check", "calls": [
            {"name": "click", "arguments": {"selector": "text=Go"}, "expect": {"text_visible": "Pressed"}}]},
        {"thought": "Done.", "calls": [{"name": "done", "arguments": {"response": HOSTILE_ANSWER}}]},
    ]}
    traj = owrl_run_flow(flow, url)
    assert traj.outcome.status == "success" and traj.outcome.answer == HOSTILE_ANSWER
    run_dir = Path(traj.metadata["run_dir"])
    traj = judge_with_rule(run_dir)

    report = write_run_report(run_dir)
    assert report == run_dir / "report.html"
    with opened(report) as (page, outside):
        steps = page.locator("section.step")
        assert steps.count() == len(traj.steps) == 2
        shots = page.eval_on_selector_all("img.shot", "els => els.map(e => e.complete ? e.naturalWidth : 0)")
        assert len(shots) == len(traj.steps) and all(w > 0 for w in shots), shots
        assert page.evaluate("document.images.length") == len(traj.steps)  # the task's <img> stayed text
        for i, step in enumerate(traj.steps):
            names = steps.nth(i).locator(".call-name").all_inner_texts()
            assert names == [r.call.name for r in step.calls]
        first = steps.nth(0)
        assert "text=Go" in first.locator(".arguments").inner_text()
        assert '"text_visible": "Pressed"' in first.locator(".expect").inner_text()
        assert "pass" in first.locator(".verdict").inner_text()
        assert first.locator(".thought").inner_text() == "Press <b>Go</b> then check"
        assert first.locator(".feedback").inner_text().strip() == traj.steps[0].feedback.strip()

        judgement = page.locator("tr.judgement")
        assert judgement.count() == 1
        assert "rule" in judgement.inner_text() and "well-formed episode" in judgement.inner_text()

        # Page text came from a model and web pages: shown as text, never run.
        assert page.locator("h1.intent").inner_text() == HOSTILE_TASK
        assert HOSTILE_ANSWER in page.locator("dd .answer").inner_text()
        assert page.evaluate("document.scripts.length") == 0
        assert page.evaluate("window.__pwned") is None
        assert outside == []  # self-contained: nothing fetched from anywhere


def test_failed_expectation_and_skipped_call_via_the_cli(owrl_page_server, owrl_run_flow, tmp_path):
    url = owrl_page_server({"/": PAGE})
    traj = owrl_run_flow([{"calls": [
        {"name": "click", "arguments": {"selector": "text=Go"}, "expect": {"text_visible": "Not on this page"}},
        {"name": "click", "arguments": {"selector": "text=Go"}},
    ]}], url, expect_timeout=0.5)
    assert traj.outcome.status == "fail"
    out = owrl("report", traj.metadata["run_dir"], "--out", str(tmp_path / "elsewhere" / "page.html"))
    assert out.returncode == 0, out.stderr
    report = Path(out.stdout.strip())
    assert report == tmp_path / "elsewhere" / "page.html" and report.is_file()
    as_json = owrl("report", traj.metadata["run_dir"], "--out", str(report), "--json")
    assert json.loads(as_json.stdout) == {"report": str(report), "kind": "run"}, as_json.stderr

    with opened(report) as (page, _):
        assert page.locator("section.step").count() == len(traj.steps)
        calls = page.locator("section.step").nth(0).locator(".call")
        assert calls.count() == 2
        verdict = calls.nth(0).locator(".verdict").inner_text()
        assert "fail" in verdict and "text_visible: not met" in verdict
        assert "not run" in calls.nth(1).inner_text()
        assert traj.outcome.failure.kind in page.locator("dl.facts").nth(1).inner_text()
        assert "not judged" in page.inner_text("main")


def test_screenshot_outside_the_run_folder_is_refused(tmp_path):
    secret = tmp_path / "secret.jpg"
    secret.write_bytes(b"SECRET-BYTES")
    run = tmp_path / "run"
    run.mkdir()
    traj = Trajectory(task=Task(intent="x", start_url="about:blank"), policy=PolicyInfo(name="p"),
                      steps=[Step(index=0, observation=Observation(screenshot_file="../secret.jpg"), turn=Turn())])
    save_trajectory(traj, run / "trajectory.json")
    text = write_run_report(run).read_text()
    assert "refused" in text and "U0VDUkVU" not in text  # base64 of "SECRET"
    assert "unfinished" in text


def test_report_of_a_folder_that_is_neither_is_a_usage_error(tmp_path):
    out = owrl("report", str(tmp_path))
    assert out.returncode == 2
    assert "not a run folder" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_eval_writes_a_report_linking_each_run(tmp_path):
    out = owrl("eval", "--suite", "demo-shop", "--policy", "oracle", "--tasks", "shop-001,shop-002", "--out", "ev",
               "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout)["episodes"] == 2  # the report line goes to stderr, stdout stays JSON
    assert "report: ev/report.html" in out.stderr
    report = tmp_path / "ev" / "report.html"
    text = report.read_text()
    assert "data:image" not in text and len(text) < 100_000  # links to run reports, embeds no screenshots
    hrefs = re.findall(r'<a class="run-link" href="([^"]+)"', text)
    assert len(hrefs) == 2
    for href in hrefs:
        run_report = (report.parent / href).resolve()
        assert run_report.name == "report.html" and (run_report.parent / "trajectory.json").is_file()

    with opened(report) as (page, outside):
        assert page.locator("tr.episode").count() == 2
        assert page.locator("table.per-task tr.task").count() == 2
        assert "100%" in page.locator("table.summary tr.overall").inner_text()
        assert "What is the price of the Leather Chelsea Boots?" in page.locator("table.episodes").inner_text()
        page.locator("a.run-link").nth(1).click()
        page.wait_for_load_state()
        assert page.url.endswith("/report.html") and page.locator("section.step").count() >= 1
        assert outside == []

    # Written elsewhere, the links still lead to the runs' reports.
    again = owrl("report", str(tmp_path / "ev"), "--out", str(tmp_path / "pages" / "ev.html"))
    assert again.returncode == 0, again.stderr
    moved = tmp_path / "pages" / "ev.html"
    for href in re.findall(r'<a class="run-link" href="([^"]+)"', moved.read_text()):
        assert (moved.parent / href).resolve().is_file()
