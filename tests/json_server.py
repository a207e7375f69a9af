"""A JSON-over-HTTP stand-in server on 127.0.0.1 for tests of owrl's HTTP clients.

``JsonServer(answer)`` calls ``answer(path, headers, body)`` for every POST and sends back
the ``(status, reply)`` it returns as JSON (``(status, reply, headers)`` adds response
headers); ``requests`` keeps (path, headers, body).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


class JsonServer:
    def __init__(self, answer: Callable[[str, Any, dict], tuple[int, Any]]):
        self.requests: list[tuple[str, Any, dict]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((self.path, self.headers, body))
                status, reply, *extra = answer(self.path, self.headers, body)
                data = json.dumps(reply).encode()
                self.send_response(status)
                for name, value in (extra[0] if extra else {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
