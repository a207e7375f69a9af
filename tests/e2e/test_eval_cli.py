"""`owrl eval` end to end: real Chromium, the demo shop and MiniWoB++ pages, resumable output."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from owrl_cli import owrl




def summary(path: Path) -> dict:
    return json.loads((path / "summary.json").read_text())


@pytest.mark.slow
def test_demo_shop_oracle_solves_every_task(tmp_path):
    out = owrl("eval", "--suite", "demo-shop", "--policy", "oracle", "--workers", "2", "--out", "ev", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    s = summary(tmp_path / "ev")
    assert s["episodes"] >= 30 and s["infra_errors"] == 0
    failed = {t: b for t, b in s["per_task"].items() if b["success_rate"] != 1.0}
    assert not failed, failed
    assert s["success_rate"] == 1.0 and s["ci95"][0] > 0.9
    assert "overall" in out.stdout and "100%" in out.stdout


@pytest.mark.slow
def test_demo_shop_random_policy_is_the_floor(tmp_path):
    tasks = "shop-015,shop-016,shop-025,shop-028,shop-031"
    out = owrl("eval", "--suite", "demo-shop", "--tasks", tasks, "--policy", "random", "--max-steps", "6",
               "--workers", "2", "--out", "ev", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    s = json.loads(out.stdout)
    assert s["episodes"] == 5 and s["success_rate"] <= 0.2


@pytest.mark.slow
def test_miniwob_oracle_and_random(tmp_path):
    tasks = "click-button,click-link,enter-text"
    out = owrl("eval", "--suite", "miniwob", "--tasks", tasks, "--policy", "oracle", "--episodes", "5",
               "--workers", "2", "--out", "oracle", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    oracle = json.loads(out.stdout)
    assert oracle["episodes"] == 15 and oracle["success_rate"] == 1.0
    assert oracle["mean_score"] > 0.8  # MiniWoB's own time-discounted reward
    out = owrl("eval", "--suite", "miniwob", "--tasks", tasks, "--policy", "random", "--episodes", "5",
               "--workers", "2", "--out", "random", "--json", cwd=tmp_path)
    random_ = json.loads(out.stdout)
    assert random_["success_rate"] < oracle["success_rate"] - 0.5
    # --fail-under gates a CI job (re-running resumes: no episode is played again)
    gate = ("eval", "--suite", "miniwob", "--tasks", tasks, "--episodes", "5", "--workers", "2", "--json",
            "--fail-under", "0.9")
    passed = owrl(*gate, "--policy", "oracle", "--out", "oracle", cwd=tmp_path)
    assert passed.returncode == 0 and json.loads(passed.stdout)["success_rate"] == 1.0, passed.stderr[-2000:]
    failed = owrl(*gate, "--policy", "random", "--out", "random", cwd=tmp_path)
    assert failed.returncode == 1 and json.loads(failed.stdout)["episodes"] == 15
    assert f"success rate {random_['success_rate']:.1%} is below --fail-under 90.0%" in failed.stderr


def test_a_task_file_may_start_on_a_plugins_scheme_as_owrl_run_does(tmp_path):
    """A task file's start_url demo:shop/ is resolved by the plugin (it failed as a network error)."""
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"id": "home", "intent": "Look at the shop",
                                                      "start_url": "demo:shop/", "max_steps": 1}) + "\n")
    out = owrl("eval", "--suite", "tasks.jsonl", "--policy", "random", "--out", "ev", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout)["infra_errors"] == 0
    (run,) = (tmp_path / "ev" / "runs").iterdir()
    traj = json.loads((run / "trajectory.json").read_text())
    assert traj["task"]["metadata"]["given_start_url"] == "demo:shop/"
    assert traj["steps"][0]["observation"]["title"].endswith("Demo Shop"), traj["steps"][0]["observation"]


def test_bad_suite_and_tasks_are_usage_errors(tmp_path):
    out = owrl("eval", "--suite", "nope", "--policy", "oracle", cwd=tmp_path)
    assert out.returncode == 2 and "no task suite named 'nope'" in out.stderr
    out = owrl("eval", "--suite", "miniwob", "--tasks", "click-buton", "--policy", "oracle", cwd=tmp_path)
    assert out.returncode == 2 and "unknown task id(s) in --tasks: click-buton" in out.stderr
    bad = tmp_path / "tasks.jsonl"
    bad.write_text('{"intent": "x"}\nnot json\n')
    out = owrl("eval", "--suite", str(bad), "--policy", "oracle", cwd=tmp_path)
    assert out.returncode == 2 and "line 1" in out.stderr and "line 2" in out.stderr


@pytest.mark.slow
def test_interrupted_eval_resumes_only_what_is_missing(tmp_path):
    args = [sys.executable, "-m", "owrl_sdk", "eval", "--suite", "miniwob", "--tasks", "click-button,enter-text",
            "--policy", "oracle", "--episodes", "4", "--out", "ev", "--json"]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    episodes = tmp_path / "ev" / "episodes.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and (not episodes.exists() or len(episodes.read_text().splitlines()) < 3):
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)  # a crash, not a polite stop
    proc.wait()
    before = episodes.read_text().splitlines()
    assert 3 <= len(before) < 8
    out = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    after = episodes.read_text().splitlines()
    assert after[:len(before)] == before  # nothing finished was run again
    keys = [json.loads(line)["key"] for line in after]
    assert sorted(keys) == sorted(f"{t}#{n}" for t in ("click-button", "enter-text") for n in range(4))
    assert json.loads(out.stdout)["episodes"] == 8
