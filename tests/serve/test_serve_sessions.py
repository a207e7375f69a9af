"""``owrl serve``: a job's own saved log-in (``storage_state``), a real server process and a real
Chromium. The job with the session is signed in and the next job without one is not (each
job's context is its own); the cookie is held in memory only, so neither the job store nor
the job's API record nor its steps and trajectory hold its value; a bad one is a 422."""

from __future__ import annotations

import json
import signal

import pytest
from serve_support import Served

SID = "sid-Serve-9kQ3-session-value"

ACCOUNT = """<title>Account</title><p id="who"></p>
<script>
const sid = document.cookie.split("; ").find((c) => c.startsWith("sid="));
document.getElementById("who").textContent = sid ? "Signed in with " + sid.slice(4) : "Please sign in";
</script>"""


def account_flow(url: str) -> dict:
    return {"schema": "owrl.flow/1", "task": "open the account", "start_url": url + "account",
            "turns": [{"calls": [{"name": "extract", "arguments": {"selector": "#who"}, "save_as": "who",
                                  "expect": {"text_visible": "Signed in"}}]},
                      {"calls": [{"name": "done", "arguments": {"response": "signed in"}}]}]}


def session(host: str) -> dict:
    return {"cookies": [{"name": "sid", "value": SID, "domain": host, "path": "/", "expires": -1,
                         "httpOnly": False, "secure": False, "sameSite": "Lax"}], "origins": []}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Served(tmp_path_factory.mktemp("serve-sessions") / "data")
    s.start()
    yield s
    assert s.stop() in (0, -signal.SIGTERM), s.log.read_text()[-3000:]


def test_a_jobs_own_session_signs_in_that_job_only_and_is_never_stored(server, owrl_page_server):
    url = owrl_page_server({"/account": ACCOUNT})
    signed = server.request("POST", "/v1/jobs/flow", {"flow": account_flow(url), "storage_state": session("127.0.0.1")})
    assert signed.status == 201, signed.body
    first = server.wait(signed.json()["id"], timeout=90)
    assert first["status"] == "finished" and first["outcome"]["status"] == "success", first
    # the page echoed the cookie: the job's outputs show its placeholder, not its value
    assert first["outputs"]["who"] == "Signed in with {{secret:COOKIE_SID}}", first["outputs"]

    plain = server.submit_flow(account_flow(url))  # the next job: a context of its own, no cookie
    second = server.wait(plain["id"], timeout=90)
    assert second["outcome"]["status"] == "fail", second
    assert "expected text" in json.dumps(second["outcome"]) or second["outcome"]["failure"], second

    # neither the store, nor any record the server answers or wrote, holds the value
    for path in server.data_dir.rglob("*"):
        if path.is_file():
            assert SID.encode() not in path.read_bytes(), path
    for job in (first, second):
        for route in (f"/v1/jobs/{job['id']}", f"/v1/jobs/{job['id']}/steps"):
            reply = server.request("GET", route)
            assert reply.status == 200 and SID.encode() not in reply.body, route


def test_a_storage_state_that_is_not_one_is_a_422(server, owrl_page_server):
    url = owrl_page_server({"/account": ACCOUNT})
    for bad in ({"cookies": "sid=1"}, {"origins": {"a": 1}}):
        reply = server.request("POST", "/v1/jobs/flow", {"flow": account_flow(url), "storage_state": bad})
        assert reply.status == 422, reply.body
        detail = reply.json()["detail"]
        assert detail[0]["loc"] == ["body", "storage_state"] and "not a storage state" in detail[0]["msg"], detail
    reply = server.request("POST", "/v1/jobs/task", {"task": "x", "start_url": url + "account",
                                                     "storage_state": {"cookies": [1, 2], "origins": 3}})
    assert reply.status == 422, reply.body


def test_a_batch_jobs_session_reaches_every_row_and_no_other_job(server, owrl_page_server):
    url = owrl_page_server({"/account": ACCOUNT})
    flow = account_flow(url)
    reply = server.request("POST", "/v1/jobs/batch", {"flow": flow, "rows": [{}, {}], "storage_state": session("127.0.0.1")})
    assert reply.status == 201, reply.body
    job = server.wait(reply.json()["id"], timeout=120)
    assert job["status"] == "finished" and job["batch"]["succeeded"] == 2, job
    plain = server.request("POST", "/v1/jobs/batch", {"flow": flow, "rows": [{}]})
    other = server.wait(plain.json()["id"], timeout=120)
    assert other["batch"]["failed"] == 1, other
    for path in server.data_dir.rglob("*"):
        if path.is_file():
            assert SID.encode() not in path.read_bytes(), path


def test_a_jobs_cookies_change_nothing_in_another_jobs_records(server, owrl_page_server):
    """A job's cookie values are secrets of that job only: another job whose page shows the same
    text, and whose status is the same word, keeps its own words. A cookie that is no credential
    (short, a word) is not made a secret at all."""
    from security_support import attack

    shared = "tok-Shared-7731-visible-text"
    page = {"/account": ACCOUNT, "/plain": f"<title>Plain</title><p id='who'>Signed in with {shared}</p>"}
    url = owrl_page_server(page)
    state = {"cookies": [{"name": "sid", "value": shared, "domain": "127.0.0.1", "path": "/", "expires": -1,
                          "httpOnly": False, "secure": False, "sameSite": "Lax"},
                         {"name": "state", "value": "finished", "domain": "127.0.0.1", "path": "/", "expires": -1,
                          "httpOnly": False, "secure": False, "sameSite": "Lax"}], "origins": []}
    with attack("serve", "job A's cookie values equal job B's page text and status word",
                "secrets scoped to the job that owns them"):
        mine = server.request("POST", "/v1/jobs/flow", {"flow": account_flow(url), "storage_state": state})
        assert mine.status == 201, mine.body
        first = server.wait(mine.json()["id"], timeout=90)
        assert first["outputs"]["who"] == "Signed in with {{secret:COOKIE_SID}}", first["outputs"]
        plain = account_flow(url)
        plain["start_url"] = url + "plain"
        other = server.wait(server.submit_flow(plain)["id"], timeout=90)
        assert other["status"] == "finished" and other["outputs"]["who"] == f"Signed in with {shared}", other
        again = server.request("GET", f"/v1/jobs/{other['id']}").json()
        assert again["status"] == "finished" and shared in json.dumps(again), again
        # the first job's own records stay redacted when read later, from another request
        assert shared not in server.request("GET", f"/v1/jobs/{first['id']}").body.decode()
