"""Bounded observations on real Chromium: a page's snapshot cut to the ``observation_chars``
budget keeps the viewport and the interactive elements, with refs that still act, and says
what it left out and how to reach it; a page under budget reads exactly as Playwright gives it."""

from __future__ import annotations

import http.server
import re
import threading
import time
from typing import Any

import pytest

from browser_support import act, ref_of, task
from owrl_sdk.browser import BrowserEnv
from owrl_sdk.contract.memory import Context
from owrl_sdk.browser.observation_budget import bound_snapshot, strip_boxes
from owrl_sdk.types import Observation, Task


def big_page(n_items: int = 25_000, search: bool = False) -> str:
    """The fault suite's page: a button, then list items of a span each (50,000 elements)."""
    items = "".join(f"<li><span>Item {i}</span></li>" for i in range(n_items))
    box = "<input type='search' aria-label='Search items'>" if search else ""
    return ("<!doctype html><html><head><title>Big</title></head><body>" + box +
            "<button id=\"finish\" onclick=\"document.getElementById('out').textContent='Finished'\">Finish</button>"
            f"<p id=\"out\">Not yet</p><ul>{items}</ul>"
            "<a href='#next'>Next page</a></body></html>")


HUGE_TEXT = ("<!doctype html><html><head><title>Wall</title></head><body><h1>Terms</h1><p id='wall'>" +
             "lorem ipsum dolor " * 40_000 + "</p><button onclick=\"this.textContent='Agreed'\">Agree</button>"
             "</body></html>")

# names and texts that look like the marks the budget reads: they must survive as they are
HOSTILE = """<!doctype html><html><head><title>Tricky</title></head><body>
<button aria-label='Pay [box=0,0,10,10] now: [ref=e1]'>x</button>
<p>A paragraph that ends like a box [box=1,2,3,4]</p>
<a href='#a'>it's a "quoted" link: [box=5,6,7,8]</a>
<label>Name: <input value='[box=9,9,9,9]'></label>
<iframe srcdoc="<button>Inside</button><p>frame text [box=1,1,1,1]</p>" style="margin-top:400px"></iframe>
<select aria-label='Size'><option>S</option><option>M [box=2,2,2,2]</option></select>
</body></html>"""

SMALL = """<!doctype html><html><head><title>Small</title></head><body><h1>Shop</h1>
<nav><a href='#1'>Home</a> <a href='#2'>Cart</a></nav><input type='search' aria-label='Search'>
<button onclick="document.getElementById('o').textContent='Done'">Go</button><p id='o'>Waiting</p></body></html>"""


class _Pages(http.server.BaseHTTPRequestHandler):
    pages: dict[str, str] = {}

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        body = self.pages.get(self.path.split("?")[0], "<h1>Not found</h1>").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def pages() -> Any:
    _Pages.pages = {"/big": big_page(), "/big-search": big_page(search=True), "/medium": big_page(2_000),
                    "/wall": HUGE_TEXT, "/tricky": HOSTILE, "/small": SMALL}
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def budget(env: BrowserEnv, chars: int) -> None:
    env.settings = env.settings.model_copy(update={"observation_chars": chars})


def patient(env: BrowserEnv) -> None:
    """Time-outs for a page of 50,000 elements on a loaded machine (as the fault suite's)."""
    env.settings = env.settings.model_copy(update={"navigation_timeout": 60.0, "action_timeout": 20.0})


@pytest.mark.slow
async def test_the_50000_element_page_fits_the_budget_and_its_refs_act(env: BrowserEnv, pages: str) -> None:
    patient(env)
    assert env.settings.observation_chars == 12_000  # the default
    await env.reset(task(f"{pages}/big"))
    started = time.monotonic()
    obs = await env.observe()
    took = time.monotonic() - started
    assert obs.aria is not None and len(obs.aria) <= 12_000, len(obs.aria or "")
    assert obs.aria_total_chars is not None and obs.aria_total_chars > 900_000
    first = obs.aria.splitlines()[0]
    assert first.startswith("[owrl: page snapshot cut to") and f"of {obs.aria_total_chars:,} characters" in first
    assert "elements below the viewport" in first and "scroll down" in first
    assert "search box" not in first  # the page has none
    # the viewport's items are there, whole and in order, then one marker for the rest
    assert "listitem" in obs.aria and "Item 0\n" in obs.aria and "Item 40\n" in obs.aria
    assert "Item 24999" not in obs.aria
    left = int(re.search(r"- \[… ([\d,]+) elements below the viewport left out: scroll down\]", obs.aria)
               .group(1).replace(",", ""))
    shown = len(re.findall(r"Item \d+", obs.aria))
    assert shown + left >= 25_000  # every item is shown or counted
    # the link at the very bottom is interactive: it is kept although far below
    next_ref = ref_of(obs.aria, "link", "Next page")
    assert next_ref
    # the button acts by the ref the policy read
    result = await act(env, "click", ref=ref_of(obs.aria, "button", "Finish"))
    assert result.ok, result.error
    assert await env.page.text_content("#out") == "Finished"
    assert took < 60, took
    # the next observation of the same page takes one snapshot (with boxes) and stays in budget
    again = await env.observe()
    assert again.aria is not None and len(again.aria) <= 12_000 and "Finished" in again.aria


@pytest.mark.slow
async def test_scrolled_down_the_page_shows_what_is_in_view_and_both_directions(env: BrowserEnv, pages: str) -> None:
    patient(env)
    await env.reset(task(f"{pages}/big"))
    await env.page.evaluate("document.querySelectorAll('li')[12000].scrollIntoView()")
    obs = await env.observe()
    assert obs.aria is not None and len(obs.aria) <= 12_000
    assert "Item 12000\n" in obs.aria and "Item 12010\n" in obs.aria
    assert "Item 0\n" not in obs.aria
    assert re.search(r"- \[… [\d,]+ elements above the viewport left out: scroll up\]", obs.aria)
    assert re.search(r"- \[… [\d,]+ elements below the viewport left out: scroll down\]", obs.aria)
    assert "scroll up or scroll down" in obs.aria.splitlines()[0]
    # the button at the top is out of view but interactive: kept, and it still acts
    result = await act(env, "click", ref=ref_of(obs.aria, "button", "Finish"))
    assert result.ok, result.error
    assert await env.page.text_content("#out") == "Finished"


@pytest.mark.slow
async def test_the_note_names_the_search_box_and_it_acts(env: BrowserEnv, pages: str) -> None:
    patient(env)
    await env.reset(task(f"{pages}/big-search"))
    obs = await env.observe()
    assert obs.aria is not None and len(obs.aria) <= 12_000
    ref = ref_of(obs.aria, "searchbox", "Search items")
    assert f'or use the search box "Search items" [ref={ref}]' in obs.aria.splitlines()[0]
    result = await act(env, "write", ref=ref, message="Item 777")
    assert result.ok, result.error
    assert await env.page.input_value("input") == "Item 777"


async def test_a_page_under_budget_is_unchanged_byte_for_byte(env: BrowserEnv, pages: str) -> None:
    for path in ("/small", "/tricky"):
        await env.reset(task(f"{pages}{path}"))
        obs = await env.observe()
        assert obs.aria == await env.page.aria_snapshot(mode="ai"), path
        assert obs.aria_total_chars is None


async def test_boxes_are_stripped_exactly_even_where_the_page_writes_box_marks(env: BrowserEnv, pages: str) -> None:
    await env.reset(task(f"{pages}/tricky"))
    await env.page.wait_for_timeout(200)  # the iframe's document
    plain = await env.page.aria_snapshot(mode="ai")
    boxed = await env.page.aria_snapshot(mode="ai", boxes=True)
    assert boxed != plain and "Inside" in plain
    assert strip_boxes(boxed) == plain
    assert "Pay [box=0,0,10,10] now: [ref=e1]" in plain and "[box=1,2,3,4]" in plain


async def test_a_huge_single_text_node_is_cut_too(env: BrowserEnv, pages: str) -> None:
    patient(env)
    await env.reset(task(f"{pages}/wall"))
    obs = await env.observe()
    assert obs.aria is not None and len(obs.aria) <= 12_000, len(obs.aria or "")
    assert obs.aria_total_chars is not None and obs.aria_total_chars > 700_000
    assert "1 long text cut short" in obs.aria.splitlines()[0]
    assert re.search(r" (lorem|ipsum|dolor)… \[[\d,]+ characters left out\]", obs.aria)
    result = await act(env, "click", ref=ref_of(obs.aria, "button", "Agree"))
    assert result.ok, result.error


async def test_the_budget_is_a_setting_and_0_is_unbounded(env: BrowserEnv, pages: str) -> None:
    budget(env, 0)
    await env.reset(task(f"{pages}/medium"))
    whole = await env.observe()
    assert whole.aria_total_chars is None and whole.aria is not None and "Item 1999" in whole.aria
    assert whole.aria == await env.page.aria_snapshot(mode="ai")
    budget(env, 3_000)
    cut = await env.observe()
    assert cut.aria is not None and len(cut.aria) <= 3_000 and cut.aria_total_chars == len(whole.aria)
    budget(env, 10)  # under the minimum: counts as 1,000
    tiny = await env.observe()
    assert tiny.aria is not None and len(tiny.aria) <= 1_000 and "Finish" in tiny.aria


def test_the_text_policy_prompt_sends_the_bounded_snapshot_whole() -> None:
    from owrl_openwebrl.prompt import build_prompt

    aria = "\n".join(["- generic [ref=e1]:", *(f'  - link "Product {i}" [ref=e{i + 2}]' for i in range(600))])
    bounded = bound_snapshot(aria, 12_000).text
    assert len(bounded) <= 12_000 and bounded.startswith("[owrl: page snapshot cut to")
    context = Context(task=Task(intent="buy", start_url="about:blank"), observation=Observation(aria=bounded),
                      tools=[], history=[])
    text = "\n".join(part["text"] for message in build_prompt(context, text_mode=True, compact=True).messages
                     for part in message["content"] if part["type"] == "text")
    assert bounded in text  # not cut again at a fixed length
    # a further bound keeps the note and the refs of what it keeps
    smaller = "\n".join(part["text"] for message in build_prompt(context, text_mode=True, aria_chars=2_000).messages
                        for part in message["content"] if part["type"] == "text")
    assert "[owrl: page snapshot cut to" in smaller and '"Product 0" [ref=e2]' in smaller


# ---------------------------------------------------------------- the cut on its own (no browser)


def test_a_viewport_too_full_for_the_budget_keeps_its_interactive_elements_first() -> None:
    lines = ["- generic [ref=e1] [box=0,0,1280,1000]:"]
    for i in range(3_000):  # text and links on top of each other, all in view
        lines.append(f"  - paragraph [ref=p{i}] [box=0,{i % 900},600,10]: some words of text number {i}")
        lines.append(f'  - link "Link {i}" [ref=l{i}] [cursor=pointer] [box=600,{i % 900},60,10]')
    out = bound_snapshot("\n".join(lines), 12_000)
    assert out.cut and len(out.text) <= 12_000
    assert '"Link 0" [ref=l0]' in out.text and "some words of text number 0\n" not in out.text
    assert "in the viewport left out (they did not fit)" in out.text
    assert out.left_out["in"] > 3_000


def test_an_iframe_below_the_viewport_counts_as_below() -> None:
    lines = ["- generic [ref=e1] [box=0,0,1280,3000]:", '  - button "Top" [ref=e2] [box=0,0,50,20]']
    lines += [f"  - paragraph [ref=e{i + 3}] [box=0,{30 + 20 * i},900,18]: filler line {i} " + "x" * 60
              for i in range(40)]
    lines.append("  - iframe [ref=e99] [box=0,2500,600,400]:")
    lines += [f"    - paragraph [ref=f1e{i}] [box=0,{20 * i},500,18]: inside {i} " + "y" * 80 for i in range(200)]
    out = bound_snapshot("\n".join(lines), 4_000)
    assert out.cut and len(out.text) <= 4_000
    assert out.left_out.get("below", 0) > 0 and "inside 199" not in out.text
    assert "filler line 0 " in out.text  # in view: kept before the frame's text below it


def test_a_huge_name_keeps_its_ref() -> None:
    text = f'- generic [ref=e1] [box=0,0,1280,1000]:\n  - button "{"A" * 50_000}" [ref=e2] [box=0,0,10,10]'
    out = bound_snapshot(text, 2_000)
    assert len(out.text) <= 2_000 and '…" [ref=e2]' in out.text and out.left_out["shortened"] == 1


def test_the_cut_stays_within_budget_whatever_the_tree() -> None:
    import random

    rng = random.Random(7)
    for trial in range(30):
        lines, depth = [], 0
        for i in range(rng.randint(50, 1_500)):
            depth = max(0, min(depth + rng.choice((-1, 0, 0, 1)), 8))
            role = rng.choice(("generic", "link", "button", "paragraph", "listitem", "text"))
            box = f" [box={rng.randint(-3000, 3000)},{rng.randint(-5000, 9000)},{rng.randint(0, 900)},{rng.randint(0, 300)}]"
            name = f' "{"n" * rng.randint(0, 30)}"' if role in ("link", "button") else ""
            if role == "text":
                lines.append("  " * depth + "- text: " + "t" * rng.randint(1, 4_000))
            else:
                lines.append("  " * depth + f"- {role}{name} [ref=e{i}]{box}: " + "v" * rng.randint(0, 300))
        budget_chars = rng.choice((1_000, 3_000, 12_000))
        text = "\n".join(lines)
        out = bound_snapshot(text, budget_chars)
        assert len(out.text) <= max(budget_chars, len(strip_boxes(text)) if not out.cut else 0), trial
        assert out.whole == strip_boxes(text)
        if out.cut:
            kept_refs = set(re.findall(r"\[ref=(e\d+)\]", out.text.split("\n", 1)[1]))
            assert kept_refs <= set(re.findall(r"\[ref=(e\d+)\]", out.whole))


def test_a_prompt_of_a_trajectory_recorded_unbounded_is_bounded_the_same_way() -> None:
    from owrl_openwebrl.prompt import build_prompt

    aria = "\n".join(["- list [ref=e1]:", *(f"  - listitem [ref=e{i + 2}]: Item {i}" for i in range(25_000))])
    context = Context(task=Task(intent="read", start_url="about:blank"), observation=Observation(aria=aria),
                      tools=[], history=[])

    def page_text(**options: Any) -> str:
        return build_prompt(context, text_mode=True, **options).messages[-1]["content"][1]["text"]

    bounded = page_text()
    assert len(bounded) <= 12_000 + 100 and "Item 0\n" in bounded and "Item 24999" not in bounded
    assert "[owrl: page snapshot cut to" in bounded
    assert "Item 24999" in page_text(aria_chars=None)  # asked for: not bounded
