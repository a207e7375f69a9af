"""The egress gate: every connection a browser context makes goes through a check owrl holds.

Playwright's routing (``context.route``) sees the requests of a context's pages, and not what
the browser sends on their behalf outside it: speculation-rules prefetch and prerender, a
shared worker's fetches, imports and WebSockets, a ``fetch(keepalive)`` sent after the page
is gone. Under a domain policy each context is given its own forward proxy on 127.0.0.1
(:class:`EgressGate`, Playwright's per-context ``proxy`` option, with loopback not bypassed:
``<-loopback>``), so every HTTP request and every tunnel (HTTPS, WebSocket) of that context,
whoever starts it, is a request to the gate first. The gate:

1. refuses a host the policy refuses (:meth:`~owrl_sdk.safety.domains.DomainPolicy.refusal`, the same
   rule as the routing: names, and addresses in any spelling);
2. resolves a name itself and refuses it when any address it resolves to is blocked (a name
   that points at a blocked address, a blocked internal service, is refused by address);
3. connects to the address it checked (never resolving the name again), and for plain HTTP
   forwards one request per connection (``Connection: close``), so a kept-alive connection
   cannot carry a later request to another host.

The server's own clients for a job (the job's OpenAI-compatible endpoint, its callback) go
through one gate of the server's (``refuse_internal`` when the server has no allowlist): a
name is judged by the address it resolves to when the server connects, not only when the job
was submitted, so a name that changes its answer in between reaches nothing inside.

WebRTC's UDP goes below every proxy: Chromium is launched with
``--force-webrtc-ip-handling-policy=disable_non_proxied_udp`` (:data:`owrl_sdk.browser.chromium.BASE_ARGS`),
which leaves it only proxied TCP, through the gate. A browser owrl connects to
(``browser_endpoint``) runs elsewhere and cannot reach a gate on this machine's loopback: the
routing alone holds there, and the episode says so in a warning.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Callable, Optional
from urllib.parse import urlsplit

from owrl_sdk.safety.addresses import NotAHost, internal, parse_ip
from owrl_sdk.safety.domains import DomainPolicy

#: The most bytes of a request's head the gate reads, and how long it waits for it.
HEAD_LIMIT = 64 * 1024
HEAD_SECONDS = 30.0
#: How long the gate waits to connect upstream.
CONNECT_SECONDS = 15.0
_HOP_HEADERS = (b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive")


class EgressGate:
    """A forward proxy for one browser context, held to ``policy``. ``on_refused(url, reason)``
    hears each refusal (the environment reports it like a refused navigation).
    ``refuse_internal``: also refuse every address that is not on the public internet
    (:func:`owrl_sdk.safety.addresses.internal`), whatever the spelling or the name that led to it."""

    def __init__(self, policy: DomainPolicy, on_refused: Optional[Callable[[str, str], None]] = None,
                 refuse_internal: bool = False):
        self.policy = policy
        self.on_refused = on_refused
        self.refuse_internal = refuse_internal
        self.refused: list[tuple[str, str]] = []
        self._server: Optional[asyncio.AbstractServer] = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> str:
        """Listen on 127.0.0.1; the proxy address for Playwright's ``proxy`` option."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=2)

    # ------------------------------------------------------------------ one connection

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await self._one(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError,
                OSError):
            pass
        finally:
            if task is not None:
                self._tasks.discard(task)
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_SECONDS)
        if len(head) > HEAD_LIMIT:
            return await _answer(writer, 431, "request head too large")
        line, _, rest = head.partition(b"\r\n")
        parts = line.decode("latin-1").split(" ")
        if len(parts) != 3:
            return await _answer(writer, 400, "not a proxy request")
        method, target, _version = parts
        tunnel = method.upper() == "CONNECT"
        if tunnel:
            host, port, url = _authority(target, 443)
        else:
            split = urlsplit(target)
            if split.scheme.lower() != "http" or not split.hostname:
                return await _answer(writer, 400, "a proxy request names an http:// address")
            host, port, url = split.hostname, split.port or 80, target
        address, reason = await self._check(host, port, url)
        if address is None:
            self.refused.append((url, reason))
            if self.on_refused is not None:
                self.on_refused(url, reason)
            return await _answer(writer, 403, reason)
        up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(address, port), CONNECT_SECONDS)
        try:
            if tunnel:
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                await writer.drain()
            else:
                split = urlsplit(target)
                path = (split.path or "/") + (f"?{split.query}" if split.query else "")
                up_writer.write(f"{method} {path} HTTP/1.1\r\n".encode("latin-1") + _one_request(rest))
                await up_writer.drain()
            await _pipe_both(reader, writer, up_reader, up_writer)
        finally:
            up_writer.close()

    async def _check(self, host: str, port: int, url: str) -> tuple[Optional[str], str]:
        """The address to connect to, or None and why not."""
        reason = self.policy.refusal(url)
        if reason:
            return None, reason
        try:
            literal = parse_ip(host)
        except NotAHost:
            return None, f"{host} is no address a client connects to"
        if literal is not None:
            why = internal(literal) if self.refuse_internal else None
            return (None, f"{host} is {why}") if why else (str(literal), "")
        try:
            found = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as err:
            return None, f"{host} could not be resolved ({err})"
        addresses = list(dict.fromkeys(str(info[4][0]) for info in found))
        blocked = [a for a in addresses if self.policy.blocks_address(a)]
        if blocked or not addresses:
            return None, f"{host} resolves to {blocked[0] if blocked else 'nothing'}, a blocked address"
        for address in addresses if self.refuse_internal else ():
            ip = parse_ip(address)
            why = internal(ip) if ip is not None else "no address"
            if why:
                return None, f"{host} resolves to {address}, {why}"
        return addresses[0], ""


def _authority(target: str, default_port: int) -> tuple[str, int, str]:
    """``host:port`` of a CONNECT (``[v6]:port`` too) as (host, port, an https URL to check)."""
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        host, port = target, str(default_port)
    return host.strip("[]"), int(port), f"https://{target}/"


def _one_request(rest: bytes) -> bytes:
    """The request's headers with the hop-by-hop ones replaced by ``Connection: close``."""
    lines = [line for line in rest.split(b"\r\n") if line and line.split(b":", 1)[0].strip().lower() not in _HOP_HEADERS]
    return b"\r\n".join([*lines, b"Connection: close", b"", b""])


async def _answer(writer: asyncio.StreamWriter, status: int, reason: str) -> None:
    body = f"owrl egress gate: {reason}\n".encode("utf-8", "replace")
    title = {400: "Bad Request", 403: "Forbidden", 431: "Request Header Fields Too Large"}.get(status, "Error")
    writer.write(f"HTTP/1.1 {status} {title}\r\nContent-Type: text/plain; charset=utf-8\r\n"
                 f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
    await writer.drain()


async def _pipe_both(a_reader: asyncio.StreamReader, a_writer: asyncio.StreamWriter,
                     b_reader: asyncio.StreamReader, b_writer: asyncio.StreamWriter) -> None:
    """Copy both ways until either side ends; then both end."""

    async def copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        while True:
            data = await src.read(65536)
            if not data:
                return
            dst.write(data)
            await dst.drain()

    tasks = {asyncio.ensure_future(copy(a_reader, b_writer)), asyncio.ensure_future(copy(b_reader, a_writer))}
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
