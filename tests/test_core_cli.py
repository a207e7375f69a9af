"""The CLI skeleton, run as a user runs it: a subprocess of the installed `owrl`."""

from __future__ import annotations

import json
import subprocess
import sys

from owrl_sdk import __version__

from owrl_cli import owrl



def test_help_imports_no_torch():
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "owrl_sdk", "--help"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    assert "plugins" in out.stdout and "doctor" in out.stdout and "run" in out.stdout
    imported = {line.split("|")[-1].strip().split(".")[0] for line in out.stderr.splitlines() if "|" in line}
    assert "torch" not in imported and "transformers" not in imported
    assert "pluggy" in imported  # the trace really lists imports


def test_import_owrl_sdk_is_torch_free():
    code = "import sys, owrl_sdk, owrl_sdk.episode.loop, owrl_sdk.agent; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False"


def test_version():
    out = owrl("--version")
    assert out.returncode == 0 and __version__ in out.stdout


def test_usage_errors_exit_2_with_one_line(tmp_path):
    out = owrl("run", "--url", "http://127.0.0.1:9/", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip() == "Error: missing --task TEXT (what the agent should do)"
    out = owrl("run", "--frobnicate")
    assert out.returncode == 2 and "No such option" in out.stderr
    out = owrl("run", "--task", "x", "--url", "http://127.0.0.1:9/", "--policy", "nope", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip().startswith("Error: no policy named 'nope' (available:")
    out = owrl("run", "--task", "x", "--url", "http://127.0.0.1:9/", env={"OWRL_MAX_STEPS": "-1"}, cwd=tmp_path)
    assert out.returncode == 2
    assert "setting 'max_steps' (from OWRL_MAX_STEPS)" in out.stderr
    assert "Traceback" not in out.stderr


def test_debug_shows_the_traceback(tmp_path):
    out = owrl("--debug", "run", "--task", "x", "--url", "http://127.0.0.1:9/", "--policy", "nope", cwd=tmp_path)
    assert out.returncode != 0 and "Traceback" in out.stderr


def test_bad_flow_file_is_a_usage_error(tmp_path):
    flow = tmp_path / "flow.json"
    flow.write_text('{"turns": [{"calls": [{"arguments": {}}]}]}')
    out = owrl("run", "--flow", str(flow), "--url", "http://127.0.0.1:9/", "--task", "x", cwd=tmp_path)
    assert out.returncode == 2
    assert "turns[0].calls[0].name: Field required" in out.stderr


def test_doctor_reports_every_component():
    out = owrl("doctor", "--json")
    checks = {c["name"]: c for c in json.loads(out.stdout)}
    for name in ("python", "playwright", "chromium", "torch", "plugins", "catalogue"):
        assert name in checks, name
    for c in checks.values():
        assert c["status"] in ("ok", "warn", "fail")
        if c["status"] != "ok":
            assert c["remedy"], c
    assert out.returncode == (3 if any(c["status"] == "fail" for c in checks.values()) else 0)
    text = owrl("doctor").stdout
    assert "chromium" in text and ("✓" in text or "✗" in text)


def test_doctor_names_a_missing_chromium():
    out = owrl("doctor", "--json", env={"OWRL_CHROMIUM": "/nonexistent/chromium"})
    checks = {c["name"]: c for c in json.loads(out.stdout)}
    assert checks["chromium"]["status"] == "fail"
    assert "OWRL_CHROMIUM" in checks["chromium"]["remedy"]
    assert out.returncode == 3
