"""The trainer's choices measured where they can be, in seconds a run: a three-turn toy.

    .venv/bin/python bench/bench_rl_toy.py                 # 3 seeds x the arms below (minutes)
    .venv/bin/python bench/bench_rl_toy.py --seeds 0,1 --iterations 6

Four buttons in memory (owrl_train.toy), with one change: a wrong press does not end the
episode ("nothing happened"), so an episode lasts up to three turns. A failure is then
three turns and a success one to three: the ground of the "learn to fail fast" trap, where
weighing every turn alike lets long failures outweigh short successes. The tiny Qwen3-VL
starts from an SFT warm start on all four buttons alike (chance: 25% a turn).

Arms (each on the same warm start and seeds):
- ``old``: the settings before the anchor: token-mean, no KL, no target_kl, a step per
  minibatch in trajectory order;
- ``new``: the defaults (episode-mean, KL 0.05 to the warm start, target_kl 0.01, two
  shuffled accumulated steps, dual clip);
- ``new-kl0``: the defaults without the KL term;
- ``new-token-mean``: the defaults with token-mean weighting.

It prints per arm and seed the greedy success of the first turn before and after, the
sampled success of the last iteration, the KL to the warm start and the update steps
taken, then the mean and spread per arm.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

ARMS: dict[str, dict[str, Any]] = {
    "old": dict(loss_type="token-mean", kl_coef=0.0, target_kl=0.0, optimizer_steps=0, shuffle=False,
                dual_clip=0.0, unreadable="episode", truncated="train", practice_share=0.0),
    "new": dict(),
    "new-kl0": dict(kl_coef=0.0),
    "new-token-mean": dict(loss_type="token-mean"),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--iterations", type=int, default=8)
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import torch

    from owrl_openwebrl.backend import Sampling
    from owrl_openwebrl.prompt import build_prompt
    from owrl_openwebrl.tiny import build_tiny_vl
    from owrl_sdk.config import Settings
    from owrl_sdk.contract.memory import Context
    from owrl_sdk.contract.plugins import Plugins
    from owrl_train.data import Sample
    from owrl_train.model import TrainableVL
    from owrl_train.rl import RLConfig, RLRun
    from owrl_train.sft import SFTConfig, train_sft
    from owrl_train import toy

    torch.set_num_threads(args.threads)

    three_turn_tools = [toy.press_tool(c, only_right_ends=True) for c in toy.COLOURS]
    tools = three_turn_tools

    class ThreeTurns(toy.InMemoryRollouts):
        tools = three_turn_tools

        async def collect(self, policy, items, max_steps, out):
            real = toy.TOOLS
            toy.TOOLS = tools  # the toy's loop offers these tools
            try:
                return await super().collect(policy, items, max_steps, out)
            finally:
                toy.TOOLS = real

    settings, plugins = Settings(), Plugins()
    sampling = {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "max_new_tokens": 24}
    seeds = [int(s) for s in args.seeds.split(",") if s]
    arms = [a for a in args.arms.split(",") if a]
    rows: dict[str, list[dict[str, float]]] = {a: [] for a in arms}
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        ckpt = build_tiny_vl(root / "tiny")
        prompt = build_prompt(Context(task=toy.TASK, observation=asyncio.run(toy.ButtonsEnv().observe()), tools=tools),
                              text_mode=True, tools_in_system=False)
        samples = [Sample(prompt=prompt, target=f'<tool_call>{{"name": "press_{c}", "arguments": {{}}}}</tool_call>')
                   for c in toy.COLOURS] * 4
        warm = root / "warm"
        model = TrainableVL(str(ckpt), catalogue=plugins.catalogue, lora_r=16, seed=0)
        train_sft(samples, SFTConfig(model=str(ckpt), out=warm, epochs=12, lr=1e-2, batch_size=4, grad_accum=1,
                                     save_every=10 ** 6), model=model)

        def first_turn_success(m: Any) -> float:
            torch.manual_seed(123)
            gens = m.backend.generate([prompt] * 48, Sampling(**sampling))
            return sum('"press_green"' in g.text for g in gens) / 48

        print(f"{'arm':<16}{'seed':>5}{'before':>8}{'after':>7}{'last it':>9}{'kl ref':>8}{'steps':>7}{'s':>6}")
        for arm in arms:
            for seed in seeds:
                m = TrainableVL(str(warm / "adapter"), catalogue=plugins.catalogue, seed=seed)
                before = first_turn_success(m)
                cfg = RLConfig(model=str(ckpt), out=root / f"{arm}-{seed}", iterations=args.iterations,
                               tasks_per_iteration=1, group_size=8, lr=args.lr, minibatch=8, text_mode=True,
                               curriculum=[{"max_steps": 3}], sampling=dict(sampling), sampler="uniform", seed=seed,
                               **{**dict(practice_share=0.0), **ARMS[arm]})
                t = time.perf_counter()
                torch.manual_seed(seed)
                run = RLRun(cfg, ThreeTurns(plugins, settings), settings=settings, plugins=plugins,
                            tasks=[toy.TASK], model=m)
                results = asyncio.run(run.run())
                after = first_turn_success(m)
                last = results[-1].metrics
                row = {"before": before, "after": after, "last": last["success_rate"], "kl": last.get("kl", 0.0),
                       "steps": sum(r.metrics.get("optimizer_steps", 0.0) for r in results),
                       "seconds": time.perf_counter() - t}
                rows[arm].append(row)
                print(f"{arm:<16}{seed:>5}{before:>8.0%}{after:>7.0%}{row['last']:>9.0%}{row['kl']:>8.3f}"
                      f"{row['steps']:>7.0f}{row['seconds']:>6.0f}", flush=True)
    print("\nper arm: greedy-free first-turn success after RL (sampled, 48 draws), mean [min, max] over seeds")
    for arm, rs in rows.items():
        after = [r["after"] for r in rs]
        gain = [r["after"] - r["before"] for r in rs]
        print(f"  {arm:<16} after {statistics.mean(after):.0%} [{min(after):.0%}, {max(after):.0%}]  "
              f"gain {statistics.mean(gain):+.0%} [{min(gain):+.0%}, {max(gain):+.0%}]  "
              f"kl {statistics.mean(r['kl'] for r in rs):.3f}")
    print(f"reproduce: .venv/bin/python bench/bench_rl_toy.py --seeds {args.seeds} --iterations {args.iterations} "
          f"--arms {args.arms} --lr {args.lr}")


if __name__ == "__main__":
    main()
