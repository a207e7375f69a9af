"""The embedded demo shop: a web shop served on 127.0.0.1 and the ``demo-shop`` task suite.

- :class:`DemoShop` serves the shop (per-session state, ``GET /api/state``);
- :class:`DemoShopSuite` is the ``demo-shop`` suite of ``owrl eval`` (tasks in tasks.jsonl);
- ``owrl demo-site [--port N]`` serves the shop in the foreground for a person to try.

Task start URLs are written ``demo:shop/PATH`` and resolved with :func:`resolve_demo_url`.
"""

from __future__ import annotations

from owrl_sdk import hookimpl

from .shop import DemoShop
from .suite import DemoShopSuite, load_tasks, oracle_flow, resolve_demo_url

__all__ = ["DemoShop", "DemoShopSuite", "load_tasks", "oracle_flow", "resolve_demo_url"]


@hookimpl
def register_task_suites(register):
    register(DemoShopSuite)


@hookimpl
def register_commands(register):
    from .command import demo_site_command

    register(demo_site_command)
