"""Running the installed `owrl` as a user would, for the CLI tests."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Optional

#: Kept from the test session: where persistent state goes (see tests/conftest.py).
KEEP = ("OWRL_STATE_DIR",)


def owrl(*args: str, cwd=None, env: Optional[dict] = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """`python -m owrl_sdk ARGS`, without the caller's other OWRL_* settings."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("OWRL_") or k in KEEP}
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "owrl_sdk", *args], capture_output=True, text=True,
                          cwd=cwd, env=full, timeout=timeout)
