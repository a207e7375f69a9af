#!/usr/bin/env bash
# Set up owrl in ./.venv on a fresh machine: torch (CPU 2.13.0) first, then the project
# with its extras, then a Chromium when none is found, and the system's headless shell beside a
# system Chromium (headless runs launch it: faster to start, lighter to draw). Safe to run again.
#
# Every package is installed at the version of the lock for this Python
# (requirements/lock-pyXY.txt, pip constraints): the versions the test suite was last green
# with. OWRL_LOCK=none installs the newest versions pyproject.toml allows instead (what
# scripts/refresh_lock.py does before it runs the suite on them); OWRL_LOCK=FILE uses another.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
LOCK=${OWRL_LOCK:-requirements/lock-py$(python -c 'import sys; print("%d%d" % sys.version_info[:2])').txt}
PIN=()
if [ "$LOCK" = none ]; then
  echo "OWRL_LOCK=none: installing the newest versions pyproject.toml allows" >&2
elif [ -f "$LOCK" ]; then
  PIN=(-c "$LOCK")
else
  echo "no lock for this Python ($LOCK): installing the newest versions pyproject.toml allows;" \
       "the suite was last green with the versions in requirements/lock-py*.txt" >&2
fi
python -m pip install -q ${PIN[@]+"${PIN[@]}"} --upgrade pip
# the build backend pyproject.toml asks for, in the venv too: tests/test_checks.py builds the wheel
# without build isolation (an SPDX licence string needs setuptools 77)
python -m pip install -q ${PIN[@]+"${PIN[@]}"} "setuptools>=77"
# torch before anything that depends on it, or pip pulls a multi-GB CUDA build.
python -c "import torch" 2>/dev/null || python -m pip install -q ${PIN[@]+"${PIN[@]}"} "torch==2.13.0"
# the extras the lock covers (tests/test_lock.py reads this line)
python -m pip install -q ${PIN[@]+"${PIN[@]}"} -e ".[models,train,openai,excel,bench,scaffold,dev]"
if ! python -c "from owrl_sdk.browser.chromium import find_chromium; import sys; sys.exit(0 if find_chromium() else 1)"; then
  echo "no Chromium found: trying Playwright's download, then the system package" >&2
  if ! python -m playwright install chromium >/dev/null 2>&1; then
    if command -v apt-get >/dev/null; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-headless-shell >/dev/null
    else
      echo "cannot install Chromium here: install one and set OWRL_CHROMIUM" >&2; exit 3
    fi
  fi
fi
# a system Chromium without its headless shell: add the shell where the package manager has it
# (optional: headless runs use the full browser without it)
if python -c "from owrl_sdk.browser.chromium import find_chromium; import sys; c = find_chromium(headless=True); sys.exit(0 if c and c.source == 'system' else 1)" \
    && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  shell_install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium-headless-shell >/dev/null 2>&1; }
  shell_install || { apt-get update -qq >/dev/null 2>&1 && shell_install; } \
    || echo "no chromium-headless-shell package here: headless runs use the full Chromium" >&2
fi
