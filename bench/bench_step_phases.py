"""Where a BrowserEnv step's time goes, phase by phase, beside raw Playwright's click.

    .venv/bin/python bench/bench_step_phases.py [--episodes 30] [--steps 5] [--changes]

On bench_browser.py's local form page, each episode plays ``--steps`` clicks of its button
twice: once in a raw Playwright context (``page.click`` then a screenshot and an aria
snapshot), once through ``BrowserEnv`` (``execute(click)`` then ``observe()``), and once more
a bare ``page.click`` in BrowserEnv's own context (its init scripts, routes and CDP
sessions, without the SDK's Python around it). Change feedback is off unless ``--changes``:
an episode whose change feedback nobody reads.

It prints the median and mean milliseconds of each phase: the environment's methods are
wrapped with a timer (``_before``, ``_settle_quietly``, ``_describe_change``, the tool's
``run``, secret scrubbing and the rest), so the figures include the wrappers' own small cost.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_browser  # noqa: E402 - the page and its server come from there

from owrl_sdk.safety import secrets  # noqa: E402
from owrl_sdk.browser import BrowserHost  # noqa: E402
from owrl_sdk.config import Settings  # noqa: E402
from owrl_sdk.types import Task, ToolCall  # noqa: E402

PHASES = ("_before", "_settle_quietly", "_describe_change", "_await_new_tabs", "_await_script_addresses",
          "_sorting_fields", "_bound_aria")


class Phases:
    def __init__(self) -> None:
        self.ms: dict[str, list[float]] = {}

    def add(self, key: str, started: float) -> None:
        self.ms.setdefault(key, []).append((time.perf_counter() - started) * 1000)

    def timed(self, owner: Any, name: str, key: str) -> None:
        """Replace ``owner.name`` (a coroutine function or a plain one) by one that times it."""
        real = getattr(owner, name)
        if asyncio.iscoroutinefunction(real):
            @functools.wraps(real)
            async def waited(*args: Any, **kwargs: Any) -> Any:
                started = time.perf_counter()
                try:
                    return await real(*args, **kwargs)
                finally:
                    self.add(key, started)

            setattr(owner, name, waited)
        else:
            @functools.wraps(real)
            def called(*args: Any, **kwargs: Any) -> Any:
                started = time.perf_counter()
                try:
                    return real(*args, **kwargs)
                finally:
                    self.add(key, started)

            setattr(owner, name, called)

    async def measure(self, key: str, work: Any) -> Any:
        started = time.perf_counter()
        try:
            return await work
        finally:
            self.add(key, started)


async def run(episodes: int, steps: int, changes: bool) -> Phases:
    settings = Settings()
    url, stop = bench_browser.serve(bench_browser.LOCAL_PAGE)
    viewport = {"width": settings.viewport_width, "height": settings.viewport_height}
    phases = Phases()
    click = bench_browser.Click()
    args = click.parse_args({"selector": "#go"})
    call = ToolCall(name="click", arguments={"selector": "#go"})
    phases.timed(secrets, "scrub", "secrets.scrub")
    phases.timed(click, "run", "the click tool's run")
    try:
        async with BrowserHost(settings) as host:
            env = await host.new_env()
            env.configure(changes=changes)
            for name in PHASES:
                phases.timed(env, name, name)
            for _ in range(episodes):
                context = await host.browser.new_context(viewport=viewport)
                page = await context.new_page()
                await page.goto(url)
                await bench_browser.raw_observe(page, settings.screenshot_quality)
                for _ in range(steps):
                    await phases.measure("raw: page.click", page.click("#go"))
                    await phases.measure("raw: observe", bench_browser.raw_observe(page, settings.screenshot_quality))
                await context.close()
                await env.reset(Task(intent="bench", start_url=url))
                await env.observe()
                for _ in range(steps):
                    result = await phases.measure("owrl: execute", env.execute(click, args, call))
                    assert result.ok, result.error
                    await phases.measure("owrl: observe", env.observe())
                    await phases.measure("owrl's context: page.click", env.page.click("#go"))
            await env.close()
    finally:
        stop()
    return phases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--episodes", type=int, default=30)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--changes", action="store_true", help="change feedback on (an episode that reads it)")
    args = ap.parse_args()
    phases = asyncio.run(run(args.episodes, args.steps, args.changes))
    print(f"local page, {args.episodes} episodes x {args.steps} clicks, change feedback "
          f"{'on' if args.changes else 'off'}; milliseconds")
    print(f"{'phase':<32} {'n':>5} {'median':>8} {'mean':>8}")
    for key in sorted(phases.ms):
        values = phases.ms[key]
        print(f"{key:<32} {len(values):>5} {statistics.median(values):>8.2f} {statistics.mean(values):>8.2f}")
    print(f"reproduce: .venv/bin/python bench/bench_step_phases.py --episodes {args.episodes} --steps {args.steps}"
          + (" --changes" if args.changes else ""))


if __name__ == "__main__":
    main()
