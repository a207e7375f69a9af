"""Training cost on the CPU with a tiny Qwen3-VL: per-iteration time split and update speed.

    .venv/bin/python bench/bench_train.py [--iterations 4]

Runs MM-GRPO on the toy four-button environment (owrl_train.toy) after a short SFT warm
start, and prints per iteration: rollout, judging and update seconds, update tokens per
second, and the success rate. Then one iteration on the demo shop in a real Chromium
(rollouts through the evaluation machinery) for the rollout cost of real pages.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import warnings
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=4)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    from owrl_openwebrl.prompt import build_prompt
    from owrl_openwebrl.tiny import build_tiny_vl
    from owrl_sdk.config import Settings
    from owrl_sdk.contract.memory import Context
    from owrl_sdk.contract.plugins import Plugins
    from owrl_train.data import Sample
    from owrl_train.model import TrainableVL
    from owrl_train.rl import BrowserRollouts, RLConfig, RLRun
    from owrl_train.sft import SFTConfig, train_sft
    from owrl_train.toy import COLOURS, TASK, TOOLS, ButtonsEnv, InMemoryRollouts

    settings, plugins = Settings(), Plugins()
    sampling = {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "max_new_tokens": 24}
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        ckpt = build_tiny_vl(d / "tiny")
        model = TrainableVL(str(ckpt), catalogue=plugins.catalogue, lora_r=16)
        prompt = build_prompt(Context(task=TASK, observation=asyncio.run(ButtonsEnv().observe()), tools=TOOLS),
                              text_mode=True, tools_in_system=False)
        samples = [Sample(prompt=prompt, target=f'<tool_call>{{"name": "press_{c}", "arguments": {{}}}}</tool_call>')
                   for c in COLOURS] * 4
        t = time.perf_counter()
        train_sft(samples, SFTConfig(model=str(ckpt), out=d / "sft", epochs=12, lr=1e-2, batch_size=4, grad_accum=1,
                                     save_every=10 ** 6), model=model)
        print(f"SFT warm start: 48 steps of 4 samples in {time.perf_counter() - t:.1f} s")
        cfg = RLConfig(model=str(ckpt), out=d / "rl", iterations=args.iterations, tasks_per_iteration=1,
                       group_size=16, lr=2e-3, minibatch=16, text_mode=True, curriculum=[{"max_steps": 1}],
                       sampling=dict(sampling), sampler="uniform")
        run = RLRun(cfg, InMemoryRollouts(plugins, settings), settings=settings, plugins=plugins, tasks=[TASK],
                    model=model)
        print("toy env, G=16:   rollout  judge  update  target tok/s  all tok/s  success")
        for r in asyncio.run(run.run()):
            m = r.metrics
            print(f"  iteration {r.iteration + 1:>2}  {m['time_rollout_s']:6.2f}s {m['time_judge_s']:5.2f}s "
                  f"{m['time_update_s']:6.2f}s {m.get('update_tokens_per_s', 0):12.0f} {m.get('update_all_tokens_per_s', 0):10.0f}"
                  f"  {m['success_rate']:6.0%}")
        suite = plugins.catalogue.get("task_suites", "demo-shop")(settings)
        cfg2 = RLConfig(model=str(ckpt), out=d / "rl-shop", iterations=1, tasks_per_iteration=1, group_size=4,
                        workers=2, tasks=["shop-027"], curriculum=[{"max_steps": 3}],
                        sampling={**sampling, "max_new_tokens": 48})
        rollouts = BrowserRollouts(suite, settings, plugins, workers=2)
        shop = RLRun(cfg2, rollouts, settings=settings, plugins=plugins, model=model)

        async def go():
            try:
                return await shop.run()
            finally:
                await rollouts.close()

        m = asyncio.run(go())[0].metrics
        print(f"demo shop, G=4, 3 steps, 2 workers: rollout {m['time_rollout_s']:.2f}s judge {m['time_judge_s']:.2f}s "
              f"update {m['time_update_s']:.2f}s (mean steps {m['mean_steps']:.1f})")
    print("reproduce: .venv/bin/python bench/bench_train.py --iterations", args.iterations)


if __name__ == "__main__":
    main()
