"""The README's Python block and its flow snippet run as written, on the embedded demo shop."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from owrl_cli import KEEP, owrl

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", README, re.S | re.M)


def test_the_python_block_prints_success(tmp_path):
    code = blocks("python")[0]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OWRL_") or k in KEEP}
    env["OWRL_RUNS_DIR"] = str(tmp_path / "runs")  # the checkout stays clean
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[:1] == ["success"], out.stdout
    assert "Added 2 blue Classic Oxford Shirts in M." in out.stdout
    assert list((tmp_path / "runs").iterdir())  # the run folder went where the setting says


def test_the_flow_with_inputs_block_reads_the_order_status(tmp_path):
    code = blocks("python")[1]
    assert "run_flow_sync" in code
    env = {k: v for k, v in os.environ.items() if not k.startswith("OWRL_") or k in KEEP}
    env.update(OWRL_RUNS_DIR=str(tmp_path / "runs"), OWRL_SECRET_SHOP_PASSWORD="demo1234")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["success", "Delivered"], out.stdout
    bad = code.replace('"order": "DS-198342"', '"ordr": "DS-198342"')
    out = subprocess.run([sys.executable, "-c", bad], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 1 and "unknown input 'ordr'" in out.stderr


def test_the_flow_snippet_runs_as_written(tmp_path):
    (flow,) = [b for b in blocks("json") if '"owrl.flow/1"' in b]
    (tmp_path / "shirts.json").write_text(flow, encoding="utf-8")
    out = owrl("run", "--flow", "shirts.json", "--json", "--out", "runs", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    assert result["outcome"]["status"] == "success", result
    assert result["outcome"]["answer"] == "The Shirts category is open."
