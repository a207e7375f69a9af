"""``owrl serve`` end to end: a real server process (uvicorn), a real Chromium, flows on pages
served on 127.0.0.1, a real SQLite job store. One server for the module (two jobs at a time)."""

from __future__ import annotations

import base64
import signal
import time

import pytest
from serve_support import Served, done, flow, wait_calls

SECRET = "pw-Zq81-never-logged"

PAGES = {
    "/": "<title>Orders</title><h1>Orders</h1><a href='/report'>Open the report</a>",
    "/report": "<title>Report</title><h1>Report</h1><p>Total: 42</p>",
    "/login": (
        "<title>Sign in</title><label>Password <input id='pw'></label>"
        "<button onclick=\"document.getElementById('out').textContent = "
        f"document.getElementById('pw').value === atob('{base64.b64encode(SECRET.encode()).decode()}') "
        "? 'Signed in' : 'Wrong password'\">Sign in</button><p id='out'></p>"
    ),
}

OPEN_REPORT = [{"name": "click", "arguments": {"selector": "role=link[name=\"Open the report\"]"},
                "expect": {"url_contains": "/report"}}]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Served(tmp_path_factory.mktemp("serve") / "data", ("--max-concurrent", "2"),
               env={"OWRL_SECRET_SERVE_PW": SECRET})
    s.start()
    yield s
    assert s.stop() in (0, -signal.SIGTERM), s.log.read_text()[-3000:]


def test_a_flow_runs_to_success_and_its_trajectory_screenshots_and_steps_are_served(server, owrl_page_server):
    url = owrl_page_server(PAGES)
    job = server.submit_flow(flow(url, OPEN_REPORT, done("total 42"), task="Read the report's total"))
    assert job["kind"] == "flow" and job["policy"] == "scripted" and job["task"] == "Read the report's total"
    assert job["status"] in ("queued", "running")

    ended = server.wait(job["id"])
    assert ended["status"] == "finished", ended
    assert ended["outcome"]["status"] == "success" and ended["outcome"]["answer"] == "total 42"
    assert ended["steps"] == 2 and ended["run"]

    reply = server.request("GET", f"/v1/jobs/{job['id']}/trajectory")
    assert reply.status == 200 and reply.headers["content-type"] == "application/json"
    traj = reply.json()
    assert traj["schema"] == "owrl.trajectory/1" and traj["outcome"]["status"] == "success"
    assert [s["observation"]["url"] for s in traj["steps"]] == [url, url + "report"]
    assert traj["steps"][1]["observation"]["screenshot_file"] == "screenshots/0001.jpg"

    shots = [server.request("GET", f"/v1/jobs/{job['id']}/screenshots/{i}") for i in (0, 1)]
    for shot in shots:
        assert shot.status == 200 and shot.headers["content-type"] == "image/jpeg"
        assert shot.body[:3] == b"\xff\xd8\xff"  # a JPEG
    assert shots[0].body != shots[1].body  # two different pages
    assert server.request("GET", f"/v1/jobs/{job['id']}/screenshots/2").status == 404
    page = server.request("GET", f"/v1/jobs/{job['id']}/report")  # the run's page, self-contained
    assert page.status == 200 and b"total 42" in page.body and b"data:image/jpeg;base64," in page.body
    assert server.request("GET", f"/v1/jobs/{job['id']}/batch.csv").status == 404  # not a batch

    page = server.request("GET", f"/v1/jobs/{job['id']}/steps?start=1").json()
    assert page["status"] == "finished" and page["start"] == 1 and page["next"] == 2
    assert [s["index"] for s in page["steps"]] == [1]
    assert page["steps"][0]["calls"][0]["result"]["answer"] == "total 42"

    # a finished job's stream replays its steps, then ends with the job
    lines = list(server.stream(f"/v1/jobs/{job['id']}/steps/stream"))
    assert [(line["event"], line.get("index")) for line in lines] == [("step", 0), ("step", 1), ("end", None)]
    assert lines[0]["step"]["turn"]["calls"][0]["name"] == "click"
    assert lines[-1]["job"]["status"] == "finished"

    listed = server.request("GET", "/v1/jobs?status=finished").json()["jobs"]
    assert job["id"] in [j["id"] for j in listed]


def test_the_stream_delivers_each_step_while_the_job_still_runs(server, owrl_page_server):
    url = owrl_page_server(PAGES)
    job = server.submit_flow(flow(url, wait_calls(0.2), wait_calls(2), done("ok")))
    seen = []
    for line in server.stream(f"/v1/jobs/{job['id']}/steps/stream"):
        # the moment a step arrives, the job has not ended: it came as it was written
        status = server.job(job["id"])["status"] if line["event"] == "step" else None
        seen.append((line["event"], line.get("index"), status))
    assert seen[0] == ("step", 0, "running")  # the next step waits 2 s
    assert [s[0] for s in seen if s[0] != "heartbeat"] == ["step", "step", "step", "end"]


def test_secrets_are_typed_into_the_page_and_redacted_from_everything_served(server, owrl_page_server):
    url = owrl_page_server(PAGES) + "login"
    sign_in = [
        {"name": "write", "arguments": {"selector": "#pw", "message": "{{secret:SERVE_PW}}"}},
        {"name": "click", "arguments": {"selector": "role=button[name=\"Sign in\"]"},
         "expect": {"text_visible": "Signed in"}},  # the page saw the real value
    ]
    job = server.submit_flow(flow(url, sign_in, wait_calls(1), done("signed in")))
    live = str(list(server.stream(f"/v1/jobs/{job['id']}/steps/stream")))  # followed while it runs
    ended = server.wait(job["id"])
    assert ended["outcome"]["status"] == "success", ended

    traj = server.request("GET", f"/v1/jobs/{job['id']}/trajectory").body.decode()
    steps = server.request("GET", f"/v1/jobs/{job['id']}/steps").body.decode()
    for served in (traj, steps, live):
        assert SECRET not in served
    assert "{{secret:SERVE_PW}}" in traj


def test_every_job_route_needs_the_bearer_token(server):
    job_id = "0123456789abcdef"  # the token is checked before the job is looked up
    # every route the server publishes, so that one added later is held to the token too
    published = server.request("GET", "/openapi.json", token=None).json()["paths"]
    routes = [(method.upper(), path.replace("{job_id}", job_id).replace("{index}", "0"))
              for path, operations in published.items() if path != "/health" for method in operations]
    assert {("POST", "/v1/jobs/batch"), ("POST", "/v1/jobs/batch/csv"), ("POST", f"/v1/jobs/{job_id}/cancel"),
            ("GET", f"/v1/jobs/{job_id}/screenshots/0")} <= set(routes), routes
    for method, path in routes:
        for token in (None, "wrong-token", server.token + "x", server.token[:-1]):
            reply = server.request(method, path, token=token, raw=b"{not json" if method == "POST" else None)
            assert reply.status == 401, (method, path, token, reply.body)
            assert reply.headers["www-authenticate"] == "Bearer"
    assert server.request("GET", "/v1/jobs").status == 200
    assert server.request("GET", "/health", token=None).json()["status"] == "ok"
    schema = server.request("GET", "/openapi.json", token=None).json()
    assert schema["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"


def test_bad_input_gets_a_clear_4xx(server, owrl_page_server):
    url = owrl_page_server(PAGES)

    def detail(reply, status):
        assert reply.status == status, reply.body
        return reply.json()["detail"]

    assert "no job" in detail(server.request("GET", "/v1/jobs/no-such-job"), 404)
    assert "no job" in detail(server.request("POST", "/v1/jobs/no-such-job/cancel"), 404)
    detail(server.request("POST", "/v1/jobs/flow", raw=b"{"), 422)
    assert detail(server.request("POST", "/v1/jobs/flow", raw=b"\xff\xfe\x00"), 422)[0]["type"] == "json_invalid"
    detail(server.request("POST", "/v1/jobs/flow", {"turns": "click it"}), 422)
    detail(server.request("POST", "/v1/jobs/flow", {**flow(url, done("x")), "schema": "owrl.flow/2"}), 422)
    no_start = flow(url, done("x"))
    del no_start["start_url"]
    assert detail(server.request("POST", "/v1/jobs/flow", no_start), 422)[0]["loc"] == ["query", "start_url"]
    detail(server.request("POST", "/v1/jobs/flow?max_steps=0", flow(url, done("x"))), 422)

    task = {"task": "Read the total", "start_url": url, "policy": "random"}
    assert "file:" in detail(server.request("POST", "/v1/jobs/task", {**task, "start_url": "file:///etc/passwd"}), 422)[0]["msg"]
    detail(server.request("POST", "/v1/jobs/task", {**task, "start_url": "example.com"}), 422)
    assert "available:" in detail(server.request("POST", "/v1/jobs/task", {**task, "policy": "no-such-policy"}), 422)[0]["msg"]
    assert "/v1/jobs/flow" in detail(server.request("POST", "/v1/jobs/task", {**task, "policy": "scripted"}), 422)[0]["msg"]
    detail(server.request("POST", "/v1/jobs/task", {**task, "policy_options": {"memory": "x"}}), 422)
    # options that name a file or folder on the server are the operator's (local files are off)
    for options, extra in [({"system_prompt_file": "/etc/passwd"}, {}), ({"adapter": "/tmp"}, {}),
                           ({"model": "./weights"}, {}), ({}, {"model": "/etc"})]:
        (error,) = detail(server.request("POST", "/v1/jobs/task", {**task, "policy": "openai",
                                                                   "policy_options": options, **extra}), 422)
        assert "names a file or folder on the server, which jobs may not open" in error["msg"], error
        assert error["loc"][-1] == next(iter(options or extra)), error
    detail(server.request("POST", "/v1/jobs/task", {**task, "surprise": 1}), 422)
    detail(server.request("POST", "/v1/jobs/task", {**task, "allowed_domains": ["not a host"]}), 422)
    detail(server.request("POST", "/v1/jobs/task", {"task": "x"}), 422)

    detail(server.request("GET", "/v1/jobs?status=sleeping"), 422)
    detail(server.request("GET", "/v1/jobs?limit=0"), 422)
    job_id = server.submit_flow(flow(url, done("x")))["id"]  # an ended job of its own: the test runs alone too
    assert server.wait(job_id)["status"] == "finished"
    detail(server.request("GET", f"/v1/jobs/{job_id}/screenshots/-1"), 422)
    detail(server.request("GET", f"/v1/jobs/{job_id}/steps?start=-1"), 422)
    assert "already ended" in detail(server.request("POST", f"/v1/jobs/{job_id}/cancel"), 409)


def test_cancelling_a_running_job_aborts_its_episode_and_a_queued_one_never_runs(server, owrl_page_server):
    url = owrl_page_server(PAGES)
    slow = flow(url, wait_calls(), wait_calls(), wait_calls(), task="Wait for a long time")
    running = [server.submit_flow(slow) for _ in range(2)]  # two slots: both run
    queued = server.submit_flow(slow)
    for job in running:
        server.wait(job["id"], until=("running",))
    time.sleep(0.5)
    assert server.job(queued["id"])["status"] == "queued"  # the concurrency limit holds it back

    cancelled = server.request("POST", f"/v1/jobs/{queued['id']}/cancel").json()
    assert cancelled["status"] == "cancelled" and cancelled["run"] is None and "before it ran" in cancelled["error"]

    started = time.monotonic()
    reply = server.request("POST", f"/v1/jobs/{running[0]['id']}/cancel")
    assert reply.status == 200 and time.monotonic() - started < 10  # not after the 30 s wait
    job = reply.json()
    assert job["status"] == "cancelled"
    assert job["outcome"]["status"] == "aborted" and job["outcome"]["failure"]["code"] == "cancelled"
    traj = server.request("GET", f"/v1/jobs/{running[0]['id']}/trajectory").json()
    assert traj["outcome"]["status"] == "aborted"  # the run folder says so too
    assert server.request("POST", f"/v1/jobs/{running[0]['id']}/cancel").status == 409

    assert server.request("POST", f"/v1/jobs/{running[1]['id']}/cancel").json()["status"] == "cancelled"
    assert server.wait(queued["id"])["status"] == "cancelled"  # still not run


@pytest.mark.slow
def test_queued_jobs_run_in_the_order_they_came_and_a_quiet_stream_sends_heartbeats(serve, owrl_page_server):
    """One slot: a long job holds it, three more wait. The stream of a waiting job says it is
    alive (a heartbeat after 15 s of quiet); once the slot frees, the three run first come, first served."""
    from owrl_sdk.server.runner import HEARTBEAT

    server = serve("--max-concurrent", "1")
    url = owrl_page_server(PAGES)
    holder = server.submit_flow(flow(url, wait_calls(30), wait_calls(30), task="Hold the slot"))
    server.wait(holder["id"], until=("running",))
    queued = [server.submit_flow(flow(url, done(str(i)), task=f"queued {i}")) for i in range(3)]
    began = time.monotonic()
    first = next(iter(server.stream(f"/v1/jobs/{queued[-1]['id']}/steps/stream", timeout=HEARTBEAT + 15)))
    assert first == {"event": "heartbeat"}, first
    assert HEARTBEAT - 1 <= time.monotonic() - began < HEARTBEAT + 10
    assert all(server.job(j["id"])["status"] == "queued" for j in queued)  # the slot is still held

    assert server.request("POST", f"/v1/jobs/{holder['id']}/cancel").json()["status"] == "cancelled"
    ended = [server.wait(j["id"]) for j in queued]
    assert [j["status"] for j in ended] == ["finished"] * 3, ended
    starts = [j["started_at"] for j in ended]
    assert starts == sorted(starts) and len(set(starts)) == 3, starts
    # one slot: each started after the one before it ended
    assert all(ended[i]["ended_at"] <= ended[i + 1]["started_at"] for i in range(2)), ended
