"""Finding a Chromium to drive.

Order: ``OWRL_CHROMIUM`` (or the ``chromium`` setting), Playwright's own managed browser
when it is installed, then a system Chromium on the PATH or at its usual place.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

SYSTEM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
SYSTEM_PATHS = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")

#: Flags that keep a headless Chromium quiet on a closed network and runnable as root.
BASE_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


@dataclass(frozen=True)
class ChromiumChoice:
    path: Optional[str]  # None: let Playwright use its managed browser
    source: str  # "OWRL_CHROMIUM", "playwright", "system"


def _playwright_managed() -> Optional[str]:
    """The executable Playwright manages, if it has been installed (no browser launched)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    try:
        with sync_playwright() as p:
            path = p.chromium.executable_path
    except Exception:  # noqa: BLE001 - a broken driver just means 'not available'
        return None
    return path if path and Path(path).exists() else None


def find_chromium(configured: Optional[str] = None, check_managed: bool = True) -> Optional[ChromiumChoice]:
    explicit = configured or os.environ.get("OWRL_CHROMIUM")
    if explicit:
        resolved = explicit if Path(explicit).exists() else shutil.which(explicit)
        if resolved:
            return ChromiumChoice(resolved, "OWRL_CHROMIUM")
        return None
    if check_managed:
        managed = _playwright_managed()
        if managed:
            return ChromiumChoice(None, "playwright")
    for name in SYSTEM_CANDIDATES:
        found = shutil.which(name)
        if found:
            return ChromiumChoice(found, "system")
    for path in SYSTEM_PATHS:
        if Path(path).exists():
            return ChromiumChoice(path, "system")
    return None


REMEDY = (
    "install one: `playwright install chromium`, or on Debian/Ubuntu `apt-get install chromium`, "
    "or point OWRL_CHROMIUM at an executable"
)
