"""Loading a model through owrl fetches no code from the network.

On a CPU with AVX512-BF16, importing bitsandbytes asks the model hub for a compiled kernel
through the ``kernels`` package. Which package imports bitsandbytes, and when, changes from
release to release (peft imported it at its own import up to 0.21 and no longer does in 0.22;
a 4-bit load and a LoRA adapter on a 4-bit model import it too). owrl's guarantee does not
depend on that: a model load through owrl's backend (a 4-bit load, with a LoRA adapter, and
whatever the caller imports afterwards) makes no network attempt. The backend imports
bitsandbytes itself, with the hub offline, before anything else can
(``import_bitsandbytes``).

Each check runs in a fresh interpreter whose sockets record and refuse every name lookup and
connection. The control imports bitsandbytes itself, not through another package, so it
holds on any version of peft or transformers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

pytest.importorskip("bitsandbytes")
pytest.importorskip("peft")

ROOT = Path(__file__).resolve().parents[2]

WATCHED = r'''
import json, socket, sys, warnings
tried = []
def refuse(kind):
    def call(*args, **kwargs):
        tried.append([kind, repr(args[:2])[:200]])
        raise OSError("the network is closed in this test")
    return call
socket.getaddrinfo = refuse("getaddrinfo")
socket.socket.connect = refuse("connect")
socket.create_connection = refuse("create_connection")
mode = sys.argv[1]
if mode == "load":
    warnings.simplefilter("ignore")
    from owrl_openwebrl.backend import VLBackend
    backend = VLBackend(sys.argv[2], adapter=sys.argv[3], quantize="4bit", device="cpu")
    loaded = type(backend.model).__name__
    import peft, bitsandbytes, transformers  # whatever a caller imports afterwards
elif mode == "import":
    loaded = None
    import bitsandbytes
print(json.dumps({"tried": tried, "bitsandbytes": "bitsandbytes" in sys.modules, "loaded": loaded}))
'''


def watched(*args: str, env: dict[str, str] | None = None) -> tuple[dict, str]:
    full = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "OWRL_HUB_KERNELS")}
    full.update(env or {})
    done = subprocess.run([sys.executable, "-c", WATCHED, *args], capture_output=True, text=True, cwd=ROOT,
                          env=full, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def avx512_bf16() -> bool:
    try:
        return "avx512_bf16" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


@pytest.fixture(scope="module")
def checkpoint_and_adapter(tiny_checkpoints, tmp_path_factory):
    """The tiny Qwen3-VL checkpoint and a LoRA adapter saved for it (built in this process,
    whose own imports do not matter: every check runs in a fresh interpreter)."""
    from owrl_openwebrl.backend import import_bitsandbytes

    import_bitsandbytes()
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForImageTextToText

    base = tiny_checkpoints["qwen3-vl"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModelForImageTextToText.from_pretrained(base)
        lora = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    adapter = tmp_path_factory.mktemp("adapter")
    lora.save_pretrained(adapter)
    return str(base), str(adapter)


@pytest.mark.slow
def test_a_4bit_load_with_an_adapter_through_owrl_makes_no_network_attempt(checkpoint_and_adapter):
    seen, stderr = watched("load", *checkpoint_and_adapter)
    assert seen["loaded"] == "PeftModel" and seen["bitsandbytes"] is True
    assert seen["tried"] == [], seen["tried"]
    assert "kernels-community" not in stderr  # the fallback is chosen, not reported as a failure


@pytest.mark.slow
@pytest.mark.skipif(not avx512_bf16(), reason="bitsandbytes asks the hub only on a CPU with AVX512-BF16")
def test_without_owrl_importing_bitsandbytes_reaches_for_the_hub(checkpoint_and_adapter):
    """The control: bitsandbytes imported by itself tries the network on this CPU (so the
    test above would fail without import_bitsandbytes), and so does owrl's load with the opt-in."""
    seen, _ = watched("import")
    assert seen["bitsandbytes"] is True
    if not seen["tried"]:  # a bitsandbytes that no longer fetches: the guarantee holds without owrl's guard
        pytest.skip("importing this bitsandbytes tries no network on this CPU: the control has nothing to show")
    seen, _ = watched("load", *checkpoint_and_adapter, env={"OWRL_HUB_KERNELS": "1"})
    assert seen["tried"], "OWRL_HUB_KERNELS=1 should leave bitsandbytes free to fetch"
