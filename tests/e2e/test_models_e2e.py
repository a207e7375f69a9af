"""Model plugins and training end to end, through the CLI, on tiny checkpoints and the demo shop."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from owrl_cli import owrl as run_owrl

pytest.importorskip("peft")

ROOT = Path(__file__).resolve().parents[2]


def owrl(*args, cwd, timeout=600):
    return run_owrl(*args, cwd=cwd, env={"HF_HUB_OFFLINE": "1"}, timeout=timeout)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    out = owrl("model", "tiny", "tiny-qwen3-vl", cwd=d)
    assert out.returncode == 0, out.stderr
    assert (d / "tiny-qwen3-vl" / "model.safetensors").exists()
    # random weights never end an answer: each would run to the profile's 2048 new tokens. The
    # tests read what an answer and a verdict become, not their length; the setting is read from
    # the working folder's owrl.toml, as a user's would be.
    (d / "owrl.toml").write_text("[plugins.openwebrl]\nmax_new_tokens = 64\n\n"
                                 "[plugins.openwebrl-judge]\nmax_new_tokens = 64\n", encoding="utf-8")
    return d


@pytest.mark.slow
def test_tiny_policy_runs_a_demo_shop_episode_and_the_judge_scores_it(workdir):
    out = owrl("run", "--task", "Add a red Wool Beanie to the cart.", "--url", "demo:shop", "--policy", "openwebrl",
               "--model", "tiny-qwen3-vl", "--max-steps", "3", "--json", "--out", "runs", cwd=workdir)
    assert out.returncode in (0, 1), out.stderr[-2000:]  # a clean outcome, whatever it is
    result = json.loads(out.stdout)
    assert result["outcome"]["status"] in ("success", "fail", "aborted")
    traj = json.loads((Path(result["run_dir"]) / "trajectory.json").read_text())
    assert traj["policy"]["name"] == "openwebrl" and traj["policy"]["model"] == "tiny-qwen3-vl"
    first = traj["steps"][0]["turn"]
    assert first["raw"] is not None and first["usage"]["image_tokens"] > 0
    assert 0 < first["usage"]["completion_tokens"] <= 64  # the owrl.toml in the working folder was read
    judged = owrl("judge", result["run_dir"], "--model", "tiny-qwen3-vl", "--json", cwd=workdir)
    assert judged.returncode == 0, judged.stderr[-2000:]
    j = json.loads(judged.stdout)
    assert j["judge"] == "openwebrl-judge" and 0.0 <= j["score"] <= 1.0
    # random weights give no readable verdict: no label, never a guess
    assert j["success"] is None and j["reason"].startswith("judge output unreadable")
    saved = json.loads((Path(result["run_dir"]) / "trajectory.json").read_text())
    assert saved["judgements"][-1]["judge"] == "openwebrl-judge"


@pytest.mark.slow
def test_sft_on_oracle_trajectories_loads_as_a_policy(workdir):
    ev = owrl("eval", "--suite", "demo-shop", "--tasks", "shop-001,shop-027", "--policy", "oracle", "--out", "ev",
              "--json", cwd=workdir)
    assert ev.returncode == 0 and json.loads(ev.stdout)["success_rate"] == 1.0
    out = owrl("train", "sft", "--data", "ev/runs", "--model", "tiny-qwen3-vl", "--out", "sft", "--epochs", "1",
               "--grad-accum", "2", "--lr", "1e-4", "--lora-r", "4", cwd=workdir)
    assert out.returncode == 0, out.stderr[-2000:]
    longest = re.search(r"longest answer: (\d+) tokens \(the policy's max_new_tokens must be at least that", out.stderr)
    assert longest and int(longest.group(1)) > 20, out.stderr[-2000:]  # the shop oracle's turns: calls with text
    adapter = workdir / "sft" / "adapter"
    assert (adapter / "adapter_model.safetensors").exists()
    assert (workdir / "sft" / "metrics.jsonl").read_text().count('"sft/loss"') >= 1
    assert list((workdir / "sft" / "tensorboard").iterdir())
    run = owrl("run", "--task", "Accept the cookies.", "--url", "demo:shop", "--policy", "openwebrl",
               "--model", str(adapter), "--max-steps", "1", "--json", "--out", "runs", cwd=workdir)
    assert run.returncode in (0, 1), run.stderr[-2000:]
    assert json.loads(run.stdout)["steps"] == 1
    exported = owrl("train", "export", "--runs", "ev/runs", "--out", "rows.jsonl", cwd=workdir)
    assert exported.returncode == 0
    rows = [json.loads(line) for line in (workdir / "rows.jsonl").read_text().splitlines()]
    assert rows and rows[0]["messages"][-1]["role"] == "assistant" and rows[0]["images"][0].endswith(".jpg")
    # Hugging Face's TrainingArguments names, and a warm-up then a linear decay, logged per step
    again = owrl("train", "sft", "--data", "rows.jsonl", "--model", str(adapter), "--output-dir", "sft2",
                 "--num-train-epochs", "2", "--gradient-accumulation-steps", "1", "--learning-rate", "1e-4",
                 "--lr-scheduler-type", "linear", "--warmup-ratio", "0.25", "--lora-r", "4", cwd=workdir)
    assert again.returncode == 0, again.stderr[-2000:]
    lines = [json.loads(line) for line in (workdir / "sft2" / "metrics.jsonl").read_text().splitlines()]
    rates = [line["sft/lr"] for line in lines if "sft/lr" in line]
    assert len(rates) == 2 * len(rows) and len(rates) >= 4, rates
    peak = rates.index(max(rates))
    assert 0 < peak < len(rates) - 1 and max(rates) == pytest.approx(1e-4), rates  # up, then down
    assert rates[:peak + 1] == sorted(rates[:peak + 1]) and rates[peak:] == sorted(rates[peak:], reverse=True)


@pytest.mark.slow
def test_rl_on_the_demo_shop_resumes_after_a_kill(workdir):
    config = (ROOT / "examples" / "rl-tiny.toml").read_text()
    (workdir / "rl.toml").write_text(config.replace('out = "runs/rl-tiny"', 'out = "rl"'))
    args = [sys.executable, "-m", "owrl_sdk", "train", "rl", "--config", "rl.toml"]
    proc = subprocess.Popen(args, cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first = workdir / "rl" / "checkpoints" / "iter-00000" / "state.json"
    deadline = time.time() + 300
    while time.time() < deadline and not first.exists():
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert first.exists()
    out = owrl("train", "rl", "--config", "rl.toml", cwd=workdir)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "resuming at iteration" in out.stderr and "iteration 3/3" in out.stderr
    steps = [json.loads(line)["step"] for line in (workdir / "rl" / "metrics.jsonl").read_text().splitlines()]
    assert steps[-1] == 2 and 0 in steps
    assert sorted(p.name for p in (workdir / "rl" / "checkpoints").iterdir()) == ["iter-00001", "iter-00002"]
    assert list((workdir / "rl" / "tensorboard").iterdir())
