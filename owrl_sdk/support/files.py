"""Files written whole or not at all: the one atomic-write helper.

Every document owrl writes (trajectories, results, reports, batch summaries, configs, saved
sessions, fetched interface files) goes through :func:`write_atomic`: the bytes go to a
temporary file in the same folder, under a name no other writer can take (random, created
with ``O_EXCL``), and a rename puts it in place. A reader sees the old file or the new one,
never half of one; two writers of the same file never share a temporary; a failure leaves no
temporary behind.

:func:`try_lock` is the one inter-process lock (a batch folder, a server's data folder): a
system lock held through ``filelock`` (``flock`` on POSIX, ``LockFileEx`` on Windows), which the
system releases when its holder dies, so a crashed command never leaves a folder locked.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Union

if TYPE_CHECKING:
    from filelock import BaseFileLock


def write_atomic(path: Union[str, Path], data: Union[str, bytes], mode: Optional[int] = None,
                 encoding: str = "utf-8") -> Path:
    """Write ``data`` (text in ``encoding``, or bytes) to ``path`` atomically; returns the path.

    ``mode``: the file's permissions exactly (``0o600`` for a file holding credentials); by
    default those of a new file under the process's umask, as ``open()`` would give."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode(encoding) if isinstance(data, str) else data
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if mode is None else mode)
    try:
        with os.fdopen(fd, "wb") as out:
            if mode is not None:
                os.fchmod(out.fileno(), mode)  # exactly: the umask cannot widen or narrow it
            out.write(raw)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


def try_lock(path: Union[str, Path]) -> Optional["BaseFileLock"]:
    """The system lock on ``path``, now held (``release()`` frees it), or None when another
    holder has it: another process, or another lock object on the same file in this one. The
    file is created if missing and never removed, so no holder can lock a name another has
    already unlinked. Its content is not the lock's: ``filelock`` may empty it."""
    import filelock

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(str(target), timeout=0)
    try:
        lock.acquire()
    except filelock.Timeout:
        return None
    return lock
