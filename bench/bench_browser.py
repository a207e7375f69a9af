"""What BrowserEnv costs over raw Playwright doing the same work, in the same run.

    .venv/bin/python bench/bench_browser.py [--episodes 30] [--steps 5] [--allow-domain 127.0.0.1]

Both sides share one Chromium (launched by BrowserHost with the SDK's flags), and their
episodes alternate, so the machine's state weighs on both alike.

- reset: new context and page, goto the start page (MiniWoB++: start the episode), then
  the first observation (JPEG screenshot and ``aria_snapshot(mode="ai")``).
  BrowserEnv: ``reset(task)`` then ``observe()``.
- step: one click, then the next observation. BrowserEnv: ``execute(click)`` (with its
  what-changed feedback unless ``--no-changes``, after the wait for the page to go quiet: the ``settle_quiet_ms`` /
  ``settle_max_ms`` settings, on by default) then ``observe()``. The median of that wait
  alone (``ToolResult.page["settle_ms"]``) is printed per page.
- observe: the observation alone (BrowserEnv's ``observe()`` against one screenshot plus
  one aria snapshot).
- CPU per episode: the CPU of this process, Playwright's driver and the browser's processes
  over one whole episode (reset, steps, observations, close), read from /proc around it; the
  two sides alternate, so what the browser does for one is not counted to the other.
- load: the page's ``goto`` of a local page with 30 images, to the load event (31 requests;
  the click of a step makes none). BrowserEnv's side goes through its context, so under a
  domain policy each request is routed; raw Playwright routes nothing.

Pages: a local form page served on 127.0.0.1, and MiniWoB++'s click-button task over
file:// (``pip install miniwob``), clicking the button the utterance names.
Medians in milliseconds; ratio = BrowserEnv / raw, of the medians; paired = the median of
the ratios of measurements taken a second or so apart (the n-th of one side's episode beside
the n-th of the other's, the two run one after the other), the steadier figure when other
work loads the machine and moves both sides' times together.

``--think-ms MS`` puts a pause of 0 to MS ms (drawn per step, the same for both sides, not
measured) before each step, as a policy's thinking does between an observation and the next
call. Back to back (the default), a step starts where the last one ended against the
browser's 60 Hz frames, and a click waits for two animation frames (Playwright's stability
check): one that starts just after a screenshot, the last thing an observation does where it
stands on the call's after-snapshot, waits nearly a frame longer than one that starts after a
snapshot, raw Playwright's last call. Raw Playwright with its snapshot taken before its
screenshot, owrl's order with change feedback, measured 83.6 ms a step against 66.8 in the
other order (docs/benchmarks-journal.md, "Steps against the frame clock"). A pause of up to one frame
(17 ms) draws each step's phase at random for both sides, as a policy does.

``--allow-domain DOMAIN`` (repeatable) gives BrowserEnv's episodes a domain policy, as
``owrl run --allow-domain`` does: every request of their contexts is then routed through
the policy's checks, which is what this measures (raw Playwright routes nothing). Allow
127.0.0.1, or the local page is refused.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import http.server
import importlib.util
import os
import random
import re
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

from builtin_tools.browser import Click
from owrl_sdk.browser import BrowserHost, processes
from owrl_sdk.config import Settings
from owrl_sdk.types import Task, ToolCall

LOCAL_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Order form</title>
<style>body{font-family:sans-serif;margin:30px} label{display:block;margin:8px 0} nav a{margin-right:12px}</style>
</head><body>
<nav><a href="#">Home</a><a href="#">Products</a><a href="#">Orders</a><a href="#">Help</a></nav>
<h1>Order form</h1>
<form onsubmit="return false">
<label>Name <input name="name"></label><label>Email <input name="email" type="email"></label>
<label>Quantity <input name="qty" type="number" value="1"></label>
<label>Size <select name="size"><option>S</option><option>M</option><option>L</option></select></label>
<label><input type="checkbox" name="gift"> Gift wrap</label>
<button id="go" type="button" onclick="document.getElementById('out').textContent = 'Added ' + (++window.n)">Add to cart</button>
</form>
<p id="out" role="status">Cart is empty</p>
<ul>""" + "".join(f"<li><a href='#p{i}'>Product {i}</a> <span>${i * 3}.99</span></li>" for i in range(30)) + """</ul>
<script>window.n = 0;</script></body></html>"""

START_MINIWOB = "Math.seedrandom(arguments_seed); core.EPISODE_MAX_TIME = 60000; core.startEpisodeReal();"


def miniwob_page() -> Path | None:
    spec = importlib.util.find_spec("miniwob")
    if spec is None or not spec.submodule_search_locations:
        return None
    page = Path(list(spec.submodule_search_locations)[0]) / "html" / "miniwob" / "click-button.html"
    return page if page.exists() else None


IMAGES = 30
LOAD_PAGE = "<!doctype html><html><head><title>Gallery</title></head><body><h1>Gallery</h1>" + "".join(
    f"<img src='img{i}.svg' width='40' height='40' alt='picture {i}'>" for i in range(IMAGES)) + "</body></html>"


def serve(html: str) -> tuple[str, Callable[[], None]]:
    folder = Path(tempfile.mkdtemp(prefix="owrl-bench-"))
    (folder / "form.html").write_text(html, encoding="utf-8")
    (folder / "load.html").write_text(LOAD_PAGE, encoding="utf-8")
    for i in range(IMAGES):
        (folder / f"img{i}.svg").write_text(
            f"<svg xmlns='http://www.w3.org/2000/svg' width='40' height='40'><rect width='40' height='40' "
            f"fill='#{(i * 7919) % 0xFFFFFF:06x}'/></svg>", encoding="utf-8")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/form.html", server.shutdown


def tree_cpu() -> float:
    """CPU seconds of this process and every process under it (Playwright's driver, the
    browser and its renderers), with what each collected from its ended children."""
    tick = os.sysconf("SC_CLK_TCK")
    tree = processes.children_map()
    total = 0
    for pid in [os.getpid(), *processes.descendants(os.getpid(), tree)]:
        try:
            with open(f"/proc/{pid}/stat") as f:
                text = f.read()
        except OSError:
            continue
        total += sum(int(x) for x in text[text.rfind(")") + 2:].split()[11:15])  # utime stime cutime cstime
    return total / tick


class Timer:
    def __init__(self) -> None:
        self.wall: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}
        self.tree: dict[str, list[float]] = {}

    async def episode(self, key: str, work: Awaitable[Any]) -> Any:
        """The CPU of a whole episode, the browser's and the driver's included (``tree_cpu``)."""
        before = tree_cpu()
        result = await work
        self.tree.setdefault(key, []).append((tree_cpu() - before) * 1000)
        return result

    async def measure(self, key: str, work: Awaitable[Any]) -> Any:
        wall, cpu = time.perf_counter(), time.process_time()
        result = await work
        self.wall.setdefault(key, []).append((time.perf_counter() - wall) * 1000)
        self.cpu.setdefault(key, []).append((time.process_time() - cpu) * 1000)
        return result

    def median(self, key: str, cpu: bool = False) -> float:
        values = (self.cpu if cpu else self.wall).get(key, [])
        return statistics.median(values) if values else float("nan")

    def paired(self, row: str, figures: dict[str, list[float]] | None = None) -> float:
        """The median of owrl / raw over the measurements of ``row`` taken in the same order
        (the n-th of one side beside the n-th of the other)."""
        figures = self.wall if figures is None else figures
        pairs = list(zip(figures.get(f"{row} owrl", []), figures.get(f"{row} raw", [])))
        return statistics.median(ours / raw for ours, raw in pairs) if pairs else float("nan")


async def raw_observe(page: Any, quality: int) -> tuple[bytes, str]:
    shot = await page.screenshot(type="jpeg", quality=quality)
    aria = await page.aria_snapshot(mode="ai")
    return shot, aria


async def miniwob_start(page: Any, seed: int) -> str:
    await page.evaluate(f"(arguments_seed) => {{ {START_MINIWOB} }}", seed)
    await page.wait_for_function("WOB_TASK_READY === true")
    return await page.evaluate("core.getUtterance()")


def miniwob_selector(utterance: str) -> str:
    wanted = re.search(r'"(.+)"', utterance).group(1)
    return f'#area button:text-is("{wanted}") >> nth=0'


async def run(episodes: int, steps: int, allow_domains: list[str], settle_max_ms: int = 1500,
              changes: bool = True, think_ms: float = 0.0) -> None:
    settings = Settings(allowed_domains=allow_domains, settle_max_ms=settle_max_ms)
    quality = settings.screenshot_quality
    viewport = {"width": settings.viewport_width, "height": settings.viewport_height}
    local_url, stop_server = serve(LOCAL_PAGE)
    load_url = local_url.replace("/form.html", "/load.html")
    click_button = miniwob_page()
    timer = Timer()
    click = Click()
    rewards = {"raw": 0, "owrl": 0}
    settle_ms: dict[str, list[float]] = {"local": [], "miniwob": []}

    async def think(episode: int, step: int) -> None:
        """The pause before a step (not measured): the same on both sides for the same step."""
        if think_ms > 0:
            await asyncio.sleep(random.Random(f"{episode}:{step}").uniform(0, think_ms) / 1000)

    async with BrowserHost(settings) as host:
        env = await host.new_env()
        env.configure(changes=changes)  # --no-changes: as an episode whose change feedback nobody reads
        browser = host.browser

        async def raw_local(i: int) -> None:
            async def reset() -> Any:
                context = await browser.new_context(viewport=viewport)
                page = await context.new_page()
                await page.goto(local_url)
                await raw_observe(page, quality)
                return context, page

            context, page = await timer.measure("local reset raw", reset())
            for k in range(steps):
                await think(i, k)
                async def step() -> None:
                    await page.click("#go")
                    await raw_observe(page, quality)

                await timer.measure("local step raw", step())
            await timer.measure("local observe raw", raw_observe(page, quality))
            await timer.measure("local load raw", page.goto(load_url, wait_until="load"))
            await context.close()

        async def owrl_local(i: int) -> None:
            async def reset() -> None:
                await env.reset(Task(intent="add to cart", start_url=local_url))
                await env.observe()

            await timer.measure("local reset owrl", reset())
            args = click.parse_args({"selector": "#go"})
            call = ToolCall(name="click", arguments={"selector": "#go"})
            for k in range(steps):
                await think(i, k)
                async def step() -> None:
                    result = await env.execute(click, args, call)
                    assert result.ok, result.error
                    settle_ms["local"].append(float((result.page or {}).get("settle_ms", 0.0)))
                    await env.observe()

                await timer.measure("local step owrl", step())
            await timer.measure("local observe owrl", env.observe())
            await timer.measure("local load owrl", env.page.goto(load_url, wait_until="load"))
            await env.close()

        async def raw_miniwob(seed: int) -> None:
            async def reset() -> Any:
                context = await browser.new_context(viewport=viewport)
                page = await context.new_page()
                await page.goto(click_button.as_uri())
                utterance = await miniwob_start(page, seed)
                await raw_observe(page, quality)
                return context, page, utterance

            context, page, utterance = await timer.measure("miniwob reset raw", reset())
            await think(seed, 0)

            async def step() -> None:
                await page.click(miniwob_selector(utterance))
                await raw_observe(page, quality)

            await timer.measure("miniwob step raw", step())
            rewards["raw"] += await page.evaluate("WOB_RAW_REWARD_GLOBAL") == 1
            await context.close()

        async def owrl_miniwob(seed: int) -> None:
            async def reset() -> str:
                await env.reset(Task(intent="click-button", start_url=click_button.as_uri()))
                utterance = await miniwob_start(env.page, seed)
                await env.observe()
                return utterance

            utterance = await timer.measure("miniwob reset owrl", reset())
            selector = miniwob_selector(utterance)
            args = click.parse_args({"selector": selector})
            await think(seed, 0)

            async def step() -> None:
                result = await env.execute(click, args, ToolCall(name="click", arguments={"selector": selector}))
                assert result.ok, result.error
                settle_ms["miniwob"].append(float((result.page or {}).get("settle_ms", 0.0)))
                await env.observe()

            await timer.measure("miniwob step owrl", step())
            rewards["owrl"] += await env.page.evaluate("WOB_RAW_REWARD_GLOBAL") == 1
            await env.close()

        # warm-up, not counted
        await raw_local(-1)
        await owrl_local(-1)
        timer.wall.clear()
        timer.cpu.clear()
        timer.tree.clear()
        for waits in settle_ms.values():
            waits.clear()
        for i in range(episodes):
            order = [raw_local, owrl_local] if i % 2 == 0 else [owrl_local, raw_local]
            for work in order:
                await timer.episode(f"local episode {work.__name__.split('_')[0]}", work(i))
            if click_button is not None:
                order = [raw_miniwob, owrl_miniwob] if i % 2 == 0 else [owrl_miniwob, raw_miniwob]
                for work in order:
                    await timer.episode(f"miniwob episode {work.__name__.split('_')[0]}", work(i))
    stop_server()

    policy = f"; BrowserEnv's domain policy allows {', '.join(allow_domains)}" if allow_domains else ""
    what = "" if changes else "; no change feedback (no after-call snapshot)"
    what += f"; a pause of 0 to {think_ms:g} ms before each step" if think_ms > 0 else ""
    print(f"BrowserEnv vs raw Playwright, medians in ms ({episodes} episodes; local: {steps} steps each{policy}{what})")
    print(f"{'':18}{'raw':>9}{'owrl':>9}{'ratio':>8}{'paired':>8}   {'py-cpu raw':>11}{'py-cpu owrl':>12}")
    rows = ["local reset", "local step", "local observe", "local load"]
    if click_button is not None:
        rows += ["miniwob reset", "miniwob step"]
    for row in rows:
        raw, ours = timer.median(f"{row} raw"), timer.median(f"{row} owrl")
        print(
            f"{row:18}{raw:9.1f}{ours:9.1f}{ours / raw:8.2f}{timer.paired(row):8.2f}   "
            f"{timer.median(f'{row} raw', cpu=True):11.1f}{timer.median(f'{row} owrl', cpu=True):12.1f}"
        )
    print("CPU per episode in ms (this process, Playwright's driver and the browser)")
    print(f"{'':18}{'raw':>9}{'owrl':>9}{'ratio':>8}{'paired':>8}")
    for row in ("local episode", "miniwob episode"):
        raw_cpu, our_cpu = (statistics.median(timer.tree[f"{row} {side}"]) if timer.tree.get(f"{row} {side}")
                            else float("nan") for side in ("raw", "owrl"))
        print(f"{row:18}{raw_cpu:9.1f}{our_cpu:9.1f}{our_cpu / raw_cpu:8.2f}{timer.paired(row, timer.tree):8.2f}")
    if click_button is None:
        print("MiniWoB++ rows skipped: `pip install miniwob` to add them")
    else:
        print(f"MiniWoB++ click-button solved: raw {rewards['raw']}/{episodes}, owrl {rewards['owrl']}/{episodes}")
    waits = ", ".join(f"{name} {statistics.median(values):.1f}" for name, values in settle_ms.items() if values)
    print(f"settle wait per owrl step (median ms; settle_quiet_ms={settings.settle_quiet_ms}, "
          f"settle_max_ms={settings.settle_max_ms}): {waits}")
    print("py-cpu: CPU time of this Python process (Playwright client + SDK), not the browser's")
    allow = "".join(f" --allow-domain {d}" for d in allow_domains)
    settle = f" --settle-max-ms {settle_max_ms}" if settle_max_ms != Settings().settle_max_ms else ""
    off = "" if changes else " --no-changes"
    off += f" --think-ms {think_ms:g}" if think_ms > 0 else ""
    print(f"reproduce: .venv/bin/python bench/bench_browser.py --episodes {episodes} --steps {steps}{allow}{settle}{off}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--allow-domain", action="append", default=[], metavar="DOMAIN",
                        help="give BrowserEnv's episodes this allowed domain (repeatable): measures the routed case")
    parser.add_argument("--settle-max-ms", type=int, default=Settings().settle_max_ms,
                        help="BrowserEnv's settle_max_ms (0: no wait for the page to go quiet, to see what it costs)")
    parser.add_argument("--no-changes", dest="changes", action="store_false",
                        help="BrowserEnv without change feedback (configure(changes=False)): what an episode pays "
                             "when nothing reads what its calls changed")
    parser.add_argument("--think-ms", type=float, default=0.0, metavar="MS",
                        help="before each step, a pause of 0 to MS ms (the same on both sides, not measured), as a "
                             "policy's thinking puts between an observation and the next call (see the module doc)")
    options = parser.parse_args()
    asyncio.run(run(options.episodes, options.steps, options.allow_domain, options.settle_max_ms, options.changes,
                    options.think_ms))


if __name__ == "__main__":
    sys.exit(main())
