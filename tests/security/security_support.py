"""The security suite's table: every attack tried, and what stopped it.

A test wraps the part that tries an attack and checks the defence in ``attack(...)``; the
row is recorded as held only when that block ends without an exception. The root conftest
prints the table in the terminal summary (:func:`print_table`), the way the fault suite prints
its faults, whether the tests ran in one process or on pytest-xdist's workers.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator


@dataclass
class Row:
    area: str
    attack: str
    defence: str
    held: bool = False


ROWS: list[Row] = []


@contextmanager
def attack(area: str, what: str, stopped_by: str) -> Iterator[Row]:
    """Record one attack: ``what`` was tried, ``stopped_by`` is the defence the block checks."""
    row = Row(area, what, stopped_by)
    ROWS.append(row)
    yield row
    row.held = True


def table(rows: list[Row]) -> list[str]:
    widths = [max(len(h), *(len(getattr(r, k)) for r in rows)) for h, k in
              (("area", "area"), ("attack", "attack"), ("stopped by", "defence"))]
    widths = [min(w, 70) for w in widths]

    def line(cells: list[str]) -> str:
        return "  ".join(c[:w].ljust(w) for c, w in zip(cells, widths))

    out = [line(["area", "attack", "stopped by"]) + "  held", line(["-" * w for w in widths]) + "  ----"]
    for r in rows:
        out.append(line([r.area, r.attack, r.defence]) + ("  yes" if r.held else "  NO"))
    return out


def print_table(terminalreporter: Any) -> None:
    if not ROWS:
        return
    terminalreporter.section("security: attacks tried")
    for line in table(ROWS):
        terminalreporter.write_line(line)
    held = sum(r.held for r in ROWS)
    terminalreporter.write_line(f"{len(ROWS)} attacks: {held} stopped, {len(ROWS) - held} got through")


class CountingServer:
    """An HTTP server that counts the requests and connections reaching it (a refused host:
    anything it counts got through). ``bind`` 0.0.0.0 serves every address of this machine."""

    def __init__(self, bind: str = "127.0.0.1", body: bytes = b"<title>Reached</title><h1>Refused host reached</h1>"):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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
                self.send_response(200)
                self.send_header("Access-Control-Allow-Origin", "*")
                self.send_header("Content-Type", "text/javascript" if self.path.endswith(".js") else "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_HEAD = _answer

        self.server = ThreadingHTTPServer((bind, 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def stream_download(handler: Any, sent: list[int], megabytes: int = 2048) -> None:
    """Answer ``handler`` (a BaseHTTPRequestHandler) with an attachment of ``megabytes`` MB,
    1 MB every 10 ms (about 100 MB/s: slow enough to see it stream), counting in ``sent[0]``
    the megabytes written until the client goes away."""
    import time

    handler.send_response(200)
    handler.send_header("Content-Type", "application/octet-stream")
    handler.send_header("Content-Disposition", 'attachment; filename="big.bin"')
    handler.send_header("Content-Length", str(megabytes << 20))
    handler.end_headers()
    try:
        for _ in range(megabytes):
            handler.wfile.write(b"x" * (1 << 20))
            sent[0] += 1
            time.sleep(0.01)
    except OSError:
        pass
