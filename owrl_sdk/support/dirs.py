"""The user's folders owrl keeps files in outside a project, as the platform names them.

``platformdirs`` decides: on Linux the XDG folders (``$XDG_CONFIG_HOME/owrl``, else
``~/.config/owrl``; ``~/.cache/owrl``; ``~/.local/state/owrl``), on macOS
``~/Library/Application Support/owrl`` and ``~/Library/Caches/owrl``, on Windows the
``%LOCALAPPDATA%\\owrl`` folders. The ``OWRL_*`` variables named below win over them.
"""

from __future__ import annotations

import os
from pathlib import Path


def config_dir() -> Path:
    """Where the user's ``owrl.toml`` lives (read beneath the working directory's)."""
    import platformdirs

    return platformdirs.user_config_path("owrl", appauthor=False, roaming=True)


def cache_dir() -> Path:
    """Fetched models and interface files: ``$OWRL_CACHE_DIR``, else the user's cache folder."""
    import platformdirs

    named = os.environ.get("OWRL_CACHE_DIR")
    return Path(named).expanduser() if named else platformdirs.user_cache_path("owrl", appauthor=False)


def state_dir() -> Path:
    """What owrl learns as it runs (the host blocklist): ``$OWRL_STATE_DIR``, else the user's
    state folder."""
    import platformdirs

    named = os.environ.get("OWRL_STATE_DIR")
    return Path(named).expanduser() if named else platformdirs.user_state_path("owrl", appauthor=False)
