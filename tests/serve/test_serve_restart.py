"""Jobs outlive the ``owrl serve`` process: real servers on one data dir, one after the other."""

from __future__ import annotations

import signal
import time

from owrl_cli import owrl
from serve_support import TOKEN, done, flow, wait_calls

PAGES = {"/": "<title>Home</title><h1>Home</h1>"}


def test_a_restart_keeps_finished_jobs_fails_interrupted_ones_and_runs_queued_ones(serve, owrl_page_server, tmp_path):
    url = owrl_page_server(PAGES)
    data = tmp_path / "data"
    first = serve("--max-concurrent", "1", data_dir=data)
    finished = first.submit_flow(flow(url, done("before the crash")))
    assert first.wait(finished["id"])["outcome"]["answer"] == "before the crash"
    running = first.submit_flow(flow(url, wait_calls(), wait_calls()))
    queued = first.submit_flow(flow(url, done("after the restart")))
    first.wait(running["id"], until=("running",))
    time.sleep(0.5)
    assert first.job(queued["id"])["status"] == "queued"  # one job at a time
    first.kill()  # no shutdown at all: the store still says 'running'

    # a second server on the same data dir is refused while one holds it
    second = serve("--max-concurrent", "1", data_dir=data)
    clash = owrl("serve", "--port", "1", "--data-dir", str(data), env={"OWRL_SERVE_TOKEN": TOKEN}, timeout=60)
    assert clash.returncode == 2 and "another owrl serve" in clash.stderr

    listed = {j["id"]: j for j in second.request("GET", "/v1/jobs").json()["jobs"]}
    assert set(listed) >= {finished["id"], running["id"], queued["id"]}
    kept = listed[finished["id"]]
    assert kept["status"] == "finished" and kept["outcome"]["answer"] == "before the crash"
    traj = second.request("GET", f"/v1/jobs/{finished['id']}/trajectory").json()
    assert traj["outcome"]["answer"] == "before the crash"
    assert second.request("GET", f"/v1/jobs/{finished['id']}/screenshots/0").status == 200

    interrupted = listed[running["id"]]
    assert interrupted["status"] == "failed" and interrupted["error"].startswith("interrupted")

    rerun = second.wait(queued["id"])
    assert rerun["status"] == "finished" and rerun["outcome"]["answer"] == "after the restart"

    # a clean stop (SIGTERM) ends a running job the same way, and says so
    stopped = second.submit_flow(flow(url, wait_calls(), wait_calls()))
    second.wait(stopped["id"], until=("running",))
    assert second.stop() in (0, -signal.SIGTERM)
    third = serve(data_dir=data)
    job = third.job(stopped["id"])
    assert job["status"] == "failed" and job["error"].startswith("interrupted")
