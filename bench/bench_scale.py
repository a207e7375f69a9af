"""Ray backend vs local backend: MiniWoB++ episodes per minute at the same worker count.

    .venv/bin/python bench/bench_scale.py [--episodes 4] [--workers 2] [--json OUT.json]

Runs the oracle policy on the six MiniWoB++ families it solves (real task pages from the
``miniwob`` package in a real Chromium), first with the local backend (W contexts of one
browser), then with the Ray backend (W actors, one browser each, on a local Ray started for
the run). For each it prints the wall time, the start-up time (until the first episode
ended), episodes per minute over the whole run and in steady state (first to last finished
episode), the success rate and the per-step cost that docs/scaling.md builds on.
Then it prints the projection of docs/scaling.md from the measured per-step cost: episodes
per hour and cost for B browsers and G GPUs (``--browsers``, ``--gpus``; the model's time
per step and the hourly prices are inputs, since this machine has no GPU to measure them).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

FAMILIES = ["click-button", "click-link", "enter-text", "focus-text", "click-dialog", "enter-password"]


def run_backend(backend: str, episodes: int, workers: int, out: Path) -> dict:
    from owrl_sdk.config import load_settings
    from owrl_sdk.scheduling.evaluation import EvalPlan, Evaluation
    from owrl_sdk.contract.plugins import Plugins

    settings = load_settings({"policy": "oracle"})
    plugins = Plugins()
    suite = plugins.catalogue.get("task_suites", "miniwob")(settings)
    tasks = [t for t in suite.tasks() if t.id in FAMILIES]
    plan = EvalPlan(suite=suite, tasks=tasks, episodes=episodes, workers=workers, policy="oracle", out=out,
                    record_blocklist=False)
    finished: list[float] = []
    records = []

    def on_record(record) -> None:
        finished.append(time.perf_counter())
        records.append(record)

    if backend == "ray":
        from owrl_sdk.scheduling.raybackend import RayEvaluation, RayOptions

        evaluation = RayEvaluation(plan, settings, plugins, on_record=on_record, options=RayOptions())
    else:
        evaluation = Evaluation(plan, settings, plugins, on_record=on_record)
    started = time.perf_counter()
    summary = asyncio.run(evaluation.run())
    wall = time.perf_counter() - started
    n = len(records)
    steady = (n - 1) / (finished[-1] - finished[0]) * 60 if n > 1 and finished[-1] > finished[0] else 0.0
    steps = sum(r.steps for r in records)
    return {
        "backend": backend, "workers": workers, "episodes": n, "wall_s": wall,
        "startup_s": finished[0] - started if finished else wall,
        "episodes_per_min": n / wall * 60, "steady_episodes_per_min": steady,
        "success_rate": summary["success_rate"], "infra_errors": summary["infra_errors"],
        "mean_episode_s": statistics.mean(r.seconds for r in records) if records else 0.0,
        "steps": steps, "episode_s_per_step": sum(r.seconds for r in records) / steps if steps else 0.0,
        "steps_per_episode": steps / n if n else 0.0,
    }


def projection(per_step_s: float, steps_per_episode: float, args: argparse.Namespace) -> dict:
    """Episodes per hour for B browsers and G GPUs: the slower of the two sides sets the pace."""
    browser_steps_per_h = args.browsers * 3600 / per_step_s
    gpu_steps_per_h = args.gpus * args.gpu_streams * 3600 / args.gpu_step_s
    steps_per_h = min(browser_steps_per_h, gpu_steps_per_h)
    episodes_per_h = steps_per_h / args.task_steps
    cost_per_h = args.browsers * args.cpus_per_browser * args.cpu_hour + args.gpus * args.gpu_hour
    return {
        "browser_steps_per_hour": browser_steps_per_h, "gpu_steps_per_hour": gpu_steps_per_h,
        "bound_by": "browsers" if browser_steps_per_h < gpu_steps_per_h else "gpus",
        "episodes_per_hour": episodes_per_h, "cost_per_hour": cost_per_h,
        "cost_per_1000_episodes": cost_per_h / episodes_per_h * 1000 if episodes_per_h else float("inf"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=4, help="episodes per family (6 families)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    g = ap.add_argument_group("projection inputs (docs/scaling.md)")
    g.add_argument("--browsers", type=int, default=100)
    g.add_argument("--gpus", type=int, default=8)
    g.add_argument("--cpus-per-browser", type=float, default=1.0, help="1 as OpenWebRL's release ran them; 4 for roomy pods")
    g.add_argument("--task-steps", type=float, default=15.0, help="steps per real web episode (the RL curriculum's first cap)")
    g.add_argument("--gpu-step-s", type=float, default=1.0, help="seconds of model time per step per stream (an input: not measured here)")
    g.add_argument("--gpu-streams", type=int, default=16, help="concurrent sequences one GPU's server batches")
    g.add_argument("--cpu-hour", type=float, default=0.04, help="price of one CPU-hour (an input)")
    g.add_argument("--gpu-hour", type=float, default=2.5, help="price of one GPU-hour (an input)")
    args = ap.parse_args()

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for backend in ("local", "ray"):
            out = Path(tmp) / backend
            shutil.rmtree(out, ignore_errors=True)
            rows.append(run_backend(backend, args.episodes, args.workers, out))
    print(f"MiniWoB++ oracle, {len(FAMILIES)} families x {args.episodes} episodes, {args.workers} workers")
    print(f"{'backend':8} {'episodes':>8} {'wall s':>8} {'start s':>8} {'ep/min':>8} {'steady':>8} "
          f"{'success':>8} {'infra':>6} {'s/step':>8}")
    for r in rows:
        print(f"{r['backend']:8} {r['episodes']:8d} {r['wall_s']:8.1f} {r['startup_s']:8.1f} "
              f"{r['episodes_per_min']:8.1f} {r['steady_episodes_per_min']:8.1f} {r['success_rate']:8.0%} "
              f"{r['infra_errors']:6d} {r['episode_s_per_step']:8.3f}")
    local, ray_ = rows
    if local["steady_episodes_per_min"]:
        print(f"ray / local, steady state: {ray_['steady_episodes_per_min'] / local['steady_episodes_per_min']:.2f}; "
              f"whole run: {ray_['episodes_per_min'] / local['episodes_per_min']:.2f}")
    # one browser's cost per step: a worker's episode time over its steps, on this machine's cores
    per_step = local["episode_s_per_step"]
    proj = projection(per_step, local["steps_per_episode"], args)
    print(f"projection: {args.browsers} browsers, {args.gpus} GPUs, {args.task_steps:.0f} steps/episode, "
          f"{per_step:.3f} s/browser-step (measured), {args.gpu_step_s} s/model-step x {args.gpu_streams} streams/GPU "
          f"(input)")
    print(f"  browser side {proj['browser_steps_per_hour']:,.0f} steps/h · GPU side {proj['gpu_steps_per_hour']:,.0f} "
          f"steps/h · bound by {proj['bound_by']}")
    print(f"  {proj['episodes_per_hour']:,.0f} episodes/h · ${proj['cost_per_hour']:.2f}/h · "
          f"${proj['cost_per_1000_episodes']:.2f} per 1000 episodes")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "projection": proj, "inputs": vars(args)}, indent=2, default=str))


if __name__ == "__main__":
    main()
