"""The embedded demo shop: a web shop served on 127.0.0.1 and the ``demo-shop`` task suite.

- :class:`DemoShop` serves the shop (per-session state, ``GET /api/state``);
- :class:`DemoShopSuite` is the ``demo-shop`` suite of ``owrl eval`` (tasks in tasks.jsonl);
- ``owrl demo-site [--port N]`` serves the shop in the foreground for a person to try.

Task start URLs are written ``demo:shop/PATH`` and resolved with :func:`resolve_demo_url`.
"""

from __future__ import annotations

from typing import Any, Optional

from owrl_sdk import hookimpl
from owrl_sdk.api import Register, UsageError

from .shop import DemoShop, serving
from .suite import SCHEME, DemoShopOptions, DemoShopSuite, load_tasks, oracle_flow, resolve_demo_url

__all__ = ["DemoShop", "DemoShopSuite", "load_tasks", "oracle_flow", "resolve_demo_url"]


@hookimpl
def register_task_suites(register: Register) -> None:
    register(DemoShopSuite)


@hookimpl
def register_commands(register: Register) -> None:
    from .command import demo_site_command

    register(demo_site_command)


_served: dict[str, DemoShop] = {}  # the shops resolve_url started, by add-button label


@hookimpl
def site_origins(scheme: str) -> Optional[list[str]]:
    """Where this process serves ``demo:shop``: the shop ``resolve_url`` started and every
    ``demo-shop`` suite's own."""
    if scheme != SCHEME:
        return None
    return sorted(serving())


@hookimpl
def resolve_url(url: str, settings: Any) -> Optional[str]:
    """``demo:shop[/PATH]`` -> the shop, started in this process on first use (one per add-button
    label a run's ``[plugins.demo-shop] add_label`` asks for)."""
    if not url.startswith("demo:"):
        return None
    if not url.startswith("demo:shop"):
        raise UsageError(f"unknown demo site in {url!r}: the demo site is demo:shop")
    label = (settings.options(DemoShopSuite.name, DemoShopOptions).add_label or "").strip() or "Add to cart"
    shop = _served.get(label)
    if shop is None or not shop.running:
        shop = _served[label] = DemoShop(add_label=label)
        shop.start()
    return resolve_demo_url(url, shop.base_url)
