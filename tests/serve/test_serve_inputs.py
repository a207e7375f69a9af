"""``owrl serve`` with inputs, outputs and batches: a real server process, a real Chromium on
pages served on 127.0.0.1. A flow job takes inputs and hands back outputs; bad inputs are one
422 naming each; a batch (JSON rows or a CSV upload) shows every row; a batch is cancelled;
a page that echoes a secret into what ``extract`` saves never gets it into the job record."""

from __future__ import annotations

import http.client
import json
import signal
import time
import uuid
import urllib.request
from typing import Any

import pytest
from serve_support import Reply, Served, done, flow, wait_calls

SECRET = "pw-Inputs-7Hq2-never-shown"

# the page reads ?name= and ?qty= and writes the order line; qty 0 writes no order at all
ORDER_PAGE = """<title>Order</title><h1>Order</h1><p id="line"></p>
<script>
const q = new URLSearchParams(location.search);
const qty = Number(q.get("qty"));
document.getElementById("line").textContent = qty > 0
  ? "Order for " + q.get("name") + ": " + qty + " item(s), number ORD-" + (1000 + qty) : "No order";
</script>"""

PAGES = {
    "/order": ORDER_PAGE,
    # an attacker's page: whatever is typed into the field is echoed into the text extract reads
    "/echo": ("<title>Echo</title><label>Password <input id='pw'></label>"
              "<button onclick=\"document.getElementById('out').textContent = 'You typed: ' + "
              "document.getElementById('pw').value\">Show</button><p id='out'></p>"),
}


def order_flow(url: str) -> dict:
    return {
        "schema": "owrl.flow/1", "task": "Order for {{input:name}}",
        "start_url": url + "order?name={{input:name}}&qty={{input:qty}}",
        "inputs": {"name": {"type": "string", "description": "the customer"},
                   "qty": {"type": "integer", "default": 1, "description": "how many"}},
        "turns": [{"calls": [
            {"name": "extract", "arguments": {"selector": "#line"}, "save_as": "line",
             "expect": {"text_visible": "Order for"}},
            {"name": "done", "arguments": {"response": "ordered"}},
        ]}],
    }


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Served(tmp_path_factory.mktemp("serve-inputs") / "data", ("--max-concurrent", "2"),
               env={"OWRL_SECRET_SERVE_PW": SECRET})
    s.start()
    yield s
    assert s.stop() in (0, -signal.SIGTERM), s.log.read_text()[-3000:]


def upload(server: Served, path: str, fields: dict[str, str], files: dict[str, tuple[str, bytes, str]]) -> Reply:
    """A multipart/form-data POST, as curl -F sends it."""
    boundary = uuid.uuid4().hex
    parts = []
    for name, value in fields.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode() + value.encode())
    for name, (filename, data, kind) in files.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
                     f"Content-Type: {kind}\r\n\r\n".encode() + data)
    body = b"\r\n".join(parts) + f"\r\n--{boundary}--\r\n".encode()
    req = urllib.request.Request(server.base + path, data=body, method="POST", headers={
        "Authorization": f"Bearer {server.token}", "Content-Type": f"multipart/form-data; boundary={boundary}"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return Reply(resp.status, dict(resp.headers), resp.read())
    except urllib.error.HTTPError as err:
        return Reply(err.code, dict(err.headers), err.read())


def test_a_flow_job_takes_inputs_and_its_record_carries_the_outputs(server, owrl_page_server):
    url = owrl_page_server(PAGES)
    reply = server.request("POST", "/v1/jobs/flow", {"flow": order_flow(url), "inputs": {"name": "Maria", "qty": "3"}})
    assert reply.status == 201, reply.body
    queued = reply.json()
    assert queued["inputs"] == {"name": "Maria", "qty": 3}  # typed as declared, at once
    assert queued["outputs"] == {} and queued["batch"] is None
    assert queued["task"] == "Order for Maria" and queued["start_url"] == url + "order?name=Maria&qty=3"
    job = server.wait(queued["id"])
    assert job["outcome"]["status"] == "success", job
    assert job["outputs"] == {"line": "Order for Maria: 3 item(s), number ORD-1003"}
    assert job["outcome"]["outputs"] == job["outputs"]
    traj = server.request("GET", f"/v1/jobs/{job['id']}/trajectory").json()
    assert traj["inputs"] == {"name": "Maria", "qty": 3}
    assert traj["task"]["intent"] == "Order for Maria"
    assert traj["steps"][0]["observation"]["url"].endswith("order?name=Maria&qty=3")

    # the default fills what is not given; a plain flow body still works as before
    job = server.wait(server.request("POST", "/v1/jobs/flow", {"flow": order_flow(url), "inputs": {"name": "Li"}}).json()["id"])
    assert job["inputs"] == {"name": "Li", "qty": 1} and job["outputs"]["line"].endswith("ORD-1001")
    plain = {**order_flow(url), "start_url": url + "order?name=Ann&qty=2", "task": "Order"}
    del plain["inputs"]
    job = server.wait(server.submit_flow(plain)["id"])
    assert job["outputs"] == {"line": "Order for Ann: 2 item(s), number ORD-1002"} and job["inputs"] == {}


def test_bad_inputs_are_one_422_naming_every_one_before_anything_is_queued(server, owrl_page_server):
    url = owrl_page_server(PAGES)
    before = len(server.request("GET", "/v1/jobs?limit=1000").json()["jobs"])
    reply = server.request("POST", "/v1/jobs/flow", {"flow": order_flow(url),
                                                       "inputs": {"qty": "many", "colour": "red"}})
    assert reply.status == 422, reply.body
    detail = reply.json()["detail"]
    by_name = {tuple(d["loc"]): d["msg"] for d in detail}
    assert set(by_name) == {("body", "inputs", "qty"), ("body", "inputs", "colour"), ("body", "inputs", "name")}
    assert "whole number" in by_name[("body", "inputs", "qty")]
    assert "unknown input" in by_name[("body", "inputs", "colour")]
    assert "missing input" in by_name[("body", "inputs", "name")] and "--input" not in by_name[("body", "inputs", "name")]
    assert all(d["type"] == "value_error" for d in detail)

    # a value may never be a secret's placeholder: the flow would type the secret where the value goes
    reply = server.request("POST", "/v1/jobs/flow", {"flow": order_flow(url), "inputs": {"name": "{{secret:SERVE_PW}}"}})
    assert reply.status == 422 and reply.json()["detail"][0]["loc"] == ["body", "inputs", "name"]
    assert "secret" in reply.json()["detail"][0]["msg"]
    # an input not in the flow at all, a value of no input type, a flow that is not one
    assert server.request("POST", "/v1/jobs/flow", {"flow": order_flow(url), "inputs": {"name": ["a"]}}).status == 422
    assert server.request("POST", "/v1/jobs/flow", {"flow": {"turns": "x"}, "inputs": {}}).status == 422
    assert len(server.request("GET", "/v1/jobs?limit=1000").json()["jobs"]) == before  # nothing queued


def test_a_batch_of_json_rows_shows_each_rows_status_inputs_outputs_and_failure(server, owrl_page_server):
    url = owrl_page_server(PAGES)
    rows = [{"name": "Ada", "qty": 2}, {"name": "Bo", "qty": "lots"}, {"name": "Cy", "qty": 0}]
    reply = server.request("POST", "/v1/jobs/batch", {"flow": order_flow(url), "rows": rows, "workers": 2})
    assert reply.status == 201, reply.body
    queued = reply.json()["batch"]  # every row, pending, from the first answer
    assert (queued["rows"], queued["pending"]) == (3, 3) and [r["status"] for r in queued["results"]] == ["pending"] * 3
    job = server.wait(reply.json()["id"], timeout=90)
    assert job["kind"] == "batch" and job["status"] == "finished", job
    batch = job["batch"]
    assert (batch["rows"], batch["succeeded"], batch["failed"], batch["pending"]) == (3, 1, 2, 0)
    ada, bo, cy = batch["results"]
    assert (ada["row"], ada["status"], ada["inputs"]) == (1, "success", {"name": "Ada", "qty": 2})
    assert ada["outputs"] == {"line": "Order for Ada: 2 item(s), number ORD-1002"} and ada["failure"] is None
    assert bo["status"] == "fail" and bo["failure"] == "task.bad_inputs" and "whole number" in bo["detail"]
    # the page writes no order for 0: the flow's expectation is not met, and the row fails alone
    assert cy["status"] == "fail" and cy["failure"] == "policy.gave_up" and cy["inputs"] == {"name": "Cy", "qty": 0}
    assert "Order for" in cy["detail"] and cy["outputs"] == {"line": "No order"}
    assert ada["run_dir"].startswith(f"batches/{job['id']}/runs/") and bo["run_dir"] is None
    reply = server.request("GET", f"/v1/jobs/{job['id']}/trajectory")
    assert reply.status == 404 and "run_dir" in reply.json()["detail"]  # each row has its own
    # what the batch folder's batch.json holds
    folder = server.data_dir / "batches" / job["id"]
    on_disk = json.loads((folder / "batch.json").read_text())
    assert [(r["row"], r["status"], r["outputs"]) for r in on_disk["results"]] == \
        [(r["row"], r["status"], r["outputs"]) for r in batch["results"]]
    # the same table and the batch's page, through the API (no access to the data folder needed)
    table = server.request("GET", f"/v1/jobs/{job['id']}/batch.csv")
    assert table.status == 200 and table.headers["content-type"].startswith("text/csv")
    assert table.body == (folder / "batch.csv").read_bytes() and b"ORD-1002" in table.body
    page = server.request("GET", f"/v1/jobs/{job['id']}/report")
    assert page.status == 200 and page.headers["content-type"].startswith("text/html")
    assert "script-src" not in page.headers["content-security-policy"] and b"Ada" in page.body
    assert server.request("GET", f"/v1/jobs/{job['id']}/batch.csv", token=None).status == 401


def test_a_batch_from_a_csv_upload_and_a_header_that_does_not_fit_the_flow(server, owrl_page_server):
    url = owrl_page_server(PAGES)
    csv = b"name,qty\nAda,4\nBo,\nCy,x\n"  # an empty cell takes the default
    # the flow as a form field (curl -F 'flow=<flow.json'), or as a file (-F flow=@flow.json)
    reply = upload(server, "/v1/jobs/batch/csv", {"flow": json.dumps(order_flow(url))},
                   {"rows": ("rows.csv", csv, "text/csv")})
    assert reply.status == 201, reply.body
    as_file = upload(server, "/v1/jobs/batch/csv", {}, {"flow": ("flow.json", json.dumps(order_flow(url)).encode(),
                                                                 "application/json"),
                                                        "rows": ("rows.csv", csv, "text/csv")})
    assert as_file.status == 201 and as_file.json()["batch"]["rows"] == 3, as_file.body
    job = server.wait(reply.json()["id"], timeout=90)
    results = job["batch"]["results"]
    assert [(r["status"], r["outputs"].get("line")) for r in results] == [
        ("success", "Order for Ada: 4 item(s), number ORD-1004"),
        ("success", "Order for Bo: 1 item(s), number ORD-1001"),
        ("fail", None)]
    assert results[2]["failure"] == "task.bad_inputs" and results[2]["inputs"] == {"name": "Cy", "qty": "x"}

    bad = upload(server, "/v1/jobs/batch/csv", {"flow": json.dumps(order_flow(url))},
                 {"rows": ("rows.csv", b"name,colour\nAda,red\n", "text/csv")})
    assert bad.status == 422, bad.body
    detail = bad.json()["detail"][0]
    assert detail["loc"] == ["body", "rows"] and "'colour'" in detail["msg"] and str(server.data_dir) not in detail["msg"]
    bad = upload(server, "/v1/jobs/batch/csv", {"flow": "{\"turns\": 1}"}, {"rows": ("rows.csv", csv, "text/csv")})
    assert bad.status == 422 and bad.json()["detail"][0]["loc"][:2] == ["body", "flow"]
    # as many rows as a JSON batch may have, and no more (a 5 MB CSV could hold a million)
    many = b"name\n" + b"a\n" * 10_001
    bad = upload(server, "/v1/jobs/batch/csv", {"flow": json.dumps(order_flow(url))}, {"rows": ("rows.csv", many, "text/csv")})
    assert bad.status == 422, bad.body
    assert "more than 10000 rows; a batch takes at most 10000" in bad.json()["detail"][0]["msg"], bad.body
    assert not [p for p in (server.data_dir / "batches").iterdir() if p.name.startswith(".upload")]


def test_a_batchs_rows_share_the_servers_slots_and_cancelling_it_keeps_the_rest_pending(server, owrl_page_server):
    url = owrl_page_server(PAGES)
    slow = {**order_flow(url), "turns": [{"calls": wait_calls(30)}]}
    reply = server.request("POST", "/v1/jobs/batch", {"flow": slow, "rows": [{"name": n} for n in "abcd"], "workers": 2})
    job = server.wait(reply.json()["id"], until=("running",))
    # the server runs two jobs at a time: the batch's two rows hold both slots, so a flow waits
    single = server.request("POST", "/v1/jobs/flow", {"flow": order_flow(url), "inputs": {"name": "Dee"}}).json()
    time.sleep(1.5)
    assert server.job(single["id"])["status"] == "queued"
    started = time.monotonic()
    cancelled = server.request("POST", f"/v1/jobs/{job['id']}/cancel")
    assert cancelled.status == 200 and time.monotonic() - started < 15
    assert cancelled.json()["status"] == "cancelled"
    batch = server.job(job["id"])["batch"]
    assert batch["succeeded"] == 0 and batch["pending"] >= 2 and batch["rows"] == 4
    assert server.request("POST", f"/v1/jobs/{job['id']}/cancel").status == 409
    # the slots are free again: the waiting flow runs
    assert server.wait(single["id"])["outputs"]["line"] == "Order for Dee: 1 item(s), number ORD-1001"


def test_a_row_cannot_make_the_start_url_a_local_file(server, owrl_page_server):
    url = owrl_page_server(PAGES)
    flow = {"schema": "owrl.flow/1", "task": "Read the page", "start_url": "{{input:where}}", "turns": [
        {"calls": [{"name": "extract", "arguments": {"selector": "body"}, "save_as": "body"},
                   {"name": "done", "arguments": {"response": "read"}}]}]}
    # a flow job's filled-in start URL is checked before it is queued
    reply = server.request("POST", "/v1/jobs/flow", {"flow": flow, "inputs": {"where": "file:///etc/passwd"}})
    assert reply.status == 422 and "file:" in reply.json()["detail"][0]["msg"]
    # a batch row's fails alone, before any browser (and the browser refuses file: in every job anyway)
    rows = [{"where": "file:///etc/passwd"}, {"where": url + "order?name=Ed&qty=1"}]
    job = server.wait(server.request("POST", "/v1/jobs/batch", {"flow": flow, "rows": rows}).json()["id"], timeout=60)
    local, page = job["batch"]["results"]
    assert local["status"] == "fail" and local["failure"] == "task.bad_inputs" and "file:" in local["detail"]
    assert local["run_dir"] is None and "root:" not in json.dumps(local)
    assert page["status"] == "success" and "Order for Ed" in page["outputs"]["body"]
    assert page["run_dir"].startswith(f"batches/{job['id']}/runs/")
    assert "root:" not in server.request("GET", f"/v1/jobs/{job['id']}").body.decode()


def test_a_secret_a_page_echoes_into_an_extracted_output_is_redacted_in_the_job_record(server, owrl_page_server):
    url = owrl_page_server(PAGES)
    flow = {"schema": "owrl.flow/1", "task": "Show the password", "start_url": url + "echo", "turns": [
        {"calls": [{"name": "write", "arguments": {"selector": "#pw", "message": "{{secret:SERVE_PW}}"}},
                   {"name": "click", "arguments": {"selector": "role=button[name=\"Show\"]"}}]},
        {"calls": [{"name": "extract", "arguments": {"selector": "#out"}, "save_as": "shown"},
                   {"name": "done", "arguments": {"response": "shown"}}]}]}
    job = server.wait(server.submit_flow(flow)["id"])
    assert job["outcome"]["status"] == "success", job
    assert job["outputs"]["shown"] == "You typed: {{secret:SERVE_PW}}"  # the value, redacted to its placeholder
    served = [server.request("GET", f"/v1/jobs/{job['id']}").body, server.request("GET", "/v1/jobs").body,
              server.request("GET", f"/v1/jobs/{job['id']}/trajectory").body]
    for body in served:
        assert SECRET.encode() not in body
    # and the same page in a batch: the row's outputs are scrubbed too
    reply = server.request("POST", "/v1/jobs/batch", {"flow": flow, "rows": [{}]})
    batch_job = server.wait(reply.json()["id"], timeout=60)
    row = batch_job["batch"]["results"][0]
    assert row["status"] == "success" and row["outputs"]["shown"] == "You typed: {{secret:SERVE_PW}}"
    assert SECRET.encode() not in server.request("GET", f"/v1/jobs/{batch_job['id']}").body
    assert SECRET not in (server.data_dir / "batches" / batch_job["id"] / "batch.json").read_text()


def test_a_job_store_an_older_server_made_gains_the_batch_column_and_its_jobs_read_as_before(tmp_path):
    import sqlite3

    from owrl_sdk.server.jobs import JobStore

    path = tmp_path / "jobs.sqlite3"
    db = sqlite3.connect(path)
    db.executescript("""CREATE TABLE jobs (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL, status TEXT NOT NULL, spec TEXT NOT NULL, created_at TEXT NOT NULL, started_at TEXT,
        ended_at TEXT, run TEXT, steps INTEGER NOT NULL DEFAULT 0, outcome TEXT, error TEXT);""")
    db.execute("INSERT INTO jobs (id, kind, status, spec, created_at, outcome) VALUES (?, 'flow', 'finished', ?, 'then', ?)",
               ("old", json.dumps({"task": "t", "start_url": "demo:shop/", "policy": "scripted"}),
                json.dumps({"status": "success", "answer": "a"})))
    db.commit()
    db.close()
    store = JobStore(path)
    job = store.get("old")
    assert job is not None and job.outcome.status == "success"
    assert (job.inputs, job.outputs, job.batch) == ({}, {}, None)
    store.close()
    assert JobStore(path).get("old") == job  # opened again: the column is not added twice


def _raw_post(server: Served, path: str, headers: dict[str, str], chunks: list[bytes]) -> tuple[int, Any]:
    """A POST whose headers and body are sent as given (a Content-Length that lies, a chunked
    body); the server may stop reading, so a send that fails is no error here: the reply is."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.putrequest("POST", path)
    for name, value in {"Authorization": f"Bearer {server.token}", **headers}.items():
        conn.putheader(name, value)
    conn.endheaders()
    try:
        for chunk in chunks:
            conn.send(chunk)
    except OSError:
        pass
    reply = conn.getresponse()
    status, body = reply.status, json.loads(reply.read())
    conn.close()
    return status, body


def test_a_body_over_the_limit_is_a_413_and_is_not_read(server, owrl_page_server):
    from owrl_sdk.server.app import MAX_BODY_BYTES

    before = len(server.request("GET", "/v1/jobs?limit=1000").json()["jobs"])
    # declared too big: answered from the headers, the body never sent
    status, body = _raw_post(server, "/v1/jobs/task", {"Content-Type": "application/json",
                                                       "Content-Length": str(MAX_BODY_BYTES + 1)}, [])
    assert status == 413 and f"over {MAX_BODY_BYTES} bytes" in body["detail"]
    # chunked (no length): counted as it arrives; a batch whose rows pass the limit is refused
    row = json.dumps({"category": "x" * 1000}).encode()
    rows = b",".join([row] * (MAX_BODY_BYTES // len(row) + 10))
    payload = b'{"flow": ' + json.dumps(flow(owrl_page_server(PAGES), done("x"))).encode() + b', "rows": [' + rows + b"]}"
    pieces = [payload[i:i + 65536] for i in range(0, len(payload), 65536)]
    chunks = [b"%x\r\n%s\r\n" % (len(p), p) for p in pieces] + [b"0\r\n\r\n"]
    status, body = _raw_post(server, "/v1/jobs/batch", {"Content-Type": "application/json",
                                                        "Transfer-Encoding": "chunked"}, chunks)
    assert status == 413 and f"over {MAX_BODY_BYTES} bytes" in body["detail"], body
    assert len(server.request("GET", "/v1/jobs?limit=1000").json()["jobs"]) == before  # nothing queued
    # a body under the limit, chunked, is read whole as before
    small = json.dumps(flow(owrl_page_server(PAGES), done("fine"))).encode()
    status, body = _raw_post(server, "/v1/jobs/flow", {"Content-Type": "application/json",
                                                       "Transfer-Encoding": "chunked"},
                             [b"%x\r\n%s\r\n0\r\n\r\n" % (len(small), small)])
    assert status == 201, body
    server.wait(body["id"])


def test_a_flow_field_over_a_mib_is_told_to_come_as_a_file_not_called_bad_json(server, owrl_page_server):
    big = flow(owrl_page_server(PAGES), done("x"), task="y" * (1024 * 1024 + 10))
    reply = upload(server, "/v1/jobs/batch/csv", {"flow": json.dumps(big)},
                   {"rows": ("rows.csv", b"category\nshirts\n", "text/csv")})
    assert reply.status == 422, reply.body
    (error,) = reply.json()["detail"]
    assert error["msg"].startswith("the form could not be read") and "-F flow=@flow.json" in error["msg"], error
