"""Server error pages are errors: a call whose navigation lands on an HTTP 5xx page ends the row
as ``infra.http_5xx`` (status and title in the detail), which ``--retries`` retries before the
point of no return; a 4xx page is the flow's to judge (a validation answer says what was wrong
in its own words), as a business failure that quotes the page. A site on 127.0.0.1
whose budget check answers 502 the first time each PO asks, as a back office under load does."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import parse_qs, urlsplit

import pytest

from owrl_cli import owrl

pytestmark = pytest.mark.slow


@pytest.fixture
def back_office() -> Iterator[tuple[str, list[str]]]:
    """``/po?id=N`` links to ``/check?id=N``, which answers 502 ("Bad Gateway" page) the first
    time for each id and the check after; ``/gone`` is a 404. The log lists every check asked."""
    asked: list[str] = []

    class Site(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            po = parse_qs(parts.query).get("id", ["0"])[0]
            status, body = 200, ""
            if parts.path == "/po":
                body = (f"<title>PO {po}</title><h1>PO {po}</h1><a href='/check?id={po}'>Budget check</a> "
                        f"<a href='/gone'>Archive</a>")
            elif parts.path == "/check":
                asked.append(po)
                if asked.count(po) == 1:
                    status, body = 502, "<title>502 Bad Gateway</title><h1>Bad Gateway</h1>"
                else:
                    body = f"<title>Budget</title><h1>Budget check</h1><p>PO {po}: within budget</p>"
            else:
                status, body = 404, "<title>Not found</title><h1>Not found</h1>"
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Site)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()


def check_flow(site: str, link: str = "Budget check", expect: str = "within budget") -> dict[str, Any]:
    return {"schema": "owrl.flow/1", "task": "Check the budget of PO {{input:id}}", "start_url": site + "/po?id={{input:id}}",
            "inputs": {"id": {"type": "string"}},
            "turns": [{"calls": [{"name": "click", "arguments": {"selector": f'role=link[name="{link}"]'},
                                  "expect": {"text_visible": expect}}]},
                      {"calls": [{"name": "done", "arguments": {"response": "checked"}}]}]}


def run_batch(tmp_path: Path, flow: dict[str, Any], *extra: str) -> dict[str, Any]:
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "flow.json").write_text(json.dumps(flow))
    (tmp_path / "rows.csv").write_text("id\n101\n102\n")
    out = owrl("run", "--flow", "flow.json", "--inputs", "rows.csv", "--out", "batch", "--json", *extra, cwd=tmp_path)
    assert out.stdout.strip(), out.stderr
    return json.loads(out.stdout)


def test_a_502_after_a_click_is_infra_http_5xx_and_retries_pass_it(tmp_path, back_office):
    site, asked = back_office
    first = run_batch(tmp_path / "a", check_flow(site))
    assert [r["status"] for r in first["results"]] == ["infra_error", "infra_error"], first
    row = first["results"][0]
    assert row["failure"] == "infra.http_5xx", row
    assert "HTTP 502" in row["detail"] and "502 Bad Gateway" in row["detail"], row["detail"]
    assert "within budget" not in row["detail"]  # not the next step's expectation
    asked.clear()
    again = run_batch(tmp_path / "b", check_flow(site), "--retries", "1")
    assert [r["status"] for r in again["results"]] == ["success", "success"], again
    assert [r["attempts"] for r in again["results"]] == [2, 2]
    assert sorted(asked) == ["101", "101", "102", "102"]  # each PO's check: the 502, then the retry


def test_a_4xx_page_is_a_business_failure_that_quotes_the_page(tmp_path, back_office):
    site, _ = back_office
    summary = run_batch(tmp_path, check_flow(site, link="Archive", expect="Archived"), "--retries", "1")
    row = summary["results"][0]
    assert row["status"] == "fail" and row["attempts"] == 1, row  # not retried: the site answered
    assert "Archived" in row["detail"] and "http_4xx" not in str(row["failure"]), row


def test_error_pages_4xx_ends_the_episode_on_a_client_error(tmp_path, back_office):
    """``configure(error_pages="4xx")``, asked by a policy's ``environment()``: a 404 ends the
    episode as ``page.http_4xx`` with the status and title."""
    from owrl_sdk import Agent
    from owrl_sdk.config import Settings
    from owrl_sdk.formats.documents import flow_from_data
    from owrl_sdk.flows.flowplayer import ScriptedPolicy

    site, _ = back_office

    class Strict(ScriptedPolicy):
        def environment(self) -> dict[str, Any]:
            return {"error_pages": "4xx"}

    data = {**check_flow(site, link="Archive", expect="Archived"), "task": "archive", "start_url": site + "/po?id=7"}
    data.pop("inputs")
    flow = flow_from_data(data, "flow")
    settings = Settings(runs_dir=str(tmp_path))
    traj = Agent(Strict(settings, flow=flow), settings=settings).run_sync("archive", site + "/po?id=7")
    assert traj.outcome.failure.kind == "page.http_4xx", traj.outcome
    assert "HTTP 404" in traj.outcome.failure.detail and "Not found" in traj.outcome.failure.detail
