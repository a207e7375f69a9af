"""Schemathesis against a live ``owrl serve``: generated requests, valid and invalid, from the
server's own /openapi.json; none may get a server error, a response outside the schema or
an accepted invalid body.

The server is confined to 127.0.0.1 (``OWRL_ALLOWED_DOMAINS``): a job whose start URL is
elsewhere is refused at submission, so the jobs the run creates (the schema's examples,
on the demo shop) never leave the machine. Model policies are never built: the default
policy is ``random``. The step stream is left out: it stays open until its job ends, by design.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from serve_support import TOKEN


@pytest.mark.slow
def test_generated_requests_get_no_server_error(serve, tmp_path):
    server = serve("--max-concurrent", "2", env={"OWRL_ALLOWED_DOMAINS": "127.0.0.1", "OWRL_POLICY": "random",
                                                  "OWRL_MAX_STEPS": "2", "HF_HUB_OFFLINE": "1"})
    result = subprocess.run(
        [sys.executable, "-m", "schemathesis.cli", "run", f"{server.base}/openapi.json",
         "--header", f"Authorization: Bearer {TOKEN}",
         "--checks", "all", "--exclude-checks", "positive_data_acceptance,status_code_conformance",
         "--exclude-path-regex", "/steps/stream$",
         "--max-examples", "5", "--seed", "1", "--workers", "1", "--request-timeout", "20",
         "--suppress-health-check", "all", "--report-dir", str(tmp_path / "report")],
        capture_output=True, text=True, timeout=150, cwd=tmp_path)
    tail = (result.stdout + result.stderr)[-6000:]
    assert result.returncode == 0, tail
    assert " 500 " not in server.log.read_text()
    # it did reach the job routes with real job ids, not only 404s
    log = server.log.read_text()
    for route in ("/v1/jobs/flow", "/v1/jobs/batch"):  # a CSV upload is tested in test_serve_inputs.py
        assert f'"POST {route} HTTP/1.1" 201' in log, route
