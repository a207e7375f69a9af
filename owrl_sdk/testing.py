"""pytest fixtures for plugin authors (registered under ``pytest11``, so installed with owrl).

- ``owrl_plugins``: a fresh :class:`owrl_sdk.contract.plugins.Plugins` (defaults and installed plugins);
- ``owrl_register_plugin(obj, name=None)``: register a plugin for the duration of a test;
- ``owrl_page_server(pages)``: serve ``{"/path": "<html>..."}`` on 127.0.0.1, returns the base URL;
- ``owrl_run_flow(flow_or_turns, url, **settings)``: play a flow with the core's flow player
  (:mod:`owrl_sdk.flows.flowplayer`) in a real Chromium with the plugins above and return the
  trajectory (no event loop needed; no entry-point plugin is required).

Example, in a site adapter's tests::

    def test_banner_is_dismissed(owrl_register_plugin, owrl_page_server, owrl_run_flow):
        owrl_register_plugin(my_adapter_module)
        url = owrl_page_server({"/": "<button>Accept cookies</button><h1>Shop</h1>"})
        traj = owrl_run_flow([{"calls": [{"name": "done", "arguments": {"response": "ok"}}]}], url)
        assert traj.outcome.status == "success"
"""

from __future__ import annotations

import asyncio
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Union

import pytest

if TYPE_CHECKING:  # pragma: no cover
    from owrl_sdk.contract.plugins import Plugins


@pytest.fixture
def owrl_plugins() -> Iterator["Plugins"]:
    from owrl_sdk.contract.plugins import Plugins, reset_plugin_manager

    reset_plugin_manager()  # a fresh process-wide manager, which code under test shares
    yield Plugins()
    reset_plugin_manager()


@pytest.fixture
def owrl_register_plugin(owrl_plugins: "Plugins") -> Iterator[Callable[..., Any]]:
    added: list[Any] = []

    def register(plugin: Any, name: Union[str, None] = None) -> Any:
        owrl_plugins.pm.register(plugin, name=name)
        owrl_plugins.refresh()
        added.append(plugin)
        return plugin

    yield register
    for plugin in added:
        owrl_plugins.pm.unregister(plugin)
    owrl_plugins.refresh()


@pytest.fixture
def owrl_page_server() -> Iterator[Callable[[dict[str, str]], str]]:
    servers: list[ThreadingHTTPServer] = []

    def serve(pages: dict[str, str]) -> str:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                body = pages.get(self.path.split("?")[0])
                data = (body if body is not None else "<h1>Not found</h1>").encode()
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/"

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def owrl_run_flow(owrl_plugins: "Plugins", tmp_path: Path) -> Callable[..., Any]:
    from owrl_sdk.agent import Agent
    from owrl_sdk.config import Settings
    from owrl_sdk.formats.documents import Flow
    from owrl_sdk.flows.flowplayer import FLOW_POLICY, flow_memory

    def run(flow: Union[Flow, list[dict[str, Any]], dict[str, Any]], url: str, **settings: Any) -> Any:
        if isinstance(flow, list):
            flow = {"turns": flow}
        if isinstance(flow, dict):
            flow = Flow.model_validate({"task": "test", "start_url": url, **flow})
        s = Settings(runs_dir=str(tmp_path / "runs"), **settings)

        async def go() -> Any:
            memory = flow_memory(owrl_plugins.catalogue, s)  # plays with the core alone too
            async with Agent(policy=FLOW_POLICY, flow=flow, settings=s, plugins=owrl_plugins, memory=memory) as agent:
                return await agent.run(flow.task or "test", url)

        return asyncio.run(go())

    return run
