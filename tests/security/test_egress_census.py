"""The egress gate: a census page uses every way the web platform sends a request or a datagram,
and nothing reaches the refused host, under an allowlist and under a blocklist.

The census page (on 127.0.0.1) tries: navigation (a link), an iframe, fetch, XHR, <img>,
sendBeacon, a fetch(keepalive) on pagehide, an <a ping>, EventSource, WebSocket, a font and a
CSS background, <link rel=prefetch>, speculation-rules prefetch and prerender, a dedicated
worker's fetch, a shared worker's fetch, importScripts and WebSocket, a service worker's
registration and fetch, and WebRTC (a TURN and a STUN server on a UDP port of this machine).
Playwright's routing alone let the shared worker's requests, the keepalive fetch, the
speculation rules and every WebRTC datagram through; the gate (owrl_sdk/browser/egress.py)
and the WebRTC launch flag stop them.

The refused host is a server of this machine addressed as ``localhost`` under an allowlist of
127.0.0.1, and as the machine's own non-loopback address under a blocklist of that address
(skipped where the machine has none).
"""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Optional

import pytest
from security_support import CountingServer, attack

from owrl_sdk.config import Settings
from owrl_sdk.types import Task


class Datagrams:
    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.got: list[bytes] = []
        self._stop = threading.Event()
        threading.Thread(target=self._receive, daemon=True).start()

    def _receive(self) -> None:
        while not self._stop.is_set():
            try:
                self.got.append(self.sock.recvfrom(4096)[0])
            except socket.timeout:
                continue
            except OSError:
                return

    def close(self) -> None:
        self._stop.set()
        self.sock.close()


def census(away: str, ws: str, udp: int) -> dict[str, str]:
    return {
        "/": f"""<html><head><title>Census</title>
<script type="speculationrules">{{"prefetch": [{{"source": "list", "urls": ["{away}/spec-prefetch"]}}],
 "prerender": [{{"source": "list", "urls": ["{away}/spec-prerender"]}}]}}</script>
<link rel="prefetch" href="{away}/link-prefetch">
<style>@font-face {{ font-family: x; src: url({away}/font.woff); }}
body {{ font-family: x; background: url({away}/background.png); }}</style>
</head><body><h1>Census</h1>
<a id="go" href="{away}/navigation">away</a> <a id="ping" href="/next" ping="{away}/ping">next</a>
<iframe src="{away}/iframe"></iframe>
<script>
const away = '{away}';
fetch(away + '/fetch', {{mode: 'no-cors'}}).catch(() => 0);
const x = new XMLHttpRequest(); x.open('GET', away + '/xhr'); x.send();
new Image().src = away + '/img.png';
navigator.sendBeacon(away + '/beacon', 'data');
try {{ new EventSource(away + '/sse'); }} catch (e) {{}}
try {{ new WebSocket('{ws}/socket'); }} catch (e) {{}}
new Worker('/worker.js');
new SharedWorker('/shared.js');
if (navigator.serviceWorker) navigator.serviceWorker.register('/service.js').catch(() => 0);
addEventListener('pagehide', () => fetch(away + '/keepalive', {{method: 'POST', body: 'x', keepalive: true,
                                                                mode: 'no-cors'}}));
try {{
  const pc = new RTCPeerConnection({{iceServers: [
    {{urls: 'turn:127.0.0.1:{udp}?transport=udp', username: 'CHOSEN-BY-THE-PAGE', credential: 'x'}},
    {{urls: 'stun:127.0.0.1:{udp}'}}]}});
  pc.createDataChannel('d');
  pc.createOffer().then((o) => pc.setLocalDescription(o));
}} catch (e) {{}}
</script></body></html>""",
        "/worker.js": f"fetch('{away}/worker-fetch', {{mode: 'no-cors'}}).catch(() => 0);",
        "/shared.js": (f"fetch('{away}/shared-fetch', {{mode: 'no-cors'}}).catch(() => 0);"
                       f"try {{ importScripts('{away}/shared-import.js'); }} catch (e) {{}}"
                       f"try {{ new WebSocket('{ws}/shared-socket'); }} catch (e) {{}}"),
        "/service.js": f"self.addEventListener('install', (e) => e.waitUntil(fetch('{away}/service-fetch').catch(() => 0)));",
        "/next": "<title>Next</title><h1>Next</h1>",
    }


def own_address() -> Optional[str]:
    """This machine's address on its network (not loopback), if it has one."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("10.255.255.255", 1))
        address = probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") else address


@pytest.mark.parametrize("policy", ["allowlist", "blocklist"])
async def test_nothing_of_the_census_reaches_the_refused_host(owrl_page_server, tmp_path, policy):
    from owrl_sdk.browser import BrowserHost

    refused, datagrams = CountingServer(bind="0.0.0.0"), Datagrams()
    try:
        if policy == "allowlist":
            host, lists = "localhost", {"allowed_domains": ["127.0.0.1"]}
        else:
            host = own_address()
            if host is None:
                pytest.skip("this machine has no address but loopback")
            lists = {"blocked_domains": [host]}
        away, ws = f"http://{host}:{refused.port}", f"ws://{host}:{refused.port}"
        url = owrl_page_server(census(away, ws, datagrams.port))
        with attack("egress", f"census page: every kind of request and WebRTC to a refused host ({policy})",
                    "a per-context egress gate below the page; WebRTC left no UDP"):
            settings = Settings(runs_dir=str(tmp_path / "runs"), **lists)
            async with BrowserHost(settings) as browser:
                env = await browser.new_env()
                await env.reset(Task(intent="census", start_url=url))
                await env.page.wait_for_timeout(2500)
                for link in ("#ping", "#go"):
                    try:
                        await env.page.click(link, timeout=3000)
                    except Exception:  # noqa: BLE001 - a refused navigation may raise; the counts decide
                        pass
                    await env.page.wait_for_timeout(800)
                await env.close()
            await asyncio.sleep(1.0)  # a keepalive fetch is sent after the page is gone
            assert refused.hits == [], refused.hits
            assert refused.connections == 0, refused.connections
            assert datagrams.got == [], [d[:20] for d in datagrams.got]
    finally:
        refused.close()
        datagrams.close()


async def test_a_name_that_resolves_to_a_blocked_address_is_refused_by_the_gate(monkeypatch):
    """The gate checks the address a name resolves to. This machine's resolver cannot be told
    to answer a made-up name, so the loop's resolver is replaced for this one test (the gate
    calls it, as it would the system's)."""
    from owrl_sdk.browser.egress import EgressGate
    from owrl_sdk.safety.domains import DomainPolicy

    async def resolver(host, port, **kwargs):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.1.2.3", port))]

    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", resolver)
    gate = EgressGate(DomainPolicy(blocked=["10.0.0.0/8"]))
    address, reason = await gate._check("rebind.example", 80, "http://rebind.example/")
    assert address is None and "resolves to 10.1.2.3, a blocked address" in reason
    address, reason = await gate._check("rebind.example", 80, "http://rebind.example/")
    gate_open = EgressGate(DomainPolicy(blocked=["192.168.0.0/16"]))
    assert (await gate_open._check("rebind.example", 80, "http://rebind.example/"))[0] == "10.1.2.3"
