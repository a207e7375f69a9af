"""MM-GRPO teaches the tiny model on the trivial environment, and resuming is exact.

The tiny model starts from an SFT warm start on all four buttons equally (chance: 25%
success), as OpenWebRL starts RL from SFT; GRPO must then raise the success rate well
above chance with a bounded number of seeded updates.
"""

from __future__ import annotations

import asyncio
import json
import warnings

import pytest

pytest.importorskip("peft")

from owrl_openwebrl.backend import Sampling  # noqa: E402
from owrl_openwebrl.prompt import build_prompt  # noqa: E402
from owrl_sdk.contract.plugins import Plugins  # noqa: E402
from owrl_sdk.contract.memory import Context  # noqa: E402
from owrl_train.data import Sample  # noqa: E402
from owrl_train.model import TrainableVL  # noqa: E402
from owrl_train.rl import RLConfig, RLRun  # noqa: E402
from owrl_train.sft import SFTConfig, train_sft  # noqa: E402

from owrl_train.toy import COLOURS, TASK, TOOLS, ButtonsEnv, InMemoryRollouts  # noqa: E402

SAMPLING = {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "max_new_tokens": 24}


def warm_start(ckpt, out):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = TrainableVL(str(ckpt), catalogue=Plugins().catalogue, lora_r=16, seed=0)
    ctx = Context(task=TASK, observation=asyncio.run(ButtonsEnv().observe()), tools=TOOLS)
    prompt = build_prompt(ctx, text_mode=True, tools_in_system=False)
    samples = [Sample(prompt=prompt, target=f'<tool_call>{{"name": "press_{c}", "arguments": {{}}}}</tool_call>')
               for c in COLOURS]
    train_sft(samples * 4, SFTConfig(model=str(ckpt), out=out, epochs=12, lr=1e-2, batch_size=4, grad_accum=1,
                                     save_every=10 ** 6), model=model)
    return model, prompt


def success_rate(model, prompt, n=48) -> float:
    import torch

    torch.manual_seed(123)
    gens = model.backend.generate([prompt] * n, Sampling(**SAMPLING))
    return sum('"press_green"' in g.text for g in gens) / n


def rl_config(ckpt, out, iterations):
    return RLConfig(model=str(ckpt), out=out, iterations=iterations, tasks_per_iteration=1, group_size=16, lr=2e-3,
                    minibatch=16, text_mode=True, curriculum=[{"max_steps": 1}], sampling=dict(SAMPLING),
                    sampler="uniform", seed=0,
                    # the toy learns at a fixed rate that its line search cuts to the region; the
                    # adaptive rate has its own test (test_rl_mechanisms) and is measured on MiniWoB++
                    adaptive_lr=False)


@pytest.mark.slow
def test_grpo_raises_success_well_above_chance(tiny_qwen3, tmp_path, plugins, settings):
    model, prompt = warm_start(tiny_qwen3, tmp_path / "sft")
    before = success_rate(model, prompt)
    assert 0.05 < before < 0.5  # near chance: all four buttons are valid answers
    run = RLRun(rl_config(tiny_qwen3, tmp_path / "rl", 12), InMemoryRollouts(plugins, settings),
                settings=settings, plugins=plugins, tasks=[TASK], model=model)
    results = asyncio.run(run.run())
    after = success_rate(model, prompt)
    print(f"success before {before:.2f}, after {after:.2f}; per iteration "
          f"{[round(r.metrics['success_rate'], 2) for r in results]}")
    assert after >= 0.5 and after > before + 0.25
    assert (tmp_path / "rl" / "metrics.jsonl").exists() and (tmp_path / "rl" / "tensorboard").is_dir()


@pytest.mark.slow
def test_resume_gives_the_same_next_loss(tiny_qwen3, tmp_path, plugins, settings):
    model, _ = warm_start(tiny_qwen3, tmp_path / "sft")
    sft_adapter = tmp_path / "sft" / "adapter"

    def fresh(out, iterations):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = TrainableVL(str(sft_adapter), catalogue=Plugins().catalogue, seed=0)
        return RLRun(rl_config(tiny_qwen3, out, iterations), InMemoryRollouts(plugins, settings),
                     settings=settings, plugins=plugins, tasks=[TASK], model=m)

    import torch

    torch.manual_seed(7)
    straight = asyncio.run(fresh(tmp_path / "a", 3).run())
    torch.manual_seed(7)
    asyncio.run(fresh(tmp_path / "b", 2).run())  # stops after 2 iterations ("the crash")
    # killed after iteration 1's checkpoint and before its metrics line: the line is lost
    metrics = tmp_path / "b" / "metrics.jsonl"
    lines = metrics.read_text().splitlines()
    metrics.write_text("\n".join(lines[:-1]) + "\n")
    resumed = fresh(tmp_path / "b", 3)
    assert resumed.start_iteration == 2
    again = asyncio.run(resumed.run())
    assert [r.iteration for r in again] == [2]
    # the lost line is written again from the checkpoint, once, in its place
    assert [json.loads(line)["step"] for line in metrics.read_text().splitlines()] == [0, 1, 2]
    assert json.loads(metrics.read_text().splitlines()[1]) | {"time": 0} == json.loads(lines[-1]) | {"time": 0}
    assert again[0].metrics["loss"] == pytest.approx(straight[2].metrics["loss"], rel=1e-5, abs=1e-7)
    assert again[0].metrics["success_rate"] == straight[2].metrics["success_rate"]


class _Exploit:
    """Unpickling this runs code: what a tampered checkpoint would carry."""

    def __reduce__(self):
        import pathlib

        return (pathlib.Path.touch, (pathlib.Path(_Exploit.canary),))


def test_a_checkpoint_that_would_run_code_on_load_is_refused_and_changes_nothing(tmp_path):
    import json

    import torch

    from owrl_train.checkpoints import load_checkpoint

    weight = torch.nn.Parameter(torch.zeros(3))
    optimizer = torch.optim.AdamW([weight], lr=1e-3)
    _Exploit.canary = str(tmp_path / "ran")
    folder = tmp_path / "checkpoints" / "000002"
    folder.mkdir(parents=True)
    torch.save({"optimizer": optimizer.state_dict(), "payload": _Exploit()}, folder / "trainer.pt")
    (folder / "state.json").write_text(json.dumps({"iteration": 2}))

    class Adapter:  # records whether anything was loaded into the model
        loaded = False

        def load_adapter_weights(self, path):
            Adapter.loaded = True

    with pytest.raises(ValueError, match="trainer.pt: not loaded: it holds more than tensors"):
        load_checkpoint(folder, Adapter(), optimizer)
    assert not (tmp_path / "ran").exists(), "the pickle ran"
    assert not Adapter.loaded


def test_the_sft_learning_rate_warms_up_then_holds_or_decays():
    from owrl_train.sft import SFTConfig, lr_factor

    assert [lr_factor(s, 10) for s in range(10)] == [1.0] * 10  # the default: constant, no warm-up
    up = [lr_factor(s, 10, "constant", 0.2) for s in range(10)]
    assert up[:3] == pytest.approx([1 / 3, 2 / 3, 1.0]) and up[2:] == [1.0] * 8
    linear = [lr_factor(s, 10, "linear", 0.2) for s in range(10)]
    assert linear[:2] == pytest.approx([1 / 3, 2 / 3]) and linear[2] == 1.0 and linear[-1] == 0.0
    assert linear[2:] == sorted(linear[2:], reverse=True)
    cosine = [lr_factor(s, 10, "cosine") for s in range(10)]
    assert cosine[0] == 1.0 and cosine[-1] == pytest.approx(0.0) and cosine[4] > linear[4 + 0] - 0.2
    assert lr_factor(0, 1, "linear", 0.0) == 1.0  # one step: the full rate
    with pytest.raises(ValueError, match="lr_scheduler must be"):
        SFTConfig(model="m", out=None, lr_scheduler="step")
    with pytest.raises(ValueError, match="warmup_ratio must be"):
        SFTConfig(model="m", out=None, warmup_ratio=1.5)
