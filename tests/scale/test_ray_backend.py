"""The Ray backend on a real local Ray (loopback, 2 CPUs): same results as the local backend,
a killed worker's episodes retried elsewhere, and a cluster started with ``ray start --head``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from owrl_sdk.browser import processes

ray = pytest.importorskip("ray")

from owrl_cli import owrl  # noqa: E402
from owrl_sdk.config import load_settings  # noqa: E402
from owrl_sdk.scheduling.evaluation import EvalPlan, Evaluation, read_records  # noqa: E402
from owrl_sdk.contract.plugins import Plugins  # noqa: E402
from owrl_sdk.scheduling.raybackend import RayEvaluation, RayOptions  # noqa: E402

TASKS = ["shop-001", "shop-002", "shop-003", "shop-004", "shop-005", "shop-006"]


@pytest.fixture(scope="module")
def local_ray():
    ray.init(address="local", num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    yield ray
    ray.shutdown()


def plan_for(out: Path, workers: int = 2) -> tuple:
    settings = load_settings({"policy": "oracle"})
    plugins = Plugins()
    suite = plugins.catalogue.get("task_suites", "demo-shop")(settings)
    tasks = [t for t in suite.tasks() if t.id in TASKS]
    return EvalPlan(suite=suite, tasks=tasks, workers=workers, policy="oracle", out=out), settings, plugins


def outcomes(out: Path) -> dict:
    return {r.key: (r.status, r.success, r.answer) for r in read_records(out / "episodes.jsonl")}


@pytest.mark.slow
def test_ray_backend_matches_the_local_backend(local_ray, tmp_path):
    plan, settings, plugins = plan_for(tmp_path / "local")
    local = asyncio.run(Evaluation(plan, settings, plugins).run())
    plan, settings, plugins = plan_for(tmp_path / "ray")
    seen = []
    remote = asyncio.run(RayEvaluation(plan, settings, plugins, on_record=seen.append, options=RayOptions()).run())
    assert outcomes(tmp_path / "ray") == outcomes(tmp_path / "local")
    assert len(outcomes(tmp_path / "ray")) == len(TASKS) and len(seen) == len(TASKS)
    for key in ("episodes", "successes", "success_rate", "ci95", "infra_errors"):
        assert remote[key] == local[key], key
    assert remote["success_rate"] == 1.0
    assert remote["backend"] == "ray" and remote["workers_lost"] == 0 and remote["episodes_retried"] == 0
    # every run folder the workers wrote is where the record says, with its trajectory
    for r in read_records(tmp_path / "ray" / "episodes.jsonl"):
        assert (Path(r.run_dir) / "trajectory.json").exists()


@pytest.mark.slow
def test_a_killed_worker_s_episodes_are_retried_elsewhere(local_ray, tmp_path):
    plan, settings, plugins = plan_for(tmp_path / "ray")
    evaluation: RayEvaluation
    killed = []

    def on_record(record):
        if not killed:  # kill a worker while the queue is far from empty: it has an episode in flight
            pool = evaluation.pool
            actor = max(pool.busy, key=lambda a: pool.busy[a])
            assert pool.busy[actor] >= 1
            killed.append(pool.pids[actor])
            os.kill(pool.pids[actor], signal.SIGKILL)

    evaluation = RayEvaluation(plan, settings, plugins, on_record=on_record, options=RayOptions(contexts=2))
    summary = asyncio.run(evaluation.run())
    assert killed
    assert summary["workers_lost"] == 1 and summary["episodes_retried"] >= 1
    # the retried episodes ran to their normal end elsewhere: nothing is lost or blamed on the policy
    assert summary["episodes"] == len(TASKS) and summary["infra_errors"] == 0 and summary["success_rate"] == 1.0
    assert sorted(outcomes(tmp_path / "ray")) == sorted(f"{t}#0" for t in TASKS)


@pytest.mark.slow
def test_episodes_of_workers_that_keep_dying_are_infra_failures(local_ray, tmp_path):
    """With one attempt per episode, the killed worker's in-flight episodes end as infra.worker_lost."""
    plan, settings, plugins = plan_for(tmp_path / "ray")
    evaluation: RayEvaluation
    killed = []

    def on_record(record):
        if not killed:
            pool = evaluation.pool
            actor = max(pool.busy, key=lambda a: pool.busy[a])
            killed.append(pool.busy[actor])
            os.kill(pool.pids[actor], signal.SIGKILL)

    evaluation = RayEvaluation(plan, settings, plugins, on_record=on_record,
                               options=RayOptions(contexts=2, max_attempts=1))
    summary = asyncio.run(evaluation.run())
    records = read_records(tmp_path / "ray" / "episodes.jsonl")
    lost = [r for r in records if r.failure == "infra.worker_lost"]
    assert len(lost) == killed[0] >= 1
    assert all(r.status == "infra_error" and r.success is None for r in lost)
    assert summary["infra_errors"] == len(lost) and summary["episodes"] == len(TASKS)
    assert summary["success_rate"] == 1.0  # infra failures are left out of the policy's success rate


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_cli_joins_a_cluster_started_with_ray_start(tmp_path):
    """Ray's token authentication is turned off for this throwaway cluster (RAY_AUTH_MODE=disabled
    for the head and the driver): with it on, a driver started apart from ``ray start`` on this
    machine was refused with 'Authentication token is missing or incorrect'."""
    noauth = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    port = _free_port()
    ray_bin = Path(sys.executable).with_name("ray")
    head = subprocess.Popen([str(ray_bin), "start", "--head", "--block", "--node-ip-address", "127.0.0.1",
                             "--port", str(port), "--num-cpus", "2", "--include-dashboard", "false",
                             "--disable-usage-stats"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=noauth, start_new_session=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.5)
        out = tmp_path / "eval"
        done = owrl("eval", "--suite", "demo-shop", "--policy", "oracle", "--tasks", "shop-002,shop-003",
                    "--backend", "ray", "--ray-address", f"127.0.0.1:{port}", "--workers", "2", "--out", str(out),
                    "--json", env={"RAY_AUTH_MODE": "disabled"}, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        summary = json.loads(done.stdout)
        assert summary["backend"] == "ray" and summary["episodes"] == 2 and summary["success_rate"] == 1.0
        assert len(read_records(out / "episodes.jsonl")) == 2
    finally:
        # `ray start --block` takes about half a minute to stop its cluster after SIGTERM; this
        # throwaway one gets a few seconds, then the whole session (head, GCS, raylet, workers)
        # is killed, and none of its processes may be left
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=3)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(head.pid, signal.SIGKILL)
        head.wait(timeout=60)
        deadline = time.time() + 10
        while processes.group_members(head.pid) and time.time() < deadline:
            time.sleep(0.1)
        assert not processes.group_members(head.pid), "the cluster left processes behind"


def test_ray_address_without_the_ray_backend_is_a_usage_error(tmp_path):
    done = owrl("eval", "--suite", "demo-shop", "--policy", "oracle", "--tasks", "shop-002",
                "--ray-address", "127.0.0.1:1", "--out", str(tmp_path / "e"), timeout=120)
    assert done.returncode == 2 and "--ray-address needs --backend ray" in done.stderr
