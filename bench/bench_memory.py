"""What each memory puts in a small model's context, on the same recorded demo-shop episodes.

    .venv/bin/python bench/bench_memory.py                        # record, then measure (~5 min on 2 CPUs)
    .venv/bin/python bench/bench_memory.py --from runs/bench-memory   # measure episodes recorded before

1. Record: the demo-shop suite played by ``oracle`` (short, clean episodes) and by
   ``noisy-oracle``, a policy of this script that plays the oracle's turns but, before a
   turn, makes a mistake with probability ``--noise`` (seeded): a click on a ref that does
   not exist (a call error), a scroll with an expectation that fails, or a scroll that
   changes little. Its episodes are long and hold what a model's do: errors, failed
   expectations, useless steps, between the steps that matter.
2. Measure, offline: every recorded step is fed, in order, to each memory; at every step the
   context the memory gives is rendered with the ``owrl-text`` policy's prompt (text mode,
   compact, the accessibility tree bounded to 8,000 characters, the same for every memory). The policy's
   choices never depended on the memory (both policies follow a script), so every memory is
   measured on exactly the same steps.

Per memory it prints the history's characters per step (everything the memory adds: the
notes and the past turns and feedback), the whole prompt's, and how often the facts a next
step needs are still in the history:
- ``last failure``: the most recent failed call's error or failed expectation (where one failed);
- ``cart``: the latest feedback line that mentions the cart (where one did);
- ``typed``: every value written into a field so far.
A fact counts as kept when its first 60 characters appear in the history text. Characters,
not tokens: no real model's tokenizer is available offline here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
import zlib
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field

from owrl_sdk import hookimpl
from owrl_sdk.contract.memory import Context
from owrl_sdk.contract.policy import Policy
from owrl_sdk.types import Expectation, Step, ToolCall, Trajectory, Turn

FACT_CHARS = 60
ARIA_CHARS = 8000  # the page snapshot's bound in the prompt (build_prompt's aria_chars), the same for every memory

DEFAULT_MEMORIES = ["default", "weighted", "weighted:budget=6", "weighted:budget_unit=chars,budget=1500",
                    "summary", "summary:keep_last=1"]


class NoisyOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    noise: float = Field(0.5, ge=0, lt=1, description="probability of a mistake before each planned turn")
    seed: int = Field(0, description="seed of the mistakes (per task)")


class NoisyOracle(Policy):
    """The oracle's turns with seeded mistakes in between (see the module's docstring)."""

    name = "noisy-oracle"
    Options = NoisyOptions

    def __init__(self, settings: Any, **options: Any):
        super().__init__(settings, **options)
        self.conf: NoisyOptions = settings.options(self.name, NoisyOptions, **options)
        self.position = 0
        self.mistakes_in_a_row = 0
        self.mistake_steps: set[int] = set()
        self.rng = random.Random(0)

    async def act(self, context: Context) -> Turn:
        task = context.task
        last = context.last_step
        if last is None:
            self.position = 0
            self.mistakes_in_a_row = 0
            self.mistake_steps = set()
            self.rng = random.Random(self.conf.seed * 1_000_003 + zlib.crc32(task.id.encode()))
        elif last.index not in self.mistake_steps:
            for record in last.calls:  # a planned turn failed: give up as the oracle does
                if (record.verdict is not None and not record.verdict.ok) or (
                        record.result is not None and not record.result.ok):
                    return Turn(end=f"oracle step failed: {record.call.name}")
        turns = task.metadata.get("oracle_turns") or []
        if self.position >= len(turns):
            return Turn(end="oracle ran out of turns")
        index = last.index + 1 if last is not None else 0
        if self.mistakes_in_a_row < 2 and self.rng.random() < self.conf.noise:
            self.mistakes_in_a_row += 1
            self.mistake_steps.add(index)
            return self.mistake()
        self.mistakes_in_a_row = 0
        planned = turns[self.position]
        self.position += 1
        return Turn(thought=planned.get("thought", ""), calls=[ToolCall.model_validate(c) for c in planned["calls"]])

    def mistake(self) -> Turn:
        kind = self.rng.choice(["missing", "expectation", "idle"])
        if kind == "missing":
            ref = f"e{self.rng.randint(5000, 9999)}"
            return Turn(thought="Click the button that applies the discount.",
                        calls=[ToolCall(name="click", arguments={"ref": ref})])
        if kind == "expectation":
            return Turn(thought="Scroll down to the order confirmation.",
                        calls=[ToolCall(name="scroll", arguments={"direction": "down"},
                                        expect=Expectation(text_visible="Your order is confirmed"))])
        return Turn(thought="Look at the top of the page again.",
                    calls=[ToolCall(name="scroll", arguments={"direction": "up"})])


class NoisyPlugin:
    @hookimpl
    def register_policies(self, register: Any) -> None:
        register(NoisyOracle)


# ---------------------------------------------------------------------------- recording


async def record(out: Path, policy: str, noise: float, seed: int, workers: int) -> None:
    from owrl_sdk.config import Settings
    from owrl_sdk.scheduling.evaluation import EvalPlan, Evaluation
    from owrl_sdk.contract.plugins import Plugins

    settings = Settings(runs_dir=str(out / "runs"), plugins={"noisy-oracle": {"noise": noise, "seed": seed}})
    plugins = Plugins()
    if plugins.pm.get_plugin("bench-memory-noisy-oracle") is None:  # one plugin manager per process
        plugins.pm.register(NoisyPlugin(), name="bench-memory-noisy-oracle")
        plugins.refresh()
    suite = plugins.catalogue.get("task_suites", "demo-shop")(settings)
    plan = EvalPlan(suite=suite, tasks=list(suite.tasks()), workers=workers, policy=policy, out=out)
    summary = await Evaluation(plan, settings, plugins).run()
    print(f"recorded {summary['episodes']} {policy} episodes in {out} (success {summary['success_rate']:.0%})",
          flush=True)


def load(folder: Path) -> list[Trajectory]:
    from owrl_sdk.formats.documents import load_trajectory

    return [load_trajectory(p) for p in sorted(folder.glob("runs/*/trajectory.json"))]


# ---------------------------------------------------------------------------- measuring


def _norm(text: str) -> str:
    return " ".join(text.split())


def facts(past: list[Step]) -> dict[str, list[str]]:
    """The facts a next step needs, from the steps so far (see the module's docstring)."""
    failure: Optional[str] = None
    cart: Optional[str] = None
    typed: list[str] = []
    for step in past:
        for r in step.calls:
            res = r.result
            if r.verdict is not None and not r.verdict.ok:
                failure = r.verdict.describe()
            elif res is not None and not res.ok and res.error:
                failure = res.error
            if res is not None and res.ok:
                lines = [ln for ln in res.feedback.splitlines() if "cart" in ln.lower()]
                if lines:
                    cart = lines[0]
            if r.call.name == "write" and not r.skipped and isinstance(r.call.arguments.get("message"), str):
                typed.append(r.call.arguments["message"])
    out: dict[str, list[str]] = {"last failure": [], "cart": [], "typed": typed}
    if failure:
        out["last failure"] = [failure]
    if cart:
        out["cart"] = [cart]
    return out


def texts(prompt: Any) -> tuple[str, int]:
    """(the history's text: the task message after its first line and every message between it
    and the current page; the whole prompt's characters)."""
    parts = [[p["text"] for p in m["content"] if p["type"] == "text"] for m in prompt.messages]
    total = sum(len(t) for ps in parts for t in ps)
    task_msg = "\n".join(parts[1])
    notes = task_msg.split("\n", 1)[1] if "\n" in task_msg else ""
    history = "\n".join([notes] + ["\n".join(ps) for ps in parts[2:-1]])
    return history, total


def measure(trajectories: list[Trajectory], spec: str) -> dict[str, Any]:
    from owrl_openwebrl.prompt import build_prompt

    from owrl_sdk.config import Settings
    from owrl_sdk.contract.plugins import Plugins

    name, _, opts = spec.partition(":")
    options = dict(kv.split("=", 1) for kv in opts.split(",") if kv)
    cls = Plugins().catalogue.get("memories", name)
    memory = cls(Settings(), **options)
    hist: list[int] = []
    total: list[int] = []
    late: list[int] = []
    kept: dict[str, list[bool]] = {"last failure": [], "cart": [], "typed": []}
    for traj in trajectories:
        memory.reset(traj.task)
        for t, step in enumerate(traj.steps):
            obs = step.observation.model_copy(update={"aria": (step.observation.aria or "")[:ARIA_CHARS]})
            ctx = memory.context(traj.task, obs, [])
            history, chars = texts(build_prompt(ctx, text_mode=True, compact=True, aria_chars=ARIA_CHARS))
            hist.append(len(history))
            total.append(chars)
            if t >= 8:
                late.append(len(history))
            flat = _norm(history)
            for key, values in facts(traj.steps[:t]).items():
                kept[key].extend(_norm(v)[:FACT_CHARS] in flat for v in values)
            memory.record(step)
    return {"memory": spec, "steps": len(hist), "history_mean": statistics.fmean(hist) if hist else 0,
            "history_p90": _pct(hist, 0.9), "history_max": max(hist, default=0),
            "late_mean": statistics.fmean(late) if late else None, "late_steps": len(late),
            "prompt_mean": statistics.fmean(total) if total else 0, "prompt_max": max(total, default=0),
            "kept": {k: [sum(v), len(v)] for k, v in kept.items()}}


def _pct(values: list[int], q: float) -> int:
    if not values:
        return 0
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


def table(label: str, trajectories: list[Trajectory], rows: list[dict[str, Any]]) -> str:
    steps = [len(t.steps) for t in trajectories]
    head = (f"{label}: {len(trajectories)} episodes, {sum(steps)} steps "
            f"(mean {statistics.fmean(steps):.1f}, max {max(steps)} per episode)\n")
    lines = ["| memory | history chars/step: mean | p90 | max | mean at step >= 9 | prompt chars/step: mean | max "
             "| last failure kept | cart kept | typed values kept |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        k = r["kept"]
        late = f"{r['late_mean']:,.0f} (n={r['late_steps']})" if r["late_mean"] is not None else "-"
        lines.append(f"| `{r['memory']}` | {r['history_mean']:,.0f} | {r['history_p90']:,} | {r['history_max']:,} | "
                     f"{late} | {r['prompt_mean']:,.0f} | {r['prompt_max']:,} | "
                     + " | ".join(_share(*k[key]) for key in ("last failure", "cart", "typed")) + " |")
    return head + "\n".join(lines)


def _share(hit: int, n: int) -> str:
    return f"{hit}/{n} ({hit / n:.0%})" if n else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="runs/bench-memory", help="where episodes are recorded (emptied first)")
    ap.add_argument("--from", dest="source", help="measure the episodes recorded before in this folder")
    ap.add_argument("--noise", type=float, default=0.5, help="noisy-oracle's probability of a mistake per turn")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory", action="append", help="NAME[:key=value,...] (repeatable; default: "
                    + " ".join(DEFAULT_MEMORIES) + ")")
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args()
    root = Path(args.source or args.out)
    if not args.source:
        import shutil

        shutil.rmtree(root, ignore_errors=True)
        started = time.perf_counter()
        asyncio.run(record(root / "oracle", "oracle", 0.0, args.seed, args.workers))
        asyncio.run(record(root / "noisy-oracle", "noisy-oracle", args.noise, args.seed, args.workers))
        print(f"recording took {time.perf_counter() - started:.0f} s", flush=True)
    memories = args.memory or DEFAULT_MEMORIES
    results = {}
    for label in ("oracle", "noisy-oracle"):
        trajectories = load(root / label)
        if not trajectories:
            print(f"no episodes in {root / label}", file=sys.stderr)
            continue
        rows = [measure(trajectories, spec) for spec in memories]
        results[label] = rows
        print()
        print(table(label, trajectories, rows))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    print(f"\nreproduce: .venv/bin/python bench/bench_memory.py --noise {args.noise} --seed {args.seed}")


if __name__ == "__main__":
    main()
