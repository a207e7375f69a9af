"""Raw Playwright's step in two orders, against the browser's frame clock.

    .venv/bin/python bench/bench_frame_phase.py [--episodes 20] [--steps 5] [--think-ms 17]

On bench_browser.py's local form page, one click then the next observation, in raw
Playwright only (no SDK): the observation as a screenshot then an aria snapshot (what
bench_browser.py's raw side does), or the snapshot first (the order of an owrl step with
change feedback, whose after-snapshot comes before the observation's screenshot). Each order
runs back to back, and again with a pause of 0 to ``--think-ms`` ms before each click (not
measured), as a policy's thinking puts between an observation and the next call.

A click waits for two animation frames (Playwright's stability check), so its time depends
on where it starts against the 60 Hz frames: just after a screenshot (which ends on a frame)
it waits nearly a frame longer than after a snapshot. The figures show what the order alone
costs a step, with the same browser work.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_browser  # noqa: E402 - the page and its server come from there

from owrl_sdk.browser import BrowserHost  # noqa: E402
from owrl_sdk.config import Settings  # noqa: E402

ORDERS = ("screenshot, snapshot", "snapshot, screenshot")


async def run(episodes: int, steps: int, think_ms: float) -> dict[str, dict[str, list[float]]]:
    settings = Settings()
    url, stop = bench_browser.serve(bench_browser.LOCAL_PAGE)
    viewport = {"width": settings.viewport_width, "height": settings.viewport_height}
    quality = settings.screenshot_quality
    ms: dict[str, dict[str, list[float]]] = {}
    try:
        async with BrowserHost(settings) as host:
            for episode in range(episodes):
                for order in ORDERS:
                    for pause in (0.0, think_ms):
                        context = await host.browser.new_context(viewport=viewport)
                        page = await context.new_page()
                        await page.goto(url)
                        await bench_browser.raw_observe(page, quality)
                        row = ms.setdefault(f"{order}{f'; pause 0-{pause:g} ms' if pause else ''}",
                                            {"click": [], "step": []})
                        for step in range(steps):
                            if pause:
                                await asyncio.sleep(random.Random(f"{episode}:{step}").uniform(0, pause) / 1000)
                            started = time.perf_counter()
                            await page.click("#go")
                            clicked = time.perf_counter()
                            if order == ORDERS[0]:
                                await page.screenshot(type="jpeg", quality=quality)
                                await page.aria_snapshot(mode="ai")
                            else:
                                await page.aria_snapshot(mode="ai")
                                await page.screenshot(type="jpeg", quality=quality)
                            ended = time.perf_counter()
                            row["click"].append((clicked - started) * 1000)
                            row["step"].append((ended - started) * 1000)
                        await context.close()
    finally:
        stop()
    return ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--think-ms", type=float, default=17.0, help="the pause's maximum in the paused rows (ms)")
    args = ap.parse_args()
    ms = asyncio.run(run(args.episodes, args.steps, args.think_ms))
    print(f"raw Playwright, local page, {args.episodes} episodes x {args.steps} steps; medians in ms")
    print(f"{'observation order':<44} {'click':>8} {'step':>8}")
    for name, row in ms.items():
        print(f"{name:<44} {statistics.median(row['click']):8.1f} {statistics.median(row['step']):8.1f}")
    print(f"reproduce: .venv/bin/python bench/bench_frame_phase.py --episodes {args.episodes} --steps {args.steps} "
          f"--think-ms {args.think_ms:g}")


if __name__ == "__main__":
    main()
