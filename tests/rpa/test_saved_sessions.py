"""Saved sessions: --save-storage writes the log-in (mode 0600, never in the runs folder),
--load-storage starts from it (owrl inspect sees past the log-in), and what the file holds is a
secret: a file others can read is refused, and a page that prints the cookie has it redacted."""

from __future__ import annotations

import json
import os
import stat

import pytest

from owrl_cli import owrl

LOGIN = {"task": "Sign in to the back office", "turns": [
    {"calls": [{"name": "write", "arguments": {"selector": "#user", "message": "ops"}},
               {"name": "write", "arguments": {"selector": "#password", "message": "s3cret"}},
               {"name": "click", "arguments": {"selector": "role=button[name=\"Log in\"]"},
                "expect": {"text_visible": "New invoice"}}]},
    {"calls": [{"name": "done", "arguments": {"response": "signed in"}}]}]}


def sign_in(tmp_path, site, *extra):
    (tmp_path / "login.json").write_text(json.dumps(LOGIN))
    return owrl("run", "--flow", "login.json", "--url", site, "--out", "runs", "--json", *extra, cwd=tmp_path)


@pytest.mark.slow
def test_a_saved_log_in_lets_inspect_see_the_invoice_form(tmp_path, invoice_site):
    done = sign_in(tmp_path, invoice_site, "--save-storage", "state/ops.json")
    assert done.returncode == 0, done.stderr
    state_file = tmp_path / "state" / "ops.json"
    assert stat.S_IMODE(state_file.stat().st_mode) == 0o600
    cookie = next(c for c in json.loads(state_file.read_text())["cookies"] if c["name"] == "session")
    assert cookie["value"].startswith("tok-") and len(cookie["value"]) > 20

    fresh = owrl("inspect", invoice_site, "--json", cwd=tmp_path)
    assert fresh.returncode == 0, fresh.stderr
    assert "Customer" not in {e["name"] for e in json.loads(fresh.stdout)}  # only the log-in form
    signed = owrl("inspect", invoice_site, "--json", "--load-storage", "state/ops.json", cwd=tmp_path)
    assert signed.returncode == 0, signed.stderr
    names = {e["name"] for e in json.loads(signed.stdout)}
    assert {"Customer", "Amount", "Priority", "Submit"} <= names, names
    assert cookie["value"] not in signed.stdout + signed.stderr  # the page prints the cookie: redacted

    # a run that starts from it never writes the cookie into its folder
    flow = {"task": "Read the form", "turns": [{"calls": [{"name": "done", "arguments": {"response": "seen"}}]}]}
    (tmp_path / "read.json").write_text(json.dumps(flow))
    run = owrl("run", "--flow", "read.json", "--url", invoice_site, "--load-storage", "state/ops.json", "--out", "runs",
               "--json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    run_dir = tmp_path / json.loads(run.stdout)["run_dir"]
    written = "".join(p.read_text(errors="replace") for p in run_dir.rglob("*") if p.suffix in (".json", ".html"))
    assert "Signed in (" in written and cookie["value"] not in written


def test_storage_files_that_would_leak_are_refused(tmp_path, invoice_site):
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"cookies": [], "origins": []}))
    os.chmod(state, 0o644)
    shown = owrl("inspect", invoice_site, "--load-storage", "state.json", cwd=tmp_path)
    assert shown.returncode == 2 and "other users may read it" in shown.stderr and "chmod 600" in shown.stderr
    os.chmod(state, 0o600)
    state.write_text("[1, 2]")
    assert "not a storage state" in owrl("inspect", invoice_site, "--load-storage", "state.json", cwd=tmp_path).stderr
    into_runs = sign_in(tmp_path, invoice_site, "--save-storage", "runs/state.json")
    assert into_runs.returncode == 2 and "inside the runs folder" in into_runs.stderr
    assert not (tmp_path / "runs" / "state.json").exists()
