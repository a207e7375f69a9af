"""The default policy's 4-bit path on a CUDA GPU, with the tiny real model the tests build.

    python bench/cuda_tiny_check.py [--steps 60] [--out DIR]

The ``openwebrl`` policy loads its model in 4-bit on a GPU (nf4, double quantisation, bfloat16
compute, the vision tower and the head kept whole), and ``owrl train --4bit`` trains a LoRA on
top of that (QLoRA). Neither runs on a CPU the way it runs on a GPU: bitsandbytes' CUDA kernels
are other code. This script runs both on ``cuda`` with the tiny Qwen3-VL checkpoint that
``owrl_openwebrl.tiny`` writes (random weights, real architecture; nothing is downloaded):

1. it loads the checkpoint in 4-bit and in bfloat16 through the policy's backend and counts
   the ``Linear4bit`` layers;
2. it generates greedily for a prompt with a screenshot, in both;
3. it scores the same answer with both (``token_logprobs``): the mean absolute difference of
   the log-probabilities is what 4-bit costs this model;
4. it trains a LoRA on the 4-bit model (``TrainableVL(four_bit=True)``, the SFT loss, AdamW)
   for ``--steps`` steps on one screenshot sample and reports the loss before and after;
5. it saves the adapter, loads it back through the policy's backend in 4-bit and checks that
   the greedy answer is the trained one.

It prints one line per check and then the figures: peak GPU memory per stage, load seconds,
generation and training step times. It exits 1 when a check fails; without CUDA it says so
and exits 1 at once.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

GIB = 2 ** 30
TARGET = '<tool_call>{"name": "click", "arguments": {"ref": "e7"}}</tool_call>'


def screenshot_prompt() -> Any:
    """A prompt as the policy builds it: the task, the page's tree and its screenshot."""
    import io

    from PIL import Image, ImageDraw

    from owrl_openwebrl.prompt import build_prompt
    from owrl_sdk.contract.memory import Context
    from owrl_sdk.contract.plugins import Plugins
    from owrl_sdk.types import Observation, Task

    image = Image.new("RGB", (320, 240), "white")
    ImageDraw.Draw(image).rectangle((100, 100, 220, 140), fill="green")
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    obs = Observation(url="http://127.0.0.1/page", title="Buttons", screenshot=buf.getvalue(),
                      aria='- button "red" [ref=e3]\n- button "green" [ref=e7]')
    tools = list(Plugins().catalogue.items["tools"].values())
    ctx = Context(task=Task(id="t", intent="Press the green button", start_url="http://127.0.0.1/page"),
                  observation=obs, tools=tools)
    return build_prompt(ctx)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--steps", type=int, default=60, help="QLoRA optimizer steps (default 60)")
    ap.add_argument("--out", default="runs/cuda-tiny-check", help="output folder (results.json, the adapter)")
    ap.add_argument("--device", default="cuda", help="cpu: a dry run of the script's logic (bitsandbytes' CPU "
                                                     "path, no GPU figures)")
    args = ap.parse_args()
    import torch

    gpu = args.device.startswith("cuda")
    if gpu and not torch.cuda.is_available():
        print("cuda_tiny_check: no CUDA device; run it on a machine with a GPU", file=sys.stderr)
        return 1
    from owrl_openwebrl.backend import Sampling, import_bitsandbytes

    import_bitsandbytes()  # with the hub offline, as every model load does
    import bitsandbytes as bnb
    import peft
    import transformers

    from owrl_openwebrl.tiny import build_tiny_vl
    from owrl_sdk.contract.plugins import Plugins
    from owrl_train import peer_policy
    from owrl_train.data import Sample
    from owrl_train.model import TrainableVL
    from owrl_train.sft import sft_loss

    warnings.simplefilter("ignore")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"gpu": torch.cuda.get_device_name(0) if gpu else "none (cpu)", "torch": torch.__version__,
                               "transformers": transformers.__version__, "peft": peft.__version__,
                               "bitsandbytes": bnb.__version__, "checks": {}, "figures": {}}
    checks, figures = results["checks"], results["figures"]
    print(f"{results['gpu']} · torch {torch.__version__} · transformers {transformers.__version__} · "
          f"peft {peft.__version__} · bitsandbytes {bnb.__version__}", flush=True)

    class memory:  # the GPU's figures, or nothing on a dry run
        reset = staticmethod(torch.cuda.reset_peak_memory_stats if gpu else lambda: None)
        sync = staticmethod(torch.cuda.synchronize if gpu else lambda: None)
        empty = staticmethod(torch.cuda.empty_cache if gpu else lambda: None)
        peak = staticmethod((lambda: round(torch.cuda.max_memory_allocated() / GIB, 3)) if gpu else (lambda: None))

    def check(name: str, ok: bool, detail: str) -> None:
        checks[name] = {"ok": bool(ok), "detail": detail}
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)

    ckpt = build_tiny_vl(out / "tiny-qwen3-vl", "qwen3-vl")
    catalogue = Plugins().catalogue
    Backend = peer_policy(catalogue=catalogue).backend_class  # the openwebrl policy's model loader
    prompt = screenshot_prompt()
    greedy = Sampling(temperature=0.0, max_new_tokens=24)

    # 1-2: load in 4-bit and in bfloat16, generate greedily with each
    loaded: dict[str, Any] = {}
    for quant in ("4bit", "none"):
        memory.reset()
        t = time.perf_counter()
        backend = Backend(str(ckpt), quantize=quant, device=args.device)
        figures[f"load_s_{quant}"] = round(time.perf_counter() - t, 2)
        figures[f"peak_gib_load_{quant}"] = memory.peak()
        figures[f"reserved_gib_after_load_{quant}"] = (round(torch.cuda.memory_reserved() / GIB, 3) if gpu else None)
        memory.reset()
        gen = backend.generate([prompt], greedy)[0]
        times = []
        for _ in range(5):
            t = time.perf_counter()
            backend.generate([prompt] * 8, greedy)
            memory.sync()
            times.append(time.perf_counter() - t)
        figures[f"generate_8_prompts_s_{quant}"] = round(statistics.median(times), 3)
        figures[f"peak_gib_generate_{quant}"] = memory.peak()
        loaded[quant] = backend
        if quant == "4bit":
            n4 = sum(isinstance(m, bnb.nn.Linear4bit) for m in backend.model.modules())
            kept = [n for n, m in backend.model.named_modules()
                    if isinstance(m, torch.nn.Linear) and not isinstance(m, bnb.nn.Linear4bit)]
            only_skipped = all("visual" in n or "lm_head" in n for n in kept)
            check("4-bit layers", n4 > 0 and only_skipped,
                  f"{n4} Linear4bit; kept whole: {len(kept)} (vision tower and head only: {only_skipped})")
        check(f"generation {quant}", isinstance(gen.text, str) and gen.completion_tokens > 0,
              f"{gen.completion_tokens} tokens in {gen.seconds:.2f} s")

    # 3: what 4-bit costs: the same answer scored by both
    scores = {}
    for quant, backend in loaded.items():
        model = TrainableVL.__new__(TrainableVL)  # score with the loaded backend, no LoRA
        model.backend, model.model, model.tokenizer = backend, backend.model, backend.tokenizer
        with torch.no_grad():
            logp, mask, _ = model.token_logprobs(model.encode([Sample(prompt=prompt, target=TARGET)]))
        scores[quant] = logp[mask.bool()].float().cpu()
    diff = (scores["4bit"] - scores["none"]).abs()
    figures["logprob_abs_diff_mean_4bit_vs_bf16"] = round(float(diff.mean()), 4)
    figures["logprob_abs_diff_max_4bit_vs_bf16"] = round(float(diff.max()), 4)
    check("4-bit scores near bf16", bool(torch.isfinite(diff).all()) and float(diff.mean()) < 1.0,
          f"mean |Δ log p| {float(diff.mean()):.4f}, max {float(diff.max()):.4f} over {diff.numel()} tokens")
    del loaded, scores
    memory.empty()

    # 4: QLoRA on the 4-bit model
    memory.reset()
    model = TrainableVL(str(ckpt), four_bit=True, device=args.device, lora_r=8, seed=0, catalogue=catalogue)
    params = model.trainable_parameters()
    opt = torch.optim.AdamW(params, lr=5e-3)
    sample = Sample(prompt=prompt, target=TARGET)
    losses, step_times = [], []
    for _ in range(args.steps):
        t = time.perf_counter()
        loss, _ = sft_loss(model, [sample] * 4)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        memory.sync()
        step_times.append(time.perf_counter() - t)
        losses.append(float(loss.detach()))
    figures["qlora_step_s_median"] = round(statistics.median(step_times[1:] or step_times), 4)
    figures["qlora_loss_first_last"] = [round(losses[0], 4), round(losses[-1], 4)]
    figures["peak_gib_qlora"] = memory.peak()
    grads_4bit = all(not p.requires_grad for n, p in model.model.named_parameters() if "lora_" not in n)
    check("QLoRA trains", losses[-1] < 0.5 * losses[0] and grads_4bit,
          f"loss {losses[0]:.3f} -> {losses[-1]:.3f} in {args.steps} steps; only LoRA weights trainable: {grads_4bit}")

    # 5: the adapter, saved and loaded back by the policy's backend in 4-bit
    model.save_adapter(out / "adapter")
    del model, opt, params
    memory.empty()
    served = Backend(str(out / "adapter"), quantize="4bit", device=args.device)
    answer = served.generate([prompt], greedy)[0].text
    check("adapter reloads in 4-bit", '"e7"' in answer and '"click"' in answer, f"greedy answer {answer[:90]!r}")

    (out / "results.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(figures, indent=2), flush=True)
    failed = [n for n, c in checks.items() if not c["ok"]]
    print(f"{len(checks) - len(failed)}/{len(checks)} checks passed" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
