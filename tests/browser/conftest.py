"""Fixtures for the browser tests: pages served on 127.0.0.1, one real Chromium, a fresh env per test.

Every async test in this folder runs in the session's event loop, the loop the shared
browser lives in (pytest-asyncio 1.x: ``loop_scope="session"``).
"""

from __future__ import annotations

import functools
import http.server
import threading
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from browser_support import quick_settings
from session_browsers import HOSTS
from owrl_sdk.browser import BrowserHost
from owrl_sdk.browser.chromium import find_chromium

PAGES = Path(__file__).parent / "pages"
HERE = Path(__file__).parent

if find_chromium(check_managed=False) is None:  # pragma: no cover - the suite's machines have one
    pytest.skip("no Chromium on this machine", allow_module_level=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    session_loop = pytest.mark.asyncio(loop_scope="session")
    for item in items:
        if HERE in Path(str(item.fspath)).parents and pytest_asyncio.is_async_test(item):
            item.add_marker(session_loop, append=False)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        super().end_headers()


@pytest.fixture(scope="session")
def site() -> Any:
    """Base URL of tests/browser/pages served by a threaded HTTP server on 127.0.0.1."""
    handler = functools.partial(_QuietHandler, directory=str(PAGES))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def host() -> Any:
    async with BrowserHost(quick_settings()) as shared:
        HOSTS.append(shared)  # up for the whole session on purpose
        yield shared
        HOSTS.remove(shared)


@pytest_asyncio.fixture(loop_scope="session")
async def env(host: BrowserHost, tmp_path: Path) -> Any:
    environment = await host.new_env(run_dir=tmp_path)
    yield environment
    await environment.close()
