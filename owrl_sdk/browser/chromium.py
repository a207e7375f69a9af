"""Finding a Chromium to drive.

Order: ``OWRL_CHROMIUM`` (or the ``chromium`` setting), Playwright's own managed browser
when it is installed, then a system Chromium on the PATH or at its usual place.

A headless launch takes the system's headless shell when it is installed (Debian's
``chromium-headless-shell``, the build Playwright itself runs headless): the same engine
without the desktop browser around it, so it starts in a third of the time and draws a page
with about a third less CPU (``bench/bench_chromium.py``). ``OWRL_CHROMIUM`` still wins.
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
#: The headless shell, by the binary itself first (its launcher in /usr/bin is a shell script).
HEADLESS_SHELL_PATHS = ("/usr/lib/chromium/chromium-headless-shell", "/usr/lib64/chromium/chromium-headless-shell")
HEADLESS_SHELL_NAMES = ("chromium-headless-shell", "headless_shell")

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
    # WebRTC sends UDP (STUN, TURN) below every proxy and route: a page chose its address and a
    # TURN user name (data out) past the domain policy. Only proxied traffic is left to it.
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
)


@dataclass(frozen=True)
class ChromiumChoice:
    path: Optional[str]  # None: let Playwright use its managed browser
    source: str  # "OWRL_CHROMIUM", "playwright", "system", "system headless shell"


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


def headless_shell() -> Optional[str]:
    """The system's Chromium headless shell, if one is installed."""
    for path in HEADLESS_SHELL_PATHS:
        if os.access(path, os.X_OK):
            return path
    for name in HEADLESS_SHELL_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def find_chromium(configured: Optional[str] = None, check_managed: bool = True,
                  headless: bool = False) -> Optional[ChromiumChoice]:
    """The Chromium to launch; with ``headless``, the headless shell where the system has one
    (an explicit choice and Playwright's managed browser, which picks its own, come first)."""
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
    shell = headless_shell() if headless else None
    if shell:
        return ChromiumChoice(shell, "system headless shell")
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
