"""The real loading and generation code on tiny checkpoints the session builds."""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest

from builtin_tools.control import Done, Wait
from owrl_openwebrl.backend import Sampling, VLBackend, WeightsUnavailable
from owrl_openwebrl.prompt import build_prompt
from owrl_sdk.contract.memory import Context
from owrl_sdk.types import Observation, Task


def ctx(jpeg):
    return Context(task=Task(intent="Buy a red hat", start_url="http://127.0.0.1:1/"),
                   observation=Observation(url="http://127.0.0.1:1/", title="Shop"), tools=[Done(), Wait()],
                   screenshots=[jpeg])


@pytest.mark.parametrize("family", ["qwen3-vl", "qwen2-vl"])
def test_load_and_batched_generation(tiny_checkpoints, jpeg, family):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        backend = VLBackend(str(tiny_checkpoints[family]))
    prompt = build_prompt(ctx(jpeg), tools_in_system=False)
    text = backend.render(prompt)
    assert "<tools>" in text and text.count("<|image_pad|>") == 1 and text.endswith("<|im_start|>assistant\n")
    a, b = backend.generate([prompt, prompt], Sampling(max_new_tokens=12, seed=1))
    assert a.image_tokens > 0 and a.image_tokens == b.image_tokens
    assert 0 < a.completion_tokens <= 12 and a.prompt_tokens > a.image_tokens
    # sampling is seeded: the same seed gives the same text
    again = backend.generate([prompt], Sampling(max_new_tokens=12, seed=1))[0]
    assert again.text == backend.generate([prompt], Sampling(max_new_tokens=12, seed=1))[0].text


async def test_policy_turns_random_output_into_parse_errors(tiny_backend, settings, jpeg):
    from owrl_openwebrl.policy import OpenWebRLPolicy

    policy = OpenWebRLPolicy(settings, backend=tiny_backend, max_new_tokens=16, seed=0)
    assert policy.profile.name == "owrl"  # a tiny checkpoint is no OpenWebRL model
    turn = await policy.act(ctx(jpeg))
    # random weights emit gibberish: the policy must report it, never raise (the owrl profile
    # reads a cut answer too: it is not a truncated turn there)
    assert turn.parse_error and not turn.calls and not turn.truncated
    assert turn.usage["completion_tokens"] > 0 and turn.usage["image_tokens"] > 0


def test_four_bit_loads_on_cpu(tiny_checkpoints, jpeg):
    pytest.importorskip("bitsandbytes")
    import bitsandbytes as bnb

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        backend = VLBackend(str(tiny_checkpoints["qwen3-vl"]), quantize="4bit", device="cpu")
    layers = backend.model.model.language_model.layers
    assert isinstance(layers[0].self_attn.q_proj, bnb.nn.Linear4bit)
    assert not isinstance(backend.model.lm_head, bnb.nn.Linear4bit)  # kept in full precision
    out = backend.generate([build_prompt(ctx(jpeg), tools_in_system=False)], Sampling(max_new_tokens=4, seed=0))[0]
    assert out.completion_tokens > 0


def test_a_gpu_4bit_load_asks_for_the_modules_left_whole_in_bfloat16(tiny_checkpoints, monkeypatch):
    """On a GPU, the modules a 4-bit load leaves whole (embeddings, norms, the vision tower, the
    head) come in the compute dtype, bfloat16. Without a dtype they came in float32: on an H200,
    bench/cuda_tiny_check.py measured the tiny model's generation peak at 26.4 GiB for 8 prompts
    (0.16 GiB with bfloat16) and its QLoRA steps at 29.1 GiB (0.45). No GPU runs here, so the
    test reads what the backend asks transformers for, as a GPU load would."""
    import json

    import torch
    import transformers

    checkpoint = tiny_checkpoints["qwen3-vl"]
    arch = json.loads((checkpoint / "config.json").read_text())["architectures"][0]
    asked: dict = {}

    class Asked(Exception):
        pass

    def from_pretrained(path, **kwargs):
        asked.update(kwargs)
        raise Asked

    monkeypatch.setattr(getattr(transformers, arch), "from_pretrained", from_pretrained)
    with pytest.raises(Asked):
        VLBackend(str(checkpoint), quantize="4bit", device="cuda")
    assert asked["quantization_config"].bnb_4bit_compute_dtype is torch.bfloat16
    assert asked["dtype"] is torch.bfloat16 and asked["device_map"] == {"": 0}
    asked.clear()
    with pytest.raises(Asked):
        VLBackend(str(checkpoint), quantize="4bit", device="cuda", dtype="float16")  # a dtype given wins
    assert asked["dtype"] is torch.float16


def test_missing_weights_say_what_to_do(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(WeightsUnavailable, match="Pass --model PATH .* --policy openai"):
        VLBackend("OpenWebRL/OpenWebRL-4B")


def test_owrl_run_without_weights_exits_2_with_one_line(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HF_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "owrl_sdk", "run", "--task", "x", "--url", "http://127.0.0.1:9/"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert out.returncode == 2
    lines = [line for line in out.stderr.strip().splitlines() if line.strip()]
    assert lines[-1].startswith("Error: cannot load model 'OpenWebRL/OpenWebRL-4B'") and "--model PATH" in lines[-1]
    assert "Traceback" not in out.stderr
