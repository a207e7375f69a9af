"""Browsers that live for the whole test session on purpose (tests/browser's shared host).

The check that no test file leaves a Chromium running (``tests/conftest.py``) leaves their
process trees out. It holds the hosts, whose pid may change when one is relaunched.
:func:`browser_processes` is the scan that check and the browser host's tests share.
"""

from __future__ import annotations

import os
from typing import Any, Iterable

HOSTS: list[Any] = []


def browser_processes(besides: Iterable[Any] = ()) -> set[int]:
    """Running Chromium processes in this Python process's tree (other suites' browsers are
    not ours), less the trees of the hosts ``besides``, all read from one scan of /proc."""
    from owrl_sdk.browser import processes

    tree = processes.children_map()
    skip: set[int] = set()
    for host in besides:
        if host.pid is not None:
            skip |= {host.pid, *processes.descendants(host.pid, tree)}
    return {pid for pid in processes.descendants(os.getpid(), tree)
            if pid not in skip and processes.alive(pid)
            and ("chrom" in processes.command_name(pid) or "headless" in processes.command_name(pid))}
