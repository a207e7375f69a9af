"""Loading a model fetches no code from the network.

On a CPU with AVX512-BF16, importing bitsandbytes (``import peft`` does) asks the model hub
for a compiled kernel through the ``kernels`` package. The backend imports bitsandbytes with
the hub offline first (``import_bitsandbytes``). Each check runs in a fresh interpreter whose
sockets record and refuse every name lookup and connection.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("bitsandbytes")
pytest.importorskip("peft")

ROOT = Path(__file__).resolve().parents[2]

WATCHED = r'''
import json, socket, sys
tried = []
def refuse(kind):
    def call(*args, **kwargs):
        tried.append([kind, repr(args[:2])[:200]])
        raise OSError("the network is closed in this test")
    return call
socket.getaddrinfo = refuse("getaddrinfo")
socket.socket.connect = refuse("connect")
socket.create_connection = refuse("create_connection")
if sys.argv[1] == "owrl":
    from owrl_openwebrl.backend import import_bitsandbytes
    import_bitsandbytes()
import peft  # imports bitsandbytes
print(json.dumps({"tried": tried, "bitsandbytes": "bitsandbytes" in sys.modules}))
'''


def watched(mode: str, env: dict[str, str] | None = None) -> tuple[dict, str]:
    full = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "OWRL_HUB_KERNELS")}
    full.update(env or {})
    done = subprocess.run([sys.executable, "-c", WATCHED, mode], capture_output=True, text=True, cwd=ROOT,
                          env=full, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def avx512_bf16() -> bool:
    try:
        return "avx512_bf16" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


def test_the_backend_imports_bitsandbytes_without_reaching_the_network():
    seen, stderr = watched("owrl")
    assert seen["bitsandbytes"] is True
    assert seen["tried"] == [], seen["tried"]
    assert "kernels-community" not in stderr  # the fallback is chosen, not reported as a failure


@pytest.mark.slow
@pytest.mark.skipif(not avx512_bf16(), reason="bitsandbytes asks the hub only on a CPU with AVX512-BF16")
def test_without_it_importing_peft_reaches_for_the_hub():
    """The control: the same import, not through the backend, tries the network on this CPU
    (so the test above would fail without import_bitsandbytes), and so does the opt-in."""
    seen, _ = watched("plain")
    assert seen["bitsandbytes"] is True and seen["tried"], "no network attempt: the control shows nothing"
    seen, _ = watched("owrl", env={"OWRL_HUB_KERNELS": "1"})
    assert seen["tried"], "OWRL_HUB_KERNELS=1 should leave bitsandbytes free to fetch"
