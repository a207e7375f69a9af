"""SIGTERM (what systemd sends) stops a batch as Ctrl-C does: summary written, lock released, exit 143."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from owrl_cli import KEEP

SLOW_FLOW = {
    "task": "Sign in as {{input:user}} and wait",
    "inputs": {"user": {"type": "string", "required": True}},
    "turns": [
        {"calls": [{"name": "write", "arguments": {"selector": "#user", "message": "{{input:user}}"}},
                   {"name": "write", "arguments": {"selector": "#password", "message": "s3cret"}},
                   {"name": "click", "arguments": {"selector": "role=button[name=\"Log in\"]"},
                    "expect": {"text_visible": "New invoice"}}]},
        {"calls": [{"name": "wait", "arguments": {"seconds": 2}}]},
        {"calls": [{"name": "done", "arguments": {"response": "signed in"}}]},
    ],
}


def test_sigterm_writes_the_summary_releases_the_lock_and_exits_143(tmp_path, invoice_site):
    (tmp_path / "flow.json").write_text(json.dumps(SLOW_FLOW))
    (tmp_path / "rows.csv").write_text("user\n" + "".join(f"ops{i}\n" for i in range(6)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OWRL_") or k in KEEP}
    out = tmp_path / "batch"
    proc = subprocess.Popen([sys.executable, "-m", "owrl_sdk", "run", "--flow", "flow.json", "--inputs", "rows.csv",
                             "--url", invoice_site, "--out", str(out)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:  # the first row has finished: the batch is under way
        rows = out / "rows.jsonl"
        if rows.exists() and rows.read_text().strip():
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    assert (out / "batch.lock").exists()
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr[-2000:]
    assert "interrupted:" in stderr and "the same command resumes them" in stderr
    assert not (out / "batch.lock").exists()
    summary = json.loads((out / "batch.json").read_text())
    done = [r for r in summary["results"] if r["status"] != "pending"]
    assert 1 <= len(done) < 6 and summary["pending"] == 6 - len(done)
    assert all(r["status"] == "success" for r in done)
