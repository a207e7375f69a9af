"""Attacks on the domain policy: ways a page (or a job) could reach a host it was refused.

Every server here listens on 127.0.0.1 only. The allowed site is addressed as 127.0.0.1; the
"other site" is a second server on the same machine addressed as ``localhost``, which the
policy (``allowed_domains=["127.0.0.1"]``) refuses. Each server counts what reaches it, so
a test can tell "refused before it left" from "reached, then hidden".
"""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Optional

import pytest
from playwright.async_api import Error as PlaywrightError
from security_support import attack

from owrl_sdk import Agent
from owrl_sdk.browser import BrowserHost
from owrl_sdk.config import Settings
from owrl_sdk.formats.documents import Flow
from owrl_sdk.safety.domains import DomainPolicy
from owrl_sdk.contract.policy import Policy
from owrl_sdk.types import Task, Turn

LANDING = "Refused landing page"


class Counting:
    """An HTTP server on 127.0.0.1 that records every request it answers."""

    def __init__(self, pages: Callable[["Counting"], dict[str, Any]]):
        self.hits: list[str] = []
        self.connections = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def handle(self) -> None:
                owner.connections += 1
                super().handle()

            def _answer(self) -> None:
                owner.hits.append(f"{self.command} {self.path}")
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(min(length, 65536))
                page = owner.pages.get(self.path.split("?")[0], f"<title>{LANDING}</title><h1>{LANDING}</h1>")
                if isinstance(page, tuple):  # (status, Location)
                    self.send_response(page[0])
                    self.send_header("Location", page[1])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = page.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.pages = pages(self)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def clear(self) -> None:
        self.hits.clear()
        self.connections = 0

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Listener:
    """A bare TCP listener on 127.0.0.1 that counts the connections made to it (a WebSocket
    server stand-in: a refused socket must not even connect)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


@pytest.fixture(scope="module")
def sites():
    """(site, other, listener): the allowed site, the refused one, the bare WebSocket port."""
    other = Counting(lambda me: {})
    listener = Listener()
    away = f"http://localhost:{other.port}"

    def pages(me: Counting) -> dict[str, Any]:
        here = f"http://127.0.0.1:{me.port}"
        return {
            "/": """<title>Start</title><h1>Start</h1>
<a href="/jump">Redirect</a> <a href="/chain">Chain</a>""",
            "/jump": (302, f"{away}/landing"),
            "/chain": (302, f"{here}/jump"),
            "/around": (302, f"{here}/"),
            "/framed": """<title>Framed</title><h1>Framed</h1><iframe src="/jump" title="inner"></iframe>""",
            "/popups": """<title>Popups</title><h1>Popups</h1>
<a href="/jump" target="_blank">Open in a new tab</a>
<button onclick="window.open('/chain')">Open a window</button>""",
            "/leaky": f"""<title>Leaky</title><h1>Leaky</h1><ul id="log"></ul>
<script>
const away = '{away}';
const note = (text) => {{ const li = document.createElement('li'); li.textContent = text;
                          document.getElementById('log').append(li); }};
fetch(away + '/fetch', {{mode: 'no-cors'}}).then(() => note('fetch settled'), () => note('fetch settled'));
const xhr = new XMLHttpRequest(); xhr.open('GET', away + '/xhr'); xhr.onloadend = () => note('xhr settled'); xhr.send();
const img = new Image(); img.onload = img.onerror = () => note('img settled'); img.src = away + '/pixel.png';
note('beacon queued ' + navigator.sendBeacon(away + '/beacon', 'tracking data'));
try {{
  const ws = new WebSocket('ws://localhost:{listener.port}/socket');
  ws.onclose = () => note('ws settled');
}} catch (err) {{ note('ws settled'); }}
</script>""",
            "/jsurl": """<title>Script address</title><h1>Script address</h1>
<button onclick="location = 'javascript:\\'<h1>smuggled by a script address</h1>\\''">Swap</button>
<a href="javascript:void(0)" onclick="document.getElementById('out').textContent = 'harmless link ran'">Harmless</a>
<p id="out">nothing yet</p>""",
        }

    site = Counting(pages)
    yield f"http://127.0.0.1:{site.port}", other, listener
    site.close()
    other.close()
    listener.close()


def flow(start: str, *calls: dict[str, Any]) -> Flow:
    return Flow.model_validate({"task": "t", "start_url": start,
                                "turns": [{"calls": [c]} for c in calls] + [{"calls": [{"name": "done"}]}]})


class Stubborn(Policy):
    """Plays every turn of a flow whatever the previous turn's result (these tests provoke
    refusals, where the scripted policy would stop)."""

    name = "stubborn"

    def __init__(self, settings: Settings, flow_: Flow):
        super().__init__(settings)
        self.flow = flow_

    async def act(self, context: Any) -> Turn:
        planned = self.flow.turns[len(context.history)]
        return Turn(calls=[c.model_copy(deep=True) for c in planned.calls])


async def run(flow_: Flow, tmp_path: Path, start: Optional[str] = None) -> Any:
    s = Settings(runs_dir=str(tmp_path / "runs"))
    async with Agent(Stubborn(s, flow_), settings=s) as agent:
        return await agent.run(Task(intent="t", start_url=start or flow_.start_url, allowed_domains=["127.0.0.1"]))


def goto(url: str) -> dict[str, Any]:
    return {"name": "goto_url", "arguments": {"url": url}}


def click(selector: str) -> dict[str, Any]:
    return {"name": "click", "arguments": {"selector": selector}}


def seen(traj: Any) -> str:
    """Everything the policy was shown: each observation's tabs and page text, each call's feedback."""
    parts = []
    for step in traj.steps:
        parts += [t.url for t in step.observation.tabs] + [step.observation.aria or ""]
        parts += [(c.result.feedback or "") + (c.result.error or "") for c in step.calls if c.result is not None]
    return "\n".join(parts)


def results(traj: Any) -> list[Any]:
    return [s.calls[0].result for s in traj.steps[:-1]]


def text_of(result: Any) -> str:
    return f"{result.feedback or ''} {result.error or ''}"


# ---------------------------------------------------------------------------- redirect hops


async def test_a_redirect_from_an_allowed_page_is_refused_before_it_leaves(sites, tmp_path):
    site, other, _ = sites
    other.clear()
    with attack("domains", "302 from an allowed page to a refused host", "every hop checked before it is sent"):
        traj = await run(flow(site + "/", goto(site + "/jump"), click("text=Redirect"), goto(site + "/chain"),
                              click("text=Chain")), tmp_path)
        assert other.hits == [], other.hits
        for result in results(traj):
            assert "blocked" in text_of(result) and "localhost is not an allowed domain" in text_of(result), result
        assert LANDING not in seen(traj)
        for step in traj.steps:
            assert all(t.url.startswith("http://127.0.0.1") for t in step.observation.tabs), step.observation.tabs


async def test_a_start_page_that_redirects_is_refused_before_it_leaves(sites, tmp_path):
    site, other, _ = sites
    other.clear()
    with attack("domains", "start page that redirects to a refused host", "every hop checked before it is sent"):
        traj = await run(flow(site + "/jump"), tmp_path)
        assert other.hits == [], other.hits
        assert traj.outcome.status != "success"
        assert "localhost is not an allowed domain" in json.dumps(traj.outcome.model_dump(mode="json"))
        assert LANDING not in seen(traj)


async def test_an_iframe_whose_address_redirects_is_refused_before_it_leaves(sites, tmp_path):
    site, other, _ = sites
    other.clear()
    with attack("domains", "iframe whose src redirects to a refused host", "every hop checked before it is sent"):
        traj = await run(flow(site + "/framed", {"name": "wait", "arguments": {"seconds": 0.5}}), tmp_path)
        assert traj.outcome.status == "success"
        assert other.hits == [], other.hits
        assert LANDING not in seen(traj)


async def test_hop_checks_keep_to_their_own_episode(sites, tmp_path):
    """Redirects inside the policy still land; an episode without a policy, in the same
    browser at the same time, still follows a redirect the other one refuses."""
    site, other, _ = sites
    other.clear()

    def landings() -> int:
        return other.hits.count("GET /landing")

    async with BrowserHost(Settings(runs_dir=str(tmp_path / "runs"))) as host:
        guarded, free = await host.new_env(), await host.new_env()
        await guarded.reset(Task(intent="t", start_url=site + "/around", allowed_domains=["127.0.0.1"]))
        await free.reset(Task(intent="t", start_url=site + "/"))
        assert guarded.page.url == site + "/"
        await free.page.goto(site + "/jump")
        assert free.page.url.startswith("http://localhost:") and landings() == 1
        with pytest.raises(PlaywrightError):
            await guarded.page.goto(site + "/jump")
        assert guarded.page.url == site + "/" and landings() == 1
        await guarded.close()
        await free.page.goto(site + "/jump")  # the guard is gone with the guarded episode
        assert landings() == 2
        await free.close()


# ---------------------------------------------------------------------------- new tabs


async def test_a_new_tab_that_redirects_to_a_refused_host_is_closed(sites, tmp_path):
    site, other, _ = sites
    other.clear()
    with attack("domains", "target=_blank link / window.open redirecting to a refused host",
                "the new tab's address checked; a refused tab closed, with the reason"):
        traj = await run(flow(site + "/popups", click("text=Open in a new tab"),
                              click("role=button[name='Open a window']")), tmp_path)
        assert traj.outcome.status == "success"
        for result in results(traj):
            text = text_of(result)
            assert result.ok, result
            assert "new tab" in text and "closed" in text and "localhost is not an allowed domain" in text, text
            assert result.page["tabs_opened"] == [] and result.page["active_tab"] == 0, result.page
        for step in traj.steps:
            assert len(step.observation.tabs) == 1, step.observation.tabs
        assert LANDING not in seen(traj)
        assert other.hits == [], other.hits


# ---------------------------------------------------------------------------- sub-resources


async def test_sub_resources_never_reach_a_refused_host(sites, tmp_path):
    site, other, listener = sites
    other.clear()
    listener.connections = 0
    with attack("domains", "fetch, XHR, <img>, sendBeacon and WebSocket to a refused host",
                "every request routed, refused ones 204; WebSockets closed unconnected"):
        settings = Settings(runs_dir=str(tmp_path / "runs"))
        async with BrowserHost(settings) as host:
            env = await host.new_env()
            await env.reset(Task(intent="t", start_url=site + "/leaky", allowed_domains=["127.0.0.1"]))
            for _ in range(100):  # bounded: 10 s
                if await env.page.locator("#log li").count() >= 5:
                    break
                await env.page.wait_for_timeout(100)
            log = await env.page.locator("#log").inner_text()
            await env.page.wait_for_timeout(500)  # a beacon is sent after the page asked for it
            await env.close()
        for kind in ("fetch", "xhr", "img", "beacon", "ws"):
            assert kind in log, log  # the page did try each one
        assert other.hits == [], other.hits
        assert other.connections == 0
        assert listener.connections == 0


# ---------------------------------------------------------------------------- javascript: addresses


async def test_a_javascript_address_assigned_to_location_is_refused(sites, tmp_path):
    site, _, _ = sites
    with attack("domains", "location = 'javascript:...' replacing the document",
                "the replaced document detected and left, with the reason"):
        traj = await run(flow(site + "/jsurl", click("text=Harmless"), click("text=Swap")), tmp_path)
        harmless, swap = results(traj)
        assert harmless.ok and "blocked" not in text_of(harmless), harmless
        assert "harmless link ran" in (traj.steps[1].observation.aria or "")
        assert "javascript: addresses are not allowed" in text_of(swap), swap
        assert "smuggled" not in seen(traj)


def test_the_policy_refuses_local_schemes_when_told_to():
    p = DomainPolicy(deny_local=True)
    assert p.active and not p.routes
    for url in ("file:///etc/passwd", "FILE:///etc/passwd", "view-source:file:///etc/passwd",
                "view-source:http://127.0.0.1/", "chrome://settings", "devtools://devtools/bundled/inspector.html",
                "chrome-extension://abc/x.html", "filesystem:http://127.0.0.1/temporary/x",
                "chrome-untrusted://print/", "Chrome-Untrusted://print/", "chrome-search://local-ntp/",
                "about:version", "ABOUT:Version", "about:blank?x", "about:settings"):
        assert "refused" in (p.refusal(url) or ""), url
    for url in ("http://example.com/", "https://example.com/", "about:blank", "about:blank#top", "about:srcdoc",
                "data:text/html,hi"):
        assert p.refusal(url) is None, url
    # a file: start page does not reopen local files when they are denied
    assert DomainPolicy.for_task([], start_url="file:///tmp/x.html", deny_local=True).refusal("file:///etc/passwd")
    assert DomainPolicy.for_task([], start_url="file:///tmp/x.html").refusal("file:///etc/passwd") is None


# ---------------------------------------------------------------------------- owrl serve and local files


def _serve_job(server: Any, site: str, calls: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
    from serve.serve_support import flow as serve_flow

    job = server.submit_flow(serve_flow(site + "/", calls, [{"name": "done", "arguments": {"response": "ok"}}]))
    ended = server.wait(job["id"], timeout=90)
    steps = server.request("GET", f"/v1/jobs/{job['id']}/steps").json()["steps"]
    trajectory = server.request("GET", f"/v1/jobs/{job['id']}/trajectory").body.decode("utf-8", "replace")
    return ended, json.dumps(steps) + trajectory


@pytest.fixture
def serve(tmp_path):
    """``owrl serve`` processes, as tests/serve starts them."""
    from serve.serve_support import servers

    yield from servers(tmp_path)


def test_a_serve_job_cannot_read_local_files(sites, serve, tmp_path):
    site, _, _ = sites
    marker = tmp_path / "local-secret.txt"
    marker.write_text("local-file-marker-7d41\n")
    server = serve()
    attempts = [
        ("goto_url file:///etc/passwd", [goto("file:///etc/passwd")], "root:x:0:0"),
        ("goto_url a local file", [goto(marker.as_uri())], "local-file-marker-7d41"),
        ("goto_url view-source:file:", [goto("view-source:" + marker.as_uri())], "local-file-marker-7d41"),
        ("new_tab on a local file", [{"name": "new_tab", "arguments": {"url": marker.as_uri()}}],
         "local-file-marker-7d41"),
        ("goto_url about:version (the browser's command line and paths)", [goto("about:version")], "Command Line"),
        ("goto_url chrome-untrusted:", [goto("chrome-untrusted://print/")], '"observation": {"url": "chrome-untrusted:'),
    ]
    for what, calls, content in attempts:
        with attack("serve", f"flow job with no allowlist: {what}",
                    "local schemes denied by default in every navigation"):
            job, shown = _serve_job(server, site, calls)
            assert job["status"] == "finished", job
            assert content not in shown, what
            assert "refused" in shown and "local files" in shown, shown[:2000]


def test_an_operator_may_allow_local_files(sites, serve, tmp_path):
    site, _, _ = sites
    marker = tmp_path / "local-page.txt"
    marker.write_text("local-file-marker-5e02\n")
    server = serve(env={"OWRL_SERVE_ALLOW_LOCAL_FILES": "1"})
    job, shown = _serve_job(server, site, [goto(marker.as_uri())])
    assert job["status"] == "finished", job
    assert "local-file-marker-5e02" in shown


def test_the_servers_allowlist_confines_every_job(sites, serve):
    """serve.md: the server's allowed_domains confines every job; a job's own list may narrow
    it, never widen it; a job without one gets the server's."""
    site, other, _ = sites
    away = f"http://localhost:{other.port}"
    server = serve(env={"OWRL_ALLOWED_DOMAINS": "127.0.0.1"})
    refused = {
        "a task whose start URL is outside the server's list":
            ("/v1/jobs/task", {"task": "t", "start_url": away + "/"}),
        "a task whose own list widens the server's":
            ("/v1/jobs/task", {"task": "t", "start_url": site + "/", "allowed_domains": ["localhost"]}),
        "a flow job whose own list widens the server's":
            ("/v1/jobs/flow?allowed_domains=localhost", {"schema": "owrl.flow/1", "task": "t", "start_url": site + "/",
                                                         "turns": [{"calls": [{"name": "done"}]}]}),
        "a task whose policy would call an endpoint outside the server's list":
            ("/v1/jobs/task", {"task": "t", "start_url": site + "/", "policy": "openai",
                               "policy_options": {"base_url": away + "/v1", "retries": 0}}),
        "a flow whose start URL is outside the server's list":
            ("/v1/jobs/flow", {"schema": "owrl.flow/1", "task": "t", "start_url": away + "/",
                               "turns": [{"calls": [{"name": "done"}]}]}),
    }
    for what, (path, body) in refused.items():
        with attack("serve", what, "refused at submission (422), nothing queued"):
            reply = server.request("POST", path, body)
            assert reply.status == 422, (reply.status, reply.body)
            assert "allowed domain" in reply.body.decode(), reply.body
    assert server.request("GET", "/v1/jobs").json()["jobs"] == []
    with attack("serve", "a flow job without a list of its own navigates to another host",
                "the job runs under the server's list: the navigation is refused before it leaves"):
        job, shown = _serve_job(server, site, [goto(away + "/landing")])
        assert job["status"] == "finished" and job["allowed_domains"] == ["127.0.0.1"], job
        assert "localhost is not an allowed domain" in shown, shown[:2000]
        assert other.hits == [], other.hits
