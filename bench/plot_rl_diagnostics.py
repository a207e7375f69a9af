"""The diagnostics of RL runs side by side, from their ``metrics.jsonl``, as one PNG.

    .venv/bin/python bench/plot_rl_diagnostics.py OUT/rl [OTHER/rl ...] --labels new,old --out curves.png

Each run is a line in every panel: sampled success and the greedy probe, unreadable and
cut answers, KL to the reference and old to new, entropy, the adapter's drift, and the
update steps taken. What to look for is in docs/training.md ("Reading the diagnostics").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PANELS = [
    ("success", ["rl/success_rate", "rl/probe_success"], "sampled success / greedy probe"),
    ("unreadable", ["rl/parse_error_rate", "rl/truncation_rate"], "unreadable / cut turns (share)"),
    ("kl", ["rl/kl", "rl/kl_old_new"], "KL to reference / old to new"),
    ("entropy", ["rl/entropy"], "entropy of the trained tokens"),
    ("drift", ["rl/adapter_drift"], "adapter L2 distance from the start"),
    ("advantage", ["rl/advantage_mass", "rl/valid_group_fraction"], "advantage mass / valid groups"),
]


def read(path: Path) -> list[dict]:
    file = path / "metrics.jsonl" if path.is_dir() else path
    return [json.loads(line) for line in file.read_text().splitlines() if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="RL output folders (or their metrics.jsonl)")
    ap.add_argument("--labels", help="comma-separated names, one per run")
    ap.add_argument("--out", type=Path, default=Path("rl-diagnostics.png"))
    ap.add_argument("--title", default="")
    args = ap.parse_args()
    try:
        import matplotlib
    except ImportError:
        sys.exit("the plots need matplotlib: pip install 'openwebrl-sdk[bench]'")

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = args.labels.split(",") if args.labels else [str(r) for r in args.runs]
    fig, axes = plt.subplots(2, 3, figsize=(13, 7))
    colours = ["tab:blue", "tab:red", "tab:green", "tab:purple", "tab:orange", "tab:brown"]
    for n, (run, label) in enumerate(zip(args.runs, labels)):
        rows = read(run)
        for ax, (_, keys, title) in zip(axes.flat, PANELS):
            for k, key in enumerate(keys):
                pts = [(r["step"] + 1, r[key]) for r in rows if key in r]
                if not pts:
                    continue
                xs, ys = zip(*pts)
                ax.plot(xs, ys, "-o" if k == 0 else "--s", color=colours[n % len(colours)], markersize=4,
                        alpha=1.0 if k == 0 else 0.6, label=f"{label}: {key.removeprefix('rl/')}")
            ax.set_title(title, fontsize=9)
            ax.set_xlabel("iteration", fontsize=8)
            ax.grid(alpha=0.3)
    for ax in axes.flat:
        ax.legend(fontsize=6)
    if args.title:
        fig.suptitle(args.title, fontsize=10)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
