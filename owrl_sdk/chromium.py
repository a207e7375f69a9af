"""Finding a Chromium to drive.

Order: ``OWRL_CHROMIUM`` (or the ``chromium`` setting), Playwright's own managed browser
when it is installed, then a system Chromium on the PATH or at its usual place.
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
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
    """The Chromium that ``playwright install`` put in its cache, if any.

    Read from the cache folder rather than asked of Playwright's sync API, which cannot run
    inside an event loop (``owrl`` calls this from async code too)."""
    root = os.environ.get("PLAYWRIGHT_BROWSERS_PATH")
    if not root or root == "0":
        if sys.platform == "darwin":
            root = str(Path.home() / "Library" / "Caches" / "ms-playwright")
        elif sys.platform == "win32":
            root = str(Path(os.environ.get("LOCALAPPDATA", Path.home())) / "ms-playwright")
        else:
            root = str(Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ms-playwright")
    patterns = ("chromium-*/chrome-linux*/chrome", "chromium-*/chrome-mac*/Chromium.app/Contents/MacOS/Chromium",
                "chromium-*/chrome-mac*/Google Chrome for Testing.app/Contents/MacOS/Google Chrome for Testing",
                "chromium-*/chrome-win*/chrome.exe")
    for pattern in patterns:
        found = sorted(glob.glob(os.path.join(root, pattern)))
        if found:
            return found[-1]
    return None


def configured_chromium(configured: Optional[str] = None) -> Optional[str]:
    """The Chromium asked for: the ``chromium`` setting, else ``OWRL_CHROMIUM`` (the one place
    that variable is read); None when neither is set."""
    return configured or os.environ.get("OWRL_CHROMIUM") or None


def find_chromium(configured: Optional[str] = None, check_managed: bool = True) -> Optional[ChromiumChoice]:
    explicit = configured_chromium(configured)
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
