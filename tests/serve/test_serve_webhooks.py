"""Callbacks when a job ends (server/webhooks.py): a signed summary POSTed to the job's
``callback_url``, retried after a failure, accepted only inside the server's allowed domains and
only when the server has a key to sign with. A real `owrl serve`, a real Chromium, and a
receiver on 127.0.0.1 that records what it was sent."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from serve_support import done, flow

KEY = "whk-test-5f2a"
PAGE = {"/": "<!doctype html><title>Ready</title><h1>Ready</h1>"}


class Receiver:
    """Records each POST (path, headers, body); answers the statuses in ``answers`` first, then 204."""

    def __init__(self, answers=()):
        self.posts: list[tuple[str, dict, bytes]] = []
        self.arrived = threading.Event()
        pending = list(answers)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.posts.append((self.path, dict(self.headers), body))
                status = pending.pop(0) if pending else 204
                self.send_response(status)
                if status in (301, 302, 307):
                    self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
                self.send_header("Content-Length", "0")
                self.end_headers()
                if status == 204:
                    outer.arrived.set()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/owrl"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def signed(headers: dict, body: bytes) -> bool:
    expected = "sha256=" + hmac.new(KEY.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(headers.get("X-Owrl-Signature", ""), expected)


def test_an_ended_job_posts_its_signed_summary_retrying_a_failure(serve, owrl_page_server):
    url = owrl_page_server(PAGE)
    receiver = Receiver(answers=[503])  # the first try fails: the second, a second later, is taken
    server = serve(env={"OWRL_SERVE_WEBHOOK_KEY": KEY, "OWRL_ALLOWED_DOMAINS": "127.0.0.1"})
    try:
        reply = server.request("POST", "/v1/jobs/flow?callback_url=" + receiver.url, flow(url, done("ready")))
        assert reply.status == 201, reply.body
        job = server.wait(reply.json()["id"])
        assert receiver.arrived.wait(30), receiver.posts
    finally:
        receiver.close()
    assert len(receiver.posts) == 2  # the 503, then the retry
    path, headers, body = receiver.posts[-1]
    assert path == "/hooks/owrl" and headers["X-Owrl-Job"] == job["id"] and signed(headers, body)
    sent = json.loads(body)
    assert sent["event"] == "job.ended" and sent["job"]["status"] == "finished"
    assert sent["job"]["outcome"]["answer"] == "ready" and "policy_options" not in json.dumps(sent)


def test_a_batch_posts_its_counts_and_a_redirect_is_not_followed(serve, owrl_page_server):
    url = owrl_page_server(PAGE)
    receiver = Receiver(answers=[302])  # sent elsewhere: an answer, not a place to go
    server = serve(env={"OWRL_SERVE_WEBHOOK_KEY": KEY, "OWRL_ALLOWED_DOMAINS": "127.0.0.1"})
    try:
        body = {"flow": flow(url, done("row")), "rows": [{}, {}], "callback_url": receiver.url}
        reply = server.request("POST", "/v1/jobs/batch", body)
        assert reply.status == 201, reply.body
        server.wait(reply.json()["id"], timeout=90)
        deadline = time.monotonic() + 10
        while not receiver.posts and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.5)  # long enough for a retry to arrive, were one sent
    finally:
        receiver.close()
    (only,) = receiver.posts  # a 3xx is the receiver's refusal: not retried, not followed
    sent = json.loads(only[2])
    assert sent["job"]["batch"]["rows"] == 2 and sent["job"]["batch"]["succeeded"] == 2
    assert "results" not in sent["job"]["batch"]  # counts only: the rows stay behind the API


@pytest.mark.parametrize("env,callback,says", [
    ({"OWRL_ALLOWED_DOMAINS": "127.0.0.1"}, "http://127.0.0.1:9/x", "OWRL_SERVE_WEBHOOK_KEY"),
    ({"OWRL_SERVE_WEBHOOK_KEY": KEY}, "http://127.0.0.1:9/x", "no allowed domains"),
    ({"OWRL_SERVE_WEBHOOK_KEY": KEY, "OWRL_ALLOWED_DOMAINS": "127.0.0.1"}, "http://169.254.169.254/latest/", "refused"),
    ({"OWRL_SERVE_WEBHOOK_KEY": KEY, "OWRL_ALLOWED_DOMAINS": "127.0.0.1"}, "file:///etc/passwd", "http:// or https://"),
    ({"OWRL_SERVE_WEBHOOK_KEY": KEY, "OWRL_ALLOWED_DOMAINS": "127.0.0.1"}, "https://collector.example.net/x", "refused"),
])
def test_a_callback_the_server_may_not_call_is_refused_when_the_job_is_submitted(serve, env, callback, says):
    server = serve(env=env)
    task = {"task": "t", "start_url": "http://127.0.0.1:9/", "callback_url": callback}
    reply = server.request("POST", "/v1/jobs/task", task)
    assert reply.status == 422, reply.body
    (error,) = reply.json()["detail"]
    assert error["loc"] == ["body", "callback_url"] and says in error["msg"], error


SAVE = {"/": "<!doctype html><title>Order</title><p id='present'>here</p>"
             "<button onclick=\"document.title = 'Saved'\">Save</button>"}


def test_a_batch_with_a_saved_session_sends_its_callback_with_every_count(serve, owrl_page_server):
    """A job's saved session is dropped from memory when the job ends; the callback needs none
    of it (it was lost when the callback read the job's whole spec back). The counts carry
    needs_review: a row that failed after its point of no return."""
    url = owrl_page_server(SAVE)
    receiver = Receiver()
    server = serve(env={"OWRL_SERVE_WEBHOOK_KEY": KEY, "OWRL_ALLOWED_DOMAINS": "127.0.0.1"})
    session = {"cookies": [{"name": "sid", "value": "s3ss10n-v4lue-0042", "domain": "127.0.0.1", "path": "/",
                            "expires": -1, "httpOnly": True, "secure": False, "sameSite": "Lax"}], "origins": []}
    the_flow = {**flow(url, [{"name": "click", "arguments": {"selector": 'role=button[name="Save"]'}, "commit": True}],
                       [{"name": "click", "arguments": {"selector": '[id="{{input:target}}"]'}}], done("saved")),
                "inputs": {"target": {"type": "string"}}}
    try:
        body = {"flow": the_flow, "rows": [{"target": "present"}, {"target": "missing"}], "callback_url": receiver.url,
                "storage_state": session}
        reply = server.request("POST", "/v1/jobs/batch", body)
        assert reply.status == 201, reply.body
        job = server.wait(reply.json()["id"], timeout=120)
        assert receiver.arrived.wait(30), (receiver.posts, job)
    finally:
        receiver.close()
    path, headers, raw = receiver.posts[-1]
    assert signed(headers, raw)
    counts = json.loads(raw)["job"]["batch"]
    assert counts == {"rows": 2, "succeeded": 1, "failed": 0, "needs_review": 1, "pending": 0}, counts
    view = server.request("GET", f"/v1/jobs/{job['id']}").json()["batch"]
    assert view["needs_review"] == 1 and [r["status"] for r in view["results"]] == ["success", "needs_review"]
    assert "s3ss10n" not in raw.decode()
