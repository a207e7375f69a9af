"""Browsers that live for the whole test session on purpose (tests/browser's shared host).

The check that no test file leaves a Chromium running (``tests/conftest.py``) leaves their
process trees out. It holds the hosts, whose pid may change when one is relaunched.
"""

from __future__ import annotations

from typing import Any

HOSTS: list[Any] = []
