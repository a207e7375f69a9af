"""Every demo-shop task's oracle turns, replayed in a real Chromium, pass the task's own checks.

The replay drives raw async Playwright through a small interpreter of owrl's tool calls
(selector targets only) and checks each call's ``expect`` by polling the page for up to
2 s, as owrl does. The suite's ``check`` then reads ``/api/state`` with the cookies of
the episode's browser context. One browser for the module, a fresh context per task.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from typing import Any, Optional

import pytest
import pytest_asyncio
from playwright.async_api import async_playwright

from owrl_demo import DemoShopSuite, load_tasks
from owrl_sdk.browser.chromium import find_chromium
from owrl_sdk.config import Settings
from owrl_sdk.types import Outcome, PolicyInfo, Trajectory

CHROMIUM = find_chromium(check_managed=False, headless=True).path  # the one owrl launches headless
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"needs Chromium at {CHROMIUM}"),
]

EXPECT_TIMEOUT = 2.0
ACTION_TIMEOUT_MS = 5000
CONCURRENCY = 3  # contexts replaying at once; the machine has two cores
TASKS = load_tasks()


class EpisodeEnv:
    """Stands in for owrl's browser environment (written separately): holds the episode's context."""

    def __init__(self, context: Any):
        self.context = context


class ExpectationFailed(AssertionError):
    pass


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def chromium():
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        await browser.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def suite():
    demo = DemoShopSuite(Settings())
    await demo.setup()
    yield demo
    await demo.teardown()


async def _visible_text(page: Any) -> str:
    try:
        return await page.locator("body").inner_text(timeout=500)
    except Exception:  # mid-navigation: no document to read yet
        return ""


async def verify(page: Any, expect: dict[str, Any]) -> None:
    """Poll until every key of ``expect`` holds, or fail after EXPECT_TIMEOUT seconds."""
    deadline = time.monotonic() + EXPECT_TIMEOUT
    while True:
        problems = []
        url = page.url
        if "url_contains" in expect and expect["url_contains"] not in url:
            problems.append(f"url {url} lacks {expect['url_contains']!r}")
        if "url_matches" in expect and not re.search(expect["url_matches"], url):
            problems.append(f"url {url} does not match {expect['url_matches']!r}")
        if "title_contains" in expect and expect["title_contains"] not in await page.title():
            problems.append(f"title lacks {expect['title_contains']!r}")
        if "text_visible" in expect or "text_absent" in expect:
            text = await _visible_text(page)
            if "text_visible" in expect and expect["text_visible"] not in text:
                problems.append(f"{expect['text_visible']!r} not visible")
            if "text_absent" in expect and expect["text_absent"] in text:
                problems.append(f"{expect['text_absent']!r} still visible")
        if "element_visible" in expect:
            selector = expect["element_visible"]
            selector = selector["selector"] if isinstance(selector, dict) else selector
            if not await page.locator(selector).first.is_visible():
                problems.append(f"{selector} not visible")
        unknown = set(expect) - {"url_contains", "url_matches", "title_contains", "text_visible", "text_absent",
                                 "element_visible"}
        assert not unknown, f"the replay does not know the expectation keys {sorted(unknown)}"
        if not problems:
            return
        if time.monotonic() > deadline:
            raise ExpectationFailed("; ".join(problems))
        await asyncio.sleep(0.1)


async def run_call(page: Any, name: str, args: dict[str, Any]) -> Optional[str]:
    """Run one tool call; returns the answer for ``done``."""
    def target():
        assert set(args) & {"selector"}, f"{name}: oracle calls target elements by selector, got {args}"
        return page.locator(args["selector"])

    if name == "click":
        await target().click(click_count=int(args.get("clicks", 1)), button=args.get("button", "left"),
                             timeout=ACTION_TIMEOUT_MS)
    elif name == "write":
        if "selector" in args:
            await target().fill(args["message"], timeout=ACTION_TIMEOUT_MS)
        else:
            await page.keyboard.type(args["message"])
    elif name == "select_option":
        choice = {k: args[k] for k in ("value", "label") if k in args}
        await target().select_option(timeout=ACTION_TIMEOUT_MS, **choice)
    elif name == "hover":
        await target().hover(timeout=ACTION_TIMEOUT_MS)
    elif name == "press_keys":
        keys = args["keys"] if isinstance(args["keys"], list) else [args["keys"]]
        combos = ["+".join(keys)] if args.get("is_hotkey") else keys
        for _ in range(int(args.get("presses", 1))):
            for combo in combos:
                await page.keyboard.press(combo)
    elif name == "scroll":
        sign = -1 if args.get("direction") in ("up", "left") else 1
        dx, dy = (sign * 100 * args.get("amount", 3), 0) if args.get("direction") in ("left", "right") \
            else (0, sign * 100 * args.get("amount", 3))
        await page.mouse.wheel(dx, dy)
    elif name == "goto_url":
        await page.goto(args["url"])
    elif name == "go_back":
        await page.go_back()
    elif name == "wait":
        await asyncio.sleep(float(args.get("seconds", 1)))
    elif name == "done":
        return args.get("response", "")
    else:
        raise AssertionError(f"the replay does not know the tool {name!r}")
    try:
        await page.wait_for_load_state("load", timeout=ACTION_TIMEOUT_MS)
    except Exception:
        pass
    return None


async def replay(page: Any, turns: list[dict[str, Any]]) -> Optional[str]:
    for t, turn in enumerate(turns):
        for c, call in enumerate(turn["calls"]):
            where = f"turn {t + 1} ({turn.get('thought', '')!r}), call {c + 1} {call['name']}{call['arguments']}"
            try:
                answer = await run_call(page, call["name"], call["arguments"])
                if call.get("expect"):
                    await verify(page, call["expect"])
            except Exception as err:
                raise AssertionError(f"{where}: {err}") from None
            if call["name"] == "done":
                return answer
    raise AssertionError("the oracle never called done")


async def solve(chromium: Any, suite: DemoShopSuite, task: Any) -> Any:
    """Replay one task's oracle in a fresh context; the suite's verdict on it."""
    context = await chromium.new_context(viewport={"width": 1280, "height": 1000})
    try:
        page = await context.new_page()
        await page.goto(task.start_url)
        answer = await replay(page, task.metadata["oracle_turns"])
        trajectory = Trajectory(task=task, policy=PolicyInfo(name="oracle"),
                                outcome=Outcome(status="success", answer=answer))
        return await suite.check(EpisodeEnv(context), task, trajectory)
    finally:
        await context.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def verdicts(request, chromium, suite):
    """The selected tasks, replayed a few at a time (most of a replay is waiting on the page)."""
    wanted = set()
    for item in request.session.items:
        spec = getattr(item, "callspec", None)
        if item.module is request.module and spec is not None and "task_id" in spec.params:
            wanted.add(spec.params["task_id"])
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(task: Any) -> Any:
        async with gate:
            try:
                return await solve(chromium, suite, task)
            except AssertionError as err:
                return err

    tasks = [t for t in suite.tasks() if t.id in wanted]
    results = await asyncio.gather(*(one(t) for t in tasks))
    return dict(zip((t.id for t in tasks), results))


@pytest.mark.slow
@pytest.mark.parametrize("task_id", [t.id for t in TASKS])
async def test_oracle_solves_task(task_id, verdicts):
    verdict = verdicts[task_id]
    if isinstance(verdict, Exception):
        pytest.fail(f"{task_id}: {verdict}", pytrace=False)
    assert verdict is not None and verdict.success, f"{task_id}: {verdict.reason if verdict else 'no verdict'}"
    assert verdict.score == 1.0


async def test_a_session_that_did_nothing_fails_the_checks(chromium, suite):
    """The checks are not vacuous: an untouched session fails every task that has state checks."""
    context = await chromium.new_context()
    try:
        page = await context.new_page()
        await page.goto(suite.base_url + "/")
        for task in suite.tasks():
            trajectory = Trajectory(task=task, policy=PolicyInfo(name="idle"), outcome=Outcome(status="fail"))
            verdict = await suite.check(EpisodeEnv(context), task, trajectory)
            assert not verdict.success, f"{task.id} passes without anything being done: {verdict.reason}"
    finally:
        await context.close()
