"""Fixtures for the RPA tests: the back-office invoice form (tests/rpa/pages) served on 127.0.0.1."""

from __future__ import annotations

import functools
import json
import http.server
import threading
from pathlib import Path
from typing import Any

import pytest

PAGES = Path(__file__).parent / "pages"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass


@pytest.fixture(scope="session")
def invoice_site() -> Any:
    """The invoice form's address (``.../invoice.html``), served by a threaded server on 127.0.0.1."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(PAGES)))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/invoice.html"
    server.shutdown()
    server.server_close()


@pytest.fixture
def office(tmp_path, monkeypatch):
    """The purchase-order back office (back_office.py), its flows written to ``tmp_path``
    (login.json, decide.json) and its password given as the secret they type; yields its state
    and base URL."""
    from back_office import LOGIN, PASSWORD, Office, decide_flow, serve

    monkeypatch.setenv("OWRL_SECRET_BO_PASSWORD", PASSWORD)
    state = Office()
    server, base = serve(state)
    (tmp_path / "login.json").write_text(json.dumps(LOGIN))
    (tmp_path / "decide.json").write_text(json.dumps(decide_flow(base)))
    yield state, base
    server.shutdown()
    server.server_close()
