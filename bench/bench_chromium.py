"""What a Chromium build costs to launch and to drive: the system's full Chromium against its
headless shell, alternated, each launch in a process of its own so that its whole CPU (the
browser's processes and Playwright's driver) is counted when it ends.

    .venv/bin/python bench/bench_chromium.py [--rounds 5] [--steps 40]

One round per build: launch, a context and a page on a page of 80 buttons, fields and
paragraphs, then ``--steps`` times a click, a JPEG screenshot and an aria snapshot (what an
observation takes), then close. It prints, per build, the medians over the rounds of the
launch's wall time, the steps' wall time and the CPU of the whole round (children: the
browser's processes and the driver; self: this script's Python).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import time

PAGE = "<html><body>" + "".join(
    f"<div><button id=b{i}>Button {i}</button><input id=i{i} value='x{i}'><p>Paragraph {i} with a few words</p></div>"
    for i in range(80)) + "</body></html>"


async def _round(executable: str, steps: int) -> dict[str, float]:
    from playwright.async_api import async_playwright

    from owrl_sdk.browser.chromium import BASE_ARGS

    async with async_playwright() as p:
        start = time.perf_counter()
        browser = await p.chromium.launch(executable_path=executable, headless=True, args=list(BASE_ARGS))
        context = await browser.new_context(viewport={"width": 1280, "height": 720})
        page = await context.new_page()
        await page.set_content(PAGE)
        launched = time.perf_counter()
        for i in range(steps):
            await page.click(f"#b{i % 80}")
            await page.screenshot(type="jpeg", quality=80)
            await page.locator("body").aria_snapshot()
        stepped = time.perf_counter()
        await browser.close()
    return {"launch_s": launched - start, "steps_s": stepped - launched}


def child(executable: str, steps: int) -> None:
    figures = asyncio.run(_round(executable, steps))
    kids, own = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    figures["children_cpu_s"] = kids.ru_utime + kids.ru_stime
    figures["self_cpu_s"] = own.ru_utime + own.ru_stime
    print(json.dumps(figures))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--child", nargs=2, metavar=("EXECUTABLE", "STEPS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return
    from owrl_sdk.browser.chromium import find_chromium, headless_shell

    full = find_chromium(check_managed=False)
    shell = headless_shell()
    if full is None or full.path is None or shell is None:
        sys.exit("needs a system Chromium and its headless shell (apt-get install chromium chromium-headless-shell)")
    builds = {"full Chromium": full.path, "headless shell": shell}
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in builds}
    for n in range(args.rounds):
        for name, path in builds.items():
            out = subprocess.run([sys.executable, __file__, "--child", path, str(args.steps)],
                                 capture_output=True, text=True, check=True)
            rows[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(f"round {n + 1} {name}: {rows[name][-1]}", file=sys.stderr)
    print(f"{args.rounds} rounds, {args.steps} steps each (medians)")
    print(f"{'build':16s} {'launch s':>9s} {'steps s':>8s} {'browser+driver CPU s':>21s} {'python CPU s':>13s}")
    for name, found in rows.items():
        med = {k: statistics.median(r[k] for r in found) for k in found[0]}
        print(f"{name:16s} {med['launch_s']:9.2f} {med['steps_s']:8.2f} {med['children_cpu_s']:21.2f} {med['self_cpu_s']:13.2f}")


if __name__ == "__main__":
    main()
