"""Evaluation throughput: MiniWoB++ episodes per minute with the oracle, W = 1, 2, 4.

    .venv/bin/python bench/bench_eval.py [--episodes 10]

For each W it runs click-button, click-link and enter-text (``--episodes`` each) through
``owrl_sdk.scheduling.evaluation`` twice: W contexts in one shared Chromium, and one Chromium per
worker; it prints episodes per minute and the success rate of each. Reset and step time
side by side with raw Playwright are printed by bench/bench_browser.py.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

TASKS = ("click-button", "click-link", "enter-text")


async def one(workers: int, per_worker: bool, episodes: int) -> tuple[float, float]:
    from owrl_sdk.config import Settings
    from owrl_sdk.scheduling.evaluation import EvalPlan, Evaluation
    from owrl_sdk.contract.plugins import Plugins

    settings = Settings(policy="oracle")
    plugins = Plugins()
    suite = plugins.catalogue.get("task_suites", "miniwob")(settings)
    tasks = [t for t in suite.tasks() if t.id in TASKS]
    with tempfile.TemporaryDirectory() as d:
        plan = EvalPlan(suite=suite, tasks=tasks, episodes=episodes, workers=workers, policy="oracle",
                        out=Path(d), browser_per_worker=per_worker)
        started = time.perf_counter()
        summary = await Evaluation(plan, settings, plugins).run()
        seconds = time.perf_counter() - started
    return summary["episodes"] / seconds * 60, summary["success_rate"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=10)
    args = ap.parse_args()
    print(f"MiniWoB++ {', '.join(TASKS)} x {args.episodes} episodes, oracle policy")
    print(f"{'W':>2} {'browsers':>12} {'episodes/min':>13} {'success':>8}")
    for w in (1, 2, 4):
        for per_worker in (False, True):
            if w == 1 and per_worker:
                continue
            rate, success = asyncio.run(one(w, per_worker, args.episodes))
            label = "per worker" if per_worker else "shared"
            print(f"{w:>2} {label:>12} {rate:>13.1f} {success:>8.0%}", flush=True)
    print("reproduce: .venv/bin/python bench/bench_eval.py --episodes", args.episodes)


if __name__ == "__main__":
    main()
