"""mypy for the whole suite, started at the start of a run beside the tests.

``mypy --strict`` from a cold cache (a clean clone) takes about a minute of one core and
needs nothing the tests make. Run as one test it held a worker for that minute; started by
the process that leads the run (xdist's controller, which otherwise waits for reports) it
uses the time the workers leave the cores idle, and ``tests/test_checks.py`` only reads its
result. It is started only when the run will hold that test: the whole suite, or a run naming
``tests/test_checks.py``, with no ``-m``/``-k`` selection. Any other run, and a run of that
file alone, runs mypy in the test itself, as before.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parent.parent
#: Where the test finds the started run: a folder holding ``output`` and, once it ended, ``returncode``.
VARIABLE = "PYTEST_OWRL_MYPY_RUN"
COMMAND = [sys.executable, "-m", "mypy", "--no-error-summary", "--no-color-output"]
ENV = {**os.environ, "NO_COLOR": "1", "PYTHONWARNINGS": ""}

_started: Optional[subprocess.Popen[bytes]] = None


def _wanted(config: Any) -> bool:
    option = config.option
    if any(getattr(option, name, None) for name in ("markexpr", "keyword", "collectonly", "lf", "stepwise")):
        return False  # a selection that may leave the mypy test out
    paths = {Path(str(a).split("::")[0]).resolve() for a in config.args}
    if not paths or paths <= {ROOT, ROOT / "tests"}:
        return True  # the whole suite
    # named among other files; named alone, there is nothing to overlap it with
    return ROOT / "tests" / "test_checks.py" in paths and len(paths) > 1


def start(config: Any) -> None:
    """On the leading process: mypy in the background, its folder told to the workers."""
    global _started
    if hasattr(config, "workerinput") or VARIABLE in os.environ or not _wanted(config):
        return
    folder = Path(tempfile.mkdtemp(prefix="owrl-mypy-"))
    script = ("import subprocess, sys; out = open(sys.argv[1] + '/output', 'wb'); "
              "rc = subprocess.call(sys.argv[2:], stdout=out, stderr=subprocess.STDOUT); out.close(); "
              "open(sys.argv[1] + '/returncode.tmp', 'w').write(str(rc)); "
              "import os; os.replace(sys.argv[1] + '/returncode.tmp', sys.argv[1] + '/returncode')")
    # a session of its own: stop() ends mypy with the wrapper that waits for it
    _started = subprocess.Popen([sys.executable, "-c", script, str(folder), *COMMAND], cwd=ROOT, env=ENV,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    os.environ[VARIABLE] = str(folder)  # the workers are started after this, with this environment


def stop() -> None:
    """At the end of the run: a mypy still running (the run was cut short) is ended."""
    if _started is not None and _started.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(_started.pid, signal.SIGKILL)  # the wrapper and mypy under it
        _started.wait()


def result(timeout: float = 600) -> Optional[tuple[int, str]]:
    """mypy's return code and output from the run started at the start, waited for; None when
    none was started (the test then runs mypy itself)."""
    folder = os.environ.get(VARIABLE)
    if not folder:
        return None
    deadline = time.monotonic() + timeout
    done = Path(folder) / "returncode"
    while not done.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"mypy started at the start of the run gave no result in {timeout:g} s ({folder})")
        time.sleep(0.5)
    return int(done.read_text()), (Path(folder) / "output").read_text(errors="replace")
