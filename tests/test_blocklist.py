"""The host blocklist: TTL, the CLI, and network failures in an evaluation recorded in it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from owrl_sdk.safety.blocklist import Blocklist


def test_entries_expire(tmp_path):
    bl = Blocklist(tmp_path / "b.sqlite", ttl=100)
    bl.add("Shop.Example.com", "network.dns", now=1000)
    bl.add("shop.example.com", "network.refused", now=1010)
    assert bl.blocked("shop.example.com", now=1100)
    assert not bl.blocked("shop.example.com", now=1111)
    assert bl.entries(now=1050) == [("shop.example.com", 1110, "network.refused", 2)]
    assert bl.clear() == 1 and not bl.blocked("shop.example.com", now=1050)


def test_network_failures_in_an_eval_block_the_host(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    # a name under .invalid never resolves: the start page fails at once with a DNS error
    tasks.write_text(json.dumps({"id": "dead", "intent": "x", "start_url": "http://shop.owrl-test.invalid/"}) + "\n")
    env = dict(os.environ)

    def run(*a: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "owrl_sdk", *a], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)

    out = run("eval", "--suite", str(tasks), "--policy", "random", "--out", "ev", "--json")
    assert out.returncode == 0, out.stderr[-1500:]
    summary = json.loads(out.stdout)
    assert summary["infra_errors"] == 0 or summary["episodes"] == 1
    record = json.loads((tmp_path / "ev" / "episodes.jsonl").read_text().splitlines()[0])
    assert record["failure"].startswith("network."), record
    assert record["success"] is None  # a site's fault is not the policy's failure
    listed = run("blocklist", "list")
    assert "shop.owrl-test.invalid" in listed.stdout and "network." in listed.stdout
    (entry,) = json.loads(run("blocklist", "list", "--json").stdout)["hosts"]
    assert entry["host"] == "shop.owrl-test.invalid" and entry["failures"] >= 1 and entry["reason"].startswith("network.")
    assert run("blocklist", "clear").stdout.strip() == "unblocked 1 host"
    assert "no blocked hosts" in run("blocklist", "list").stdout


def test_this_machine_is_never_blocked(tmp_path):
    bl = Blocklist(tmp_path / "b.sqlite")
    for host in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost", "app.localhost"):
        bl.add(host, "network.refused", now=1000)
        assert not bl.blocked(host, now=1001), host
    bl.add("10.0.0.5", "network.refused", now=1000)
    assert bl.blocked("10.0.0.5", now=1001)
