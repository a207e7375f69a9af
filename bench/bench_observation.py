"""How big an observation's page snapshot is, before and after the ``observation_chars`` budget,
and what observing costs, per step, on the demo shop, MiniWoB++ and the fault suite's pages.

    .venv/bin/python bench/bench_observation.py [--budget 12000] [--repeat 3]

Each step is one ``BrowserEnv.observe()`` (screenshot and aria snapshot) on a page as a
policy would first see it: the demo shop's pages (its cookie banner up), MiniWoB++ tasks
once their episode started (``pip install miniwob``), and the fault suite's pages
(tests/faults/fault_support.py), the page of 50,000 elements at its top and scrolled to
its middle. A line per step: the snapshot's characters whole, then as the policy reads
them (``cut`` when the budget cut them), and the observe time in milliseconds with the
budget (the first observe of a page, then the median of the next ones: a page found over
budget is snapshotted once more, with element boxes, and its next observes take only that
one) and with none (``observation_chars`` 0, median).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Optional

from owrl_sdk.browser import BrowserHost
from owrl_sdk.config import Settings
from owrl_sdk.types import Task

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "faults"))

SHOP_PAGES = ["/", "/products", "/products?category=shoes", "/product/chelsea-boots", "/search?q=shirt", "/cart",
              "/login"]
MINIWOB_TASKS = ["click-button", "click-checkboxes-large", "book-flight", "email-inbox", "social-media-all",
                 "search-engine"]
FAULT_PAGES = ["/steps", "/login", "/captcha", "/big"]

Step = tuple[str, str, Optional[Callable[[Any], Awaitable[Any]]]]  # (label, url, prepare the page)


def shop_steps() -> list[Step]:
    import owrl_demo

    return [(f"demo-shop {path}", owrl_demo.resolve_url(f"demo:shop{path}"), None) for path in SHOP_PAGES]


def miniwob_steps() -> list[Step]:
    try:
        from owrl_miniwob import START_JS, pages_dir
        root = pages_dir()
    except Exception:  # noqa: BLE001 - the miniwob package is optional
        print("miniwob: not installed (pip install miniwob); skipped")
        return []

    async def start(page: Any) -> None:
        await page.wait_for_function("() => typeof core !== 'undefined' && !!core.startEpisodeReal")
        await page.evaluate(START_JS, [1, 60_000])
        await page.wait_for_function("() => window.WOB_TASK_READY === true", timeout=5000)

    return [(f"miniwob {name}", (root / f"{name}.html").as_uri(), start) for name in MINIWOB_TASKS
            if (root / f"{name}.html").exists()]


def fault_steps() -> tuple[list[Step], Callable[[], None]]:
    from fault_support import start_server

    server, base = start_server()

    async def middle(page: Any) -> None:
        await page.evaluate("document.querySelectorAll('li')[12000].scrollIntoView()")

    steps: list[Step] = [(f"faults {path}", f"{base}{path}", None) for path in FAULT_PAGES]
    steps.append(("faults /big (scrolled to item 12000)", f"{base}/big", middle))
    return steps, server.shutdown


async def run(budget: int, repeat: int) -> None:
    settings = Settings(observation_chars=budget, navigation_timeout=120.0, action_timeout=30.0)
    unbounded = settings.model_copy(update={"observation_chars": 0})
    faults, stop = fault_steps()
    steps = shop_steps() + miniwob_steps() + faults
    print(f"observation budget: {budget:,} characters (observation_chars); median of {repeat} observes")
    try:
        async with BrowserHost(settings) as host:
            env = await host.new_env()
            for label, url, prepare in steps:
                env.settings = settings
                await env.reset(Task(intent="observe", start_url=url))
                if prepare is not None:
                    await prepare(env.page)
                timings: dict[str, list[float]] = {"bounded": [], "unbounded": []}
                obs: Any = None
                for key, chosen in (("bounded", settings), ("unbounded", unbounded)):
                    env.settings = chosen
                    for _ in range(repeat):
                        started = time.perf_counter()
                        seen = await env.observe()
                        timings[key].append((time.perf_counter() - started) * 1000)
                        if key == "bounded" and obs is None:
                            obs = seen
                before = obs.aria_total_chars or len(obs.aria or "")
                after = len(obs.aria or "")
                mark = "cut" if obs.aria_total_chars else "whole"
                bounded = timings["bounded"]
                print(f"{label:<38} chars {before:>9,} -> {after:>6,} ({mark:<5})  observe first {bounded[0]:>6.0f} ms, "
                      f"then {statistics.median(bounded[1:] or bounded):>6.0f} ms  (unbounded "
                      f"{statistics.median(timings['unbounded']):>6.0f} ms)", flush=True)
            await env.close()
    finally:
        stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, default=Settings().observation_chars)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(run(args.budget, args.repeat))


if __name__ == "__main__":
    main()
