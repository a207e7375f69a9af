"""Limits on one client's connections (``owrl_sdk/server/connections.py``): a client that opens
hundreds of connections and never finishes a request head, or drips one header a second,
holds neither the server's descriptors nor ``/health``. The attacker connects from 127.0.0.2
(another loopback address: another client to the server); ``/health`` is asked from 127.0.0.1."""

from __future__ import annotations

import os
import socket
import time

from security_support import attack
from serve_support import Served


def _open(port: int, n: int) -> list[socket.socket]:
    conns = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=("127.0.0.2", 0))
        s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Half: ")  # a head that never ends
        conns.append(s)
    return conns


def _closed_by_server(s: socket.socket) -> bool:
    s.settimeout(0.05)
    try:
        return s.recv(1) == b""
    except socket.timeout:
        return False
    except OSError:
        return True


def _health_seconds(server: Served) -> float:
    started = time.monotonic()
    assert server.request("GET", "/health", token=None, timeout=5).status == 200
    return time.monotonic() - started


def test_half_sent_requests_from_one_client_hold_neither_descriptors_nor_health(tmp_path):
    server = Served(tmp_path / "data", args=("--max-connections-per-client", "20", "--head-seconds", "2")).start()
    conns: list[socket.socket] = []
    try:
        with attack("server", "300 connections from one client, each a request head that never ends",
                    "20 connections per client address; a head must arrive within --head-seconds"):
            conns = _open(server.port, 300)
            time.sleep(0.5)
            assert _health_seconds(server) < 1.0
            held = [c for c in conns if not _closed_by_server(c)]
            assert len(held) <= 20, len(held)
            assert len(os.listdir(f"/proc/{server.proc.pid}/fd")) < 120
            time.sleep(2.5)  # past --head-seconds: the rest are closed too
            assert all(_closed_by_server(c) for c in held)
            assert _health_seconds(server) < 1.0
        with attack("server", "one header line a second (slowloris drip)", "the head's time is not reset by data"):
            drip = socket.create_connection(("127.0.0.1", server.port), timeout=5, source_address=("127.0.0.2", 0))
            drip.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            started = time.monotonic()
            closed = False
            while time.monotonic() - started < 6 and not closed:
                try:
                    drip.sendall(b"X-Drip: 1\r\n")
                except OSError:
                    closed = True
                    break
                closed = _closed_by_server(drip)
                time.sleep(0.5)
            assert closed and time.monotonic() - started < 4
        # a well-behaved client after all that: its requests and a second one on the same connection
        assert _health_seconds(server) < 1.0
    finally:
        for c in conns:
            c.close()
        server.stop()
