"""GPU check of the released OpenWebRL models on the demo shop (needs a CUDA GPU).

    .venv/bin/owrl model fetch openwebrl            # once: OpenWebRL-4B and its interface files
    .venv/bin/owrl model fetch openwebrl-judge      # once; optional (no judging without it)
    .venv/bin/python bench/gpu_check.py [--model PATH] [--judge PATH] [--out DIR]

It loads OpenWebRL-4B in 4-bit (the ``openwebrl`` policy, ``quantize = "4bit"``, profile
``openwebrl``), plays three demo-shop tasks (shop-002, shop-003, shop-004: read a price,
count reviews behind a pop-up, count a category) in a local headless Chromium against the
demo shop served on 127.0.0.1, then has OpenWebRL-Judge-8B (the ``openwebrl-judge`` judge,
profile ``openwebrl``) judge the three trajectories.

It prints one line per task (outcome, steps, whether the answer matches, judge label) and
then: the peak GPU memory (``torch.cuda.max_memory_allocated``, GiB) after the policy and
after the judge, the policy's latency per step (mean and max, seconds) and its generated
tokens per second (all completion tokens / all generation seconds). The same numbers, with
the interface warnings and the run folders, go to OUT/results.json.
Without CUDA it stops at once with one line on stderr (exit code 1).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Optional

TASKS = ("shop-002", "shop-003", "shop-004")
GIB = 2 ** 30


def step_seconds(step: Any) -> Optional[float]:
    """The policy's time for one step: its own measure, else the loop's."""
    usage = step.turn.usage or {}
    if usage.get("seconds") is not None:
        return float(usage["seconds"])
    if step.timings.get("policy_ms") is not None:
        return step.timings["policy_ms"] / 1000
    return None


def judge_label(judgement: Any) -> str:
    if judgement is None:
        return "not judged"
    return {True: "success", False: "failure"}.get(judgement.success, "unreadable")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--model", help="local OpenWebRL-4B checkpoint (default: `owrl model fetch openwebrl`'s weights)")
    ap.add_argument("--judge", help="local OpenWebRL-Judge-8B checkpoint (default: `owrl model fetch "
                                    "openwebrl-judge`'s weights; without one the trajectories are not judged)")
    ap.add_argument("--out", default="runs/gpu-check", help="output folder (default: runs/gpu-check)")
    ap.add_argument("--max-steps", type=int, default=12, help="steps per episode (default 12)")
    args = ap.parse_args()

    try:
        import torch
    except ImportError:
        sys.exit("gpu_check needs torch with CUDA: torch is not installed")
    if not torch.cuda.is_available():
        sys.exit("gpu_check needs a CUDA GPU: torch.cuda.is_available() is False on this machine")

    from owrl_openwebrl.fetch import fetched_weights

    model = args.model or fetched_weights("openwebrl")
    if model is None:
        sys.exit("no OpenWebRL-4B checkpoint: run `owrl model fetch openwebrl` first, or pass --model PATH")
    judge_path = args.judge or fetched_weights("openwebrl-judge")
    warnings.simplefilter("ignore")

    from owrl_demo import load_tasks
    from owrl_sdk.agent import Agent
    from owrl_sdk.support.answers import match_answer
    from owrl_sdk.config import Settings

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    settings = Settings(policy="openwebrl", model=str(model), profile="openwebrl", max_steps=args.max_steps,
                        runs_dir=str(out / "runs"), step_timeout=900, episode_timeout=3600)
    tasks = {t.id: t for t in load_tasks()}
    tasks = [tasks[i] for i in TASKS]
    device = torch.cuda.get_device_name(0)
    print(f"GPU: {device}; policy: {model} (4-bit); judge: {judge_path or 'none (skipped)'}", flush=True)

    # ---------------------------------------------------------------- the policy
    torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    agent = Agent("openwebrl", settings=settings, model=str(model), quantize="4bit", profile="openwebrl")
    load_s = time.perf_counter() - started
    interface_warnings = list(getattr(agent.policy, "warnings", []))
    for w in interface_warnings:
        print(f"warning: {w}", flush=True)

    async def play() -> list[Any]:
        async with agent:
            return [await agent.run(task, out=out / "runs") for task in tasks]

    trajectories = asyncio.run(play())
    peak_policy = torch.cuda.max_memory_allocated() / GIB

    # ---------------------------------------------------------------- the judge
    judgements: list[Any] = [None] * len(trajectories)
    peak_judge = None
    if judge_path is not None:
        judge = agent.plugins.catalogue.get("judges", "openwebrl-judge")(
            settings, model=str(judge_path), profile="openwebrl")

        async def judge_all() -> list[Any]:
            return [await judge.judge(t) for t in trajectories]

        judgements = asyncio.run(judge_all())
        peak_judge = torch.cuda.max_memory_allocated() / GIB

    # ---------------------------------------------------------------- report
    rows, seconds, tokens = [], [], 0
    for task, traj, verdict in zip(tasks, trajectories, judgements):
        outcome = traj.outcome
        answer = outcome.answer if outcome else None
        for step in traj.steps:
            s = step_seconds(step)
            if s is not None:
                seconds.append(s)
            tokens += int((step.turn.usage or {}).get("completion_tokens") or 0)
        row = {"task": task.id, "intent": task.intent, "outcome": outcome.status if outcome else "none",
               "steps": len(traj.steps), "answer": answer,
               "answer_ok": match_answer(task.answer, answer, task.answer_match) if task.answer else None,
               "judge": judge_label(verdict), "judge_score": verdict.score if verdict else None,
               "judge_reason": verdict.reason if verdict else None, "run_dir": traj.metadata.get("run_dir")}
        rows.append(row)
        check = {True: "ok", False: "wrong"}.get(row["answer_ok"], "n/a")
        print(f"{task.id}: outcome {row['outcome']}, {row['steps']} steps, answer {check} ({answer!r}), "
              f"judge {row['judge']}", flush=True)

    total_s = sum(seconds)
    summary = {
        "gpu": device,
        "model": str(model),
        "judge_model": str(judge_path) if judge_path else None,
        "policy_load_seconds": round(load_s, 1),
        "peak_gib_after_policy": round(peak_policy, 2),
        "peak_gib_after_judge": round(peak_judge, 2) if peak_judge is not None else None,
        "policy_seconds_per_step": {"mean": round(statistics.mean(seconds), 3) if seconds else None,
                                    "max": round(max(seconds), 3) if seconds else None, "steps": len(seconds)},
        "tokens_per_second": round(tokens / total_s, 1) if total_s else None,
        "completion_tokens": tokens,
        "interface_warnings": interface_warnings,
        "tasks": rows,
    }
    per_step = summary["policy_seconds_per_step"]
    print(f"peak GPU memory: {summary['peak_gib_after_policy']} GiB after the policy, "
          f"{summary['peak_gib_after_judge'] if peak_judge is not None else '-'} GiB after the judge")
    print(f"policy latency per step: mean {per_step['mean']} s, max {per_step['max']} s ({per_step['steps']} steps)")
    print(f"generation: {summary['tokens_per_second']} tokens/s ({tokens} tokens)")
    (out / "results.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"wrote {out / 'results.json'}")


if __name__ == "__main__":
    main()
