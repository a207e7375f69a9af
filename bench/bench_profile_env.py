"""What the openwebrl profile's environment costs per step: the official waits against owrl's
wait for a quiet page, and PNG screenshots against JPEG, on the embedded demo shop.

    .venv/bin/python bench/bench_profile_env.py [--repeat 3]

Each arm plays the same calls, written as the released model writes them and mapped onto
the builtin tools by the profile (``to_builtin``): a scroll down and up, a hover, a click
on the page's background, a key, a new tab closed again, a goto_url back to the shop and a
one-second wait. Arms:

- ``official``: ``settle`` network idle (at most 5 s) then 1 s, and the per-tool pauses
  (hover 2 s, tabs 0.5 s, goto_url 1 s): what the profile asks by default;
- ``quiescence``: owrl's wait for a quiet page (``settle = "quiescence"``).

It prints each tool's median milliseconds per arm (the call and its wait), then one
observation's screenshot size and time in PNG and in JPEG (quality 85), medians of
``--repeat`` looks at the shop's front page.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from owrl_sdk.browser import BrowserHost
from owrl_sdk.config import Settings
from owrl_sdk.types import Task, ToolCall

CALLS = [("scroll", {"direction": "down", "amount": 0.5}), ("scroll", {"direction": "up", "amount": 0.5}),
         ("hover", {"point_2d": [500, 300]}), ("click", {"point_2d": [990, 990]}), ("press_keys", {"keys": ["Tab"]}),
         ("new_tab", {}), ("close_tab", {}), ("goto_url", {"url": "SHOP"}), ("wait", {"seconds": 1})]


async def play(env: Any, tools: dict[str, Any], shop: str, repeat: int) -> dict[str, list[float]]:
    from owrl_openwebrl.profiles import to_builtin

    times: dict[str, list[float]] = {}
    for _ in range(repeat):
        await env.reset(Task(intent="bench", start_url=shop))
        for name, arguments in CALLS:
            raw = ToolCall(name=name, arguments={k: (shop if v == "SHOP" else v) for k, v in arguments.items()})
            call = to_builtin(raw, env.viewport)
            tool = tools[call.name]
            started = time.perf_counter()
            result = await env.execute(tool, tool.parse_args(call.arguments), call)
            times.setdefault(name, []).append((time.perf_counter() - started) * 1000)
            if not result.ok:
                print(f"   {name} failed: {result.error}")
    return times


async def main(repeat: int) -> None:
    import owrl_demo
    from builtin_tools import TOOLS
    from owrl_openwebrl.profiles import SETTLE, WAITS

    shop = owrl_demo.resolve_url("demo:shop/")
    tools = {cls.name: cls() for cls in TOOLS}
    host = BrowserHost(Settings())
    arms: dict[str, dict[str, list[float]]] = {}
    try:
        for arm in ("official", "quiescence"):
            env = await host.new_env()
            if arm == "official":
                env.configure(dialogs="accept", settle=SETTLE, waits=WAITS, screenshot="png")
            else:
                env.configure(dialogs="accept", screenshot="png")
            arms[arm] = await play(env, tools, shop, repeat)
            await env.close()
        print(f"{'call':<12}" + "".join(f"{arm + ' ms':>16}" for arm in arms))
        for name in dict.fromkeys(n for n, _ in CALLS):
            print(f"{name:<12}" + "".join(f"{statistics.median(arms[a][name]):>16.0f}" for a in arms))
        totals = {a: sum(statistics.median(v) for v in t.values()) for a, t in arms.items()}
        print(f"{'all 9 calls':<12}" + "".join(f"{totals[a]:>16.0f}" for a in arms))
        print()
        for kind in ("png", "jpeg"):
            env = await host.new_env()
            env.configure(screenshot=kind)
            await env.reset(Task(intent="bench", start_url=shop))
            sizes, ms = [], []
            for _ in range(repeat):
                started = time.perf_counter()
                obs = await env.observe()
                ms.append((time.perf_counter() - started) * 1000)
                sizes.append(len(obs.screenshot or b""))
            await env.close()
            print(f"screenshot {kind:<5} {statistics.median(sizes) / 1024:8.0f} KiB   observe {statistics.median(ms):6.0f} ms")
    finally:
        await host.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    asyncio.run(main(ap.parse_args().repeat))
