"""Several runs of bench/bench_learning.py read together: what held in every run.

    .venv/bin/python bench/bench_learning_seeds.py runs/s0 runs/s1 runs/s2
    .venv/bin/python bench/bench_learning_seeds.py runs/s0 runs/s1 --against runs/nofb-s0 runs/nofb-s1
    .venv/bin/python bench/bench_learning_seeds.py runs/s0 runs/s0-again --same

Without ``--against``: each stage's success per run, its mean and spread (sample standard
deviation, min and max) over the runs, per family too, and each run's exact McNemar test
of RL against SFT on the same episodes.

With ``--same``: two runs of one command and seed, compared for what a repeat must give
alike (every episode's result per stage, the SFT loss, each RL iteration's figures but its
seconds); the first difference is printed.

With ``--against``: an ablation. Runs are paired by seed; for every stage both arms reached,
success in each arm and the exact McNemar test between them on the same episodes (same
family, same evaluation seed), per seed and pooled over the seeds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_learning import mcnemar  # noqa: E402


def load(folder: str) -> dict[str, Any]:
    path = Path(folder) / "results.json"
    if not path.is_file():
        sys.exit(f"{folder}: no results.json (a run that did not finish?)")
    data = json.loads(path.read_text())
    data["folder"] = folder
    if not data.get("finished", True):  # written midway: a run stopped, or still running
        print(f"note: {folder} did not finish; it reached {', '.join(data['stages']) or 'no evaluation'}",
              file=sys.stderr)
    return data


def spread(values: list[float]) -> str:
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{mean:5.1%} ± {sd:4.1%} [{min(values):.0%}–{max(values):.0%}]"


def label(run: dict[str, Any]) -> str:
    """A run's name in the tables: its seed, and its RL seed when it started RL from a saved SFT
    adapter (runs from one adapter share the seed and differ only there)."""
    args = run["args"]
    return f"seed {args['seed']}" + (f" rl {args.get('rl_seed', 0)}" if args.get("from_sft") else "")


def pair_key(run: dict[str, Any]) -> tuple[int, int]:
    return run["args"]["seed"], run["args"].get("rl_seed", 0) if run["args"].get("from_sft") else 0


def summary(runs: list[dict[str, Any]]) -> None:
    stages = [s for s in ("baseline", "sft", "rl") if all(s in r["stages"] for r in runs)]
    names = [label(r) for r in runs]
    print(f"{len(runs)} runs: {', '.join(names)}; success on held-out seeds (greedy)")
    print(f"{'stage':<10}" + "".join(f"{n:>16}" for n in names) + f"{'mean ± sd [min–max]':>30}")
    for stage in stages:
        blocks = [r["stages"][stage] for r in runs]
        cells = "".join(f"{b['successes']:>6}/{b['n']:<3} {b['rate']:4.0%} " for b in blocks)
        print(f"{stage:<10}{cells}{spread([b['rate'] for b in blocks]):>30}")
    for name in sorted(set.intersection(*(set(r.get("memories") or {}) for r in runs))):
        blocks = [r["memories"][name] for r in runs]
        cells = "".join(f"{b['successes']:>6}/{b['n']:<3} {b['rate']:4.0%} " for b in blocks)
        print(f"{'rl, ' + name:<10}{cells}{spread([b['rate'] for b in blocks]):>30}")
    families = list(runs[0]["stages"][stages[-1]]["families"])
    heldout = set(runs[0].get("heldout_families", []))
    multi = set(runs[0].get("multi_step", []))
    print("\nper family, mean over runs (successes / episodes, all runs together)")
    print(f"{'family':<24}" + "".join(f"{s:>14}" for s in stages))
    for f in families:
        mark = (" *" if f in heldout else "") + (" m" if f in multi else "")
        row = ""
        for stage in stages:
            wins = sum(r["stages"][stage]["families"][f]["successes"] for r in runs)
            n = sum(r["stages"][stage]["families"][f]["n"] for r in runs)
            row += f"{wins:>6}/{n:<3} {wins / n if n else 0:4.0%}"
        print(f"{f + mark:<24}{row}")
    print("* never demonstrated; m multi-step")
    if "rl" in stages and "sft" in stages:
        print("\nRL against SFT, same episodes, per run:")
        ahead = 0
        before: dict[str, bool] = {}
        after: dict[str, bool] = {}
        for i, r in enumerate(runs):
            m = mcnemar(r["stages"]["sft"]["episodes"], r["stages"]["rl"]["episodes"])
            ahead += m["gained"] > m["lost"]
            print(f"  {label(r)}: {m['gained']} gained, {m['lost']} lost, exact McNemar p = {m['p_value']:.2g}")
            before.update({f"{i}/{k}": v for k, v in r["stages"]["sft"]["episodes"].items()})
            after.update({f"{i}/{k}": v for k, v in r["stages"]["rl"]["episodes"].items()})
        m = mcnemar(before, after)
        print(f"  pooled: {m['gained']} gained, {m['lost']} lost, exact McNemar p = {m['p_value']:.2g}")
        print(f"RL ahead of SFT in {ahead} of {len(runs)} runs")
        by_family("pooled", after, before, ("rl", "sft"))
    minutes = [sum(r["seconds"].values()) / 60 for r in runs]
    print(f"\nminutes per run: {', '.join(f'{m:.0f}' for m in minutes)}")


def ablation(base: list[dict[str, Any]], other: list[dict[str, Any]]) -> None:
    by_seed = {pair_key(r): r for r in other}
    pairs = [(r, by_seed[pair_key(r)]) for r in base if pair_key(r) in by_seed]
    if not pairs:
        sys.exit("no seed in common between the runs and --against")
    stages = [s for s in ("baseline", "sft", "rl") if all(s in a["stages"] and s in b["stages"] for a, b in pairs)]
    print(f"{len(pairs)} paired runs: {', '.join(label(a) for a, _ in pairs)}")
    print(f"runs:    {', '.join(a['folder'] for a, _ in pairs)}\nagainst: {', '.join(b['folder'] for _, b in pairs)}")
    for stage in stages:
        pooled_a: dict[str, bool] = {}
        pooled_b: dict[str, bool] = {}
        for a, b in pairs:
            ea, eb = a["stages"][stage]["episodes"], b["stages"][stage]["episodes"]
            m = mcnemar(eb, ea)
            print(f"  {stage:<5} {label(a)}: runs {a['stages'][stage]['rate']:.0%}, against "
                  f"{b['stages'][stage]['rate']:.0%}; runs solved {m['gained']} the other failed, lost {m['lost']}; "
                  f"p = {m['p_value']:.2g}")
            seed = "/".join(map(str, pair_key(a)))
            pooled_a.update({f"{seed}/{k}": v for k, v in ea.items()})
            pooled_b.update({f"{seed}/{k}": v for k, v in eb.items()})
        m = mcnemar(pooled_b, pooled_a)
        ra = sum(pooled_a.values()) / max(1, len(pooled_a))
        rb = sum(pooled_b.values()) / max(1, len(pooled_b))
        print(f"  {stage:<5} pooled: runs {ra:.0%}, against {rb:.0%}; {m['gained']} gained, {m['lost']} lost, "
              f"p = {m['p_value']:.2g}")
        print(f"  {stage:<5} pooled, 95% intervals: runs {interval(pooled_a)}, against {interval(pooled_b)}")
        by_family(stage, pooled_a, pooled_b)
        where_apart(stage, pairs)


def interval(episodes: dict[str, bool]) -> str:
    from owrl_sdk.scheduling.evaluation import wilson

    wins, n = sum(episodes.values()), len(episodes)
    low, high = wilson(wins, n)
    return f"{wins}/{n} [{low:.0%}, {high:.0%}]"


def by_family(stage: str, a: dict[str, bool], b: dict[str, bool], names: tuple[str, str] = ("runs", "against")) -> None:
    """Each family's successes in both arms over the paired seeds (episode keys are seed/family#n),
    with the episodes one arm solved and the other did not."""
    families: dict[str, list[str]] = {}
    for k in sorted(set(a) & set(b)):
        families.setdefault(k.rsplit("/", 1)[1].rsplit("#", 1)[0], []).append(k)
    x, y = names
    print(f"  {stage:<5} per family ({x} | {y} | {x} alone solved, {y} alone solved):")
    for f, keys in sorted(families.items()):
        alone_a = sum(1 for k in keys if a[k] and not b[k])
        alone_b = sum(1 for k in keys if b[k] and not a[k])
        print(f"    {f:<22}{sum(a[k] for k in keys):>3}/{len(keys):<3}|{sum(b[k] for k in keys):>3}/{len(keys):<3}"
              f"| +{alone_a} -{alone_b}")


def answers(folder: str, stage: str) -> dict[str, list[str]]:
    """Each evaluated episode's answers, turn by turn, from the run's saved trajectories
    (``OUT/eval-STAGE/runs/*/trajectory.json``), keyed like the results' episodes."""
    found: dict[str, list[str]] = {}
    for path in sorted((Path(folder) / f"eval-{stage}" / "runs").glob("*/trajectory.json")):
        t = json.loads(path.read_text())
        key = f"{t['task']['id']}#{t['task'].get('metadata', {}).get('seed')}"
        found[key] = [s["turn"].get("raw") or "" for s in t["steps"]]
    return found


def where_apart(stage: str, pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    """Where the arms' answers first differ, over the paired seeds. An episode whose first
    answers differ was changed by training alone (the first turn has no history to show
    feedback in); one that agrees on turn 1 and differs later may have been changed by what
    the history showed (or by training again: it acts on every turn)."""
    first = later = alike = missing = 0
    outcome_first = outcome_later = 0
    for a, b in pairs:
        ta, tb = answers(a["folder"], stage), answers(b["folder"], stage)
        ea, eb = a["stages"][stage]["episodes"], b["stages"][stage]["episodes"]
        for key in sorted(set(ea) & set(eb)):
            if key not in ta or key not in tb:
                missing += 1
                continue
            turns = list(zip(ta[key], tb[key]))
            apart = next((i for i, (x, y) in enumerate(turns) if x != y), None)
            if apart is None and len(ta[key]) == len(tb[key]):
                alike += 1
                continue
            split = apart == 0
            first += split
            later += not split
            if ea[key] != eb[key]:
                outcome_first += split
                outcome_later += not split
    if first + later + alike == 0:
        return
    print(f"  {stage:<5} answers: {alike} episodes alike at every turn, {first} apart from the first turn, "
          f"{later} alike on the first and apart later; of the episodes with different outcomes, "
          f"{outcome_first} were apart from the first turn, {outcome_later} later"
          + (f" ({missing} without saved trajectories)" if missing else ""))


def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two runs gave the same figures (timings aside); prints each difference found."""
    def figures(r: dict[str, Any]) -> dict[str, Any]:
        curve = [{k: v for k, v in it.items() if not k.startswith("time_") and "per_s" not in k} for it in r.get("rl", [])]
        return {"stages": {k: v["episodes"] for k, v in r["stages"].items()},
                "sft_loss": (r.get("sft") or {}).get("final_loss"), "rl": curve,
                "demonstrations": r.get("demonstrations")}

    for r in (a, b):
        print(f"{r['folder']}: commit {r.get('commit') or 'not recorded'}")
    fa, fb = figures(a), figures(b)
    differences = [k for k in fa if fa[k] != fb[k]]
    for k in differences:
        print(f"{k}: differs")
    for stage in [s for s in a["stages"] if s in b["stages"]]:
        ea, eb = a["stages"][stage]["episodes"], b["stages"][stage]["episodes"]
        apart = sorted(k for k in set(ea) & set(eb) if ea[k] != eb[k])
        if apart:  # by how much a stage varies: its successes in each run, and the episodes that moved
            print(f"  {stage}: {sum(ea.values())} against {sum(eb.values())} successes; "
                  f"{len(apart)} episodes apart: {', '.join(apart)}")
    print("the same figures" if not differences else f"{len(differences)} of {len(fa)} parts differ")
    return not differences


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="output folders of bench_learning.py (each with results.json)")
    ap.add_argument("--against", nargs="+", help="the other arm of an ablation, paired with the runs by seed")
    ap.add_argument("--same", action="store_true", help="two runs of one seed: do they give the same figures?")
    args = ap.parse_args()
    runs = [load(f) for f in args.runs]
    if args.same:
        if len(runs) != 2:
            sys.exit("--same compares two runs")
        sys.exit(0 if same(*runs) else 1)
    if args.against:
        ablation(runs, [load(f) for f in args.against])
    else:
        summary(runs)


if __name__ == "__main__":
    main()
