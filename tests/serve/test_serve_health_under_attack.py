"""``/health`` answers within a second while hostile jobs run: a ``$ref`` bomb and a
backtracking ``pattern`` in a flow's ``output_schema``, a megabyte input shared by a batch's
rows, a 2 GB download, and half-sent requests (tests/serve/test_serve_connections.py holds the
slow connections alone). A thread asks ``/health`` every 50 ms through the whole test, from
before the first job to after the last has ended; the slowest answer is the figure."""

from __future__ import annotations

import threading
import time
import urllib.request
from typing import Any

import pytest

from security_support import attack, stream_download
from serve_support import Served

pytestmark = pytest.mark.slow


def fan_out(levels: int) -> dict[str, Any]:
    """A schema whose ``$ref``s double at each level (2**levels paths, a kilobyte or two)."""
    defs = {"l0": {"type": "string"}}
    for n in range(1, levels + 1):
        defs[f"l{n}"] = {"type": "array", "items": [{"$ref": f"#/$defs/l{n - 1}"}, {"$ref": f"#/$defs/l{n - 1}"}]}
    return {"$defs": defs, "$ref": f"#/$defs/l{levels}"}


class HealthWatch:
    """Asks /health every 50 ms until stopped; ``slowest`` is the longest answer (a failed or
    timed-out request counts as 5 s)."""

    def __init__(self, base: str):
        self.base, self.slowest, self.asked = base, 0.0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "HealthWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                with urllib.request.urlopen(self.base + "/health", timeout=5) as reply:
                    reply.read()
                took = time.monotonic() - started
            except OSError:
                took = 5.0
            self.slowest = max(self.slowest, took)
            self.asked += 1
            self._stop.wait(0.05)


def flow(url: str, calls: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"schema": "owrl.flow/1", "task": "t", "start_url": url, "turns": [{"thought": "", "calls": calls}], **extra}


def test_health_answers_within_a_second_while_hostile_jobs_run(tmp_path):
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    sent = [0]
    pages = {"/": b"<title>Calm</title><h1>Calm</h1>",
             "/dl": b'<a id="d" href="/big" download>get</a><script>setTimeout(() => d.click(), 100)</script>'}

    class Pages(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            if self.path != "/big":
                body = pages.get(self.path, b"")
                self.send_response(200 if body else 404)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            stream_download(self, sent)

    site = ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{site.server_address[1]}/"
    server = Served(tmp_path / "data", args=("--max-concurrent", "2")).start()
    try:
        with HealthWatch(server.base) as watch:
            with attack("server", "a flow whose output_schema's $refs fan out 2**18, while /health is asked",
                        "refused at submission (expansion capped); /health under 1 s"):
                reply = server.request("POST", "/v1/jobs/flow", flow(url, [{"name": "done", "arguments": {}}],
                                                                     output_schema=fan_out(18)))
                assert reply.status == 422, reply.body
            with attack("server", "a batch whose 1 MB input is shared by 300 rows, while /health is asked",
                        "refused at submission (an input holds 32,768 characters); /health under 1 s"):
                rows = [{"n": str(i)} for i in range(300)]
                body = {"flow": {**flow(url, [{"name": "done", "arguments": {}}]),
                                 "inputs": {"note": {"type": "string"}, "n": {"type": "string"}}},
                        "rows": rows, "inputs": {"note": "x" * (1 << 20)}}
                reply = server.request("POST", "/v1/jobs/batch", body)
                assert reply.status == 422 and b"32,768" in reply.body, reply.body[:300]
            with attack("server", "a flow whose done output meets a backtracking pattern, while /health is asked",
                        "the check runs in a box with a time limit; /health under 1 s"):
                evil = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a|a)+$"}}}
                job = server.submit_flow(flow(url, [{"name": "done", "arguments": {"output": {"s": "a" * 40 + "b"}}}],
                                              output_schema=evil))
            with attack("server", "a flow on a page that downloads 2 GB, while /health is asked",
                        "the download is cut while it streams; /health under 1 s"):
                dl = server.submit_flow(flow(url + "dl", [{"name": "wait", "arguments": {"seconds": 4}},
                                                          {"name": "done", "arguments": {}}]))
            ended = server.wait(job["id"], timeout=60)
            assert ended["outcome"]["status"] != "success", ended
            assert "output_schema" in str(ended["outcome"]), ended["outcome"]
            cut = server.wait(dl["id"], timeout=60)
            assert sent[0] < 400, sent[0]
            assert "download_limit" in str(cut["outcome"]), cut["outcome"]
            time.sleep(0.5)
        assert watch.asked > 20
        assert watch.slowest < 1.0, watch.slowest
    finally:
        server.stop()
        site.shutdown()
