"""The browser: one Chromium per :class:`BrowserHost`, a fresh context per episode in :class:`BrowserEnv`.

Importing this package does not import Playwright; launching a browser does.
"""

from __future__ import annotations

from typing import Any

from owrl_sdk.browser.errors import ActionError
from owrl_sdk.browser.geometry import grid_to_pixels, pixels_to_grid

__all__ = ["ActionError", "BrowserEnv", "BrowserHost", "Located", "browser_host", "grid_to_pixels", "pixels_to_grid"]


def __getattr__(name: str) -> Any:
    if name in ("BrowserHost", "browser_host"):
        from owrl_sdk.browser import host

        return getattr(host, name)
    if name in ("BrowserEnv", "Located"):
        from owrl_sdk.browser import env

        return getattr(env, name)
    raise AttributeError(name)
