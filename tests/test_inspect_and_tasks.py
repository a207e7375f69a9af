"""`owrl inspect URL` (selectors that each find their element) and `owrl tasks [SUITE]`."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import pytest

from owrl_cli import owrl
from owrl_sdk.browser.chromium import find_chromium
from owrl_sdk.cli import main
from owrl_sdk.commands.inspect import _LINE, _unquote, parse_snapshot, role_selector

needs_chromium = pytest.mark.skipif(find_chromium(check_managed=False) is None, reason="no Chromium on this machine")

# Every way a selector can be hard to get right: names that are prefixes of others or differ by
# case, shared names, no name, quotes and a backslash, a native <select>, ARIA options and tabs,
# a hidden button, and buttons inside two iframes (one with an id, one without).
# A click on an element with data-id writes "clicked ID" in #log (from inside the iframes too).
TRICKY = r"""<!doctype html><title>Tricky</title>
<h1>Tricky page</h1>
<output id="log">nothing clicked</output>
<button data-id="add">Add</button> <button data-id="add-to-cart">Add to cart</button>
<button data-id="add-lower">add to cart</button>
<ul><li>Shirt <button data-id="remove-1">Remove</button></li><li>Hat <button data-id="remove-2">Remove</button></li></ul>
<button data-id="icon-1"><svg width="10" height="10"></svg></button>
<button data-id="icon-2" aria-label=""><svg width="12" height="12"></svg></button>
<button data-id="quote">Say "hi" \ now</button>
<label><input type="checkbox"> Keep me signed in</label>
<label>Country <select><option>France</option><option>Spain</option></select></label>
<div role="listbox" aria-label="Colour"><div role="option" aria-selected="true" data-id="red">Red</div>
  <div role="option" data-id="blue">Blue</div></div>
<div role="tablist"><button role="tab" data-id="details">Details</button><button role="tab" data-id="reviews">Reviews</button></div>
<a href="#one" data-id="more-1">Read more</a> <a href="#two" data-id="more-2">Read more</a>
<button style="display:none">Hidden</button>
<script>
  const log = document.getElementById("log");
  document.addEventListener("click", (e) => {
    const el = e.target.closest("[data-id]");
    if (el) log.textContent = "clicked " + el.dataset.id;
  });
  for (const [id, n] of [["pay", 1], ["", 2]]) {
    const f = document.createElement("iframe");
    if (id) f.id = id;
    f.srcdoc = '<button onclick="parent.document.getElementById(\'log\').textContent=\'clicked pay-' + n +
               '\'">Pay now</button><input aria-label="Card number">';
    document.body.append(f);
  }
</script>
"""


def cli(capsys: Any, *args: str) -> tuple[int, str, str]:
    """`owrl ARGS` in this process: (exit code, stdout, stderr)."""
    try:
        main(list(args))
        code = 0
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
    out, err = capsys.readouterr()
    return code, out, err


def inspect_json(capsys: Any, url: str) -> list[dict[str, Any]]:
    code, out, err = cli(capsys, "inspect", url, "--json")
    assert code == 0, err
    return json.loads(out)


async def check_selectors(url: str, elements: list[dict[str, Any]]) -> None:
    """Each selector, resolved as a flow call resolves it (``BrowserEnv.element``), finds exactly
    one element, with the listed role and name, and the same element as the listed ref."""
    from owrl_sdk.browser import BrowserHost
    from owrl_sdk.config import Settings
    from owrl_sdk.types import Task

    async with BrowserHost(Settings()) as host:
        env = await host.new_env()
        await env.reset(Task(intent="check", start_url=url))
        aria = (await env.observe()).aria
        # refs resolve against the latest snapshot: hold their elements before taking others below
        listed = {e["ref"]: await env.page.locator(f"aria-ref={e['ref']}").element_handle()
                  for e in elements if f"[ref={e['ref']}]" in aria}  # the same page, so the same refs
        assert len(listed) == len(elements)
        for e in elements:
            assert e["selector"], e
            found = env.element(selector=e["selector"])
            assert await found.count() == 1, e
            first = (await found.aria_snapshot()).splitlines()[0]
            m = _LINE.match(first)
            assert m is not None and m.group("role") == e["role"], (e, first)
            assert _unquote(m.group("name") or "") == e["name"], (e, first)
            assert await found.evaluate("(a, b) => a === b", listed[e["ref"]]), e
        await env.close()


# ---------------------------------------------------------------------------- units


def test_parse_snapshot_keeps_interactive_elements_and_folds_native_options():
    snapshot = "\n".join([
        "- generic [active] [ref=e1]:",
        '  - heading "Shop" [level=1] [ref=e2]',
        '  - link "Home" [ref=e3] [cursor=pointer]:',
        "    - /url: /",
        '  - button "Say \\"hi\\"" [ref=e4]',
        "  - button [ref=e5]",
        '  - combobox "Size" [ref=e6]:',
        '    - option "S" [selected]',
        '    - option "M"',
        '  - listbox "Colour" [ref=e7]:',
        '    - option "Red" [ref=e8]',
        '  - textbox "Card" [ref=f1e2]',
        '  - option "Stray"',
    ])
    found = parse_snapshot(snapshot)
    assert [(e.role, e.name, e.ref) for e in found] == [
        ("link", "Home", "e3"), ("button", 'Say "hi"', "e4"), ("button", "", "e5"), ("combobox", "Size", "e6"),
        ("listbox", "Colour", "e7"), ("option", "Red", "e8"), ("textbox", "Card", "f1e2"),
    ]
    assert found[3].options == ["S", "M"] and found[4].options == []


def test_role_selector_quotes_the_name():
    assert role_selector("button", "Add to cart") == 'role=button[name="Add to cart"]'
    assert role_selector("button", 'Say "hi" \\ now') == r'role=button[name="Say \"hi\" \\ now"]'
    assert role_selector("button", "Go", exact=True) == 'role=button[name="Go"s]'
    assert role_selector("button") == "role=button"


# ---------------------------------------------------------------------------- owrl inspect


@needs_chromium
def test_inspect_prints_the_snapshot_and_a_table_of_selectors(capsys, owrl_page_server):
    url = owrl_page_server({"/": TRICKY})
    code, out, err = cli(capsys, "inspect", url)
    assert code == 0, err
    snapshot, _, table = out.partition("interactive elements:")
    assert "accessibility snapshot" in snapshot and '- heading "Tricky page" [level=1]' in snapshot
    assert 'button "Add to cart" [ref=' in snapshot
    lines = table.splitlines()
    assert lines[0].strip() == "21"  # the hidden button and the native options left out
    assert lines[1].split() == ["ROLE", "NAME", "SELECTOR", "REF", "NOTE"]
    rows = "\n".join(lines[2:])
    for selector in ('role=button[name="Add to cart"]', 'role=button[name="add to cart"]',
                     'role=button[name="Remove"] >> nth=1', 'role=button[name="Say \\"hi\\" \\\\ now"]',
                     'role=checkbox[name="Keep me signed in"]', 'role=combobox[name="Country"]',
                     'role=option[name="Blue"]', 'role=tab[name="Reviews"]', 'role=link[name="Read more"] >> nth=0',
                     'iframe#pay >>> role=button[name="Pay now"]', 'iframe >> nth=1 >>> role=textbox[name="Card number"]'):
        assert selector in rows, selector
    assert "name shared by 2 buttons" in rows and "no accessible name" in rows
    assert "options: France, Spain (pick with select_option)" in rows
    assert "Hidden" not in rows

    code, out, _ = cli(capsys, "inspect", url, "--no-snapshot")
    assert code == 0 and "accessibility snapshot" not in out and "[ref=" not in out
    assert 'role=button[name="Add to cart"]' in out


@needs_chromium
def test_each_printed_selector_finds_exactly_its_element(capsys, owrl_page_server):
    url = owrl_page_server({"/": TRICKY})
    elements = inspect_json(capsys, url)
    assert {tuple(sorted(e)) for e in elements} <= {("name", "note", "ref", "role", "selector"),
                                                   ("name", "note", "options", "ref", "role", "selector")}
    by_name: dict[str, list[dict[str, Any]]] = {}
    for e in elements:
        by_name.setdefault(e["name"], []).append(e)
    assert by_name["Country"][0]["options"] == ["France", "Spain"]
    assert len(by_name[""]) == 2 and all(" >> nth=" in e["selector"] and e["note"] for e in by_name[""])
    assert [e["selector"] for e in by_name["Pay now"]] == ['iframe#pay >>> role=button[name="Pay now"]',
                                                          'iframe >> nth=1 >>> role=button[name="Pay now"]']
    assert by_name["Add"][0]["note"] is None
    asyncio.run(check_selectors(url, elements))


@needs_chromium
def test_printed_selectors_play_in_flow_calls(capsys, owrl_page_server, owrl_run_flow):
    url = owrl_page_server({"/": TRICKY})
    elements = inspect_json(capsys, url)
    pick = {(e["role"], e["name"], e["ref"]): e["selector"] for e in elements}
    nameless = [e for e in elements if not e["name"]]
    wanted = [  # (selector, what the click writes in #log)
        (next(e["selector"] for e in elements if e["name"] == "Remove" and e["selector"].endswith("nth=1")), "clicked remove-2"),
        (nameless[1]["selector"], "clicked icon-2"),
        (next(s for (role, name, _), s in pick.items() if (role, name) == ("button", "add to cart")), "clicked add-lower"),
        (next(s for (role, name, _), s in pick.items() if name.startswith("Say ")), "clicked quote"),
        ('iframe >> nth=1 >>> role=button[name="Pay now"]', "clicked pay-2"),
        (next(s for (role, name, _), s in pick.items() if (role, name) == ("option", "Blue")), "clicked blue"),
    ]
    assert wanted[4][0] in pick.values()
    turns = [{"calls": [{"name": "click", "arguments": {"selector": s}, "expect": {"text_visible": text}}]}
             for s, text in wanted]
    turns.append({"calls": [{"name": "done", "arguments": {"response": "ok"}}]})
    traj = owrl_run_flow(turns, url, action_timeout=3.0, expect_timeout=3.0)
    assert traj.outcome.status == "success", [c.result.error for s in traj.steps for c in s.calls]
    assert all(c.verdict is None or c.verdict.ok for s in traj.steps for c in s.calls)


@pytest.fixture
def quiet_shop(monkeypatch):
    """demo:shop served by a shop whose newsletter pop-up never opens (so the page holds still)."""
    import owrl_demo
    from owrl_demo import DemoShop

    shop = DemoShop(newsletter_delay=3600)
    shop.start()
    monkeypatch.setattr(owrl_demo, "_served", {shop.add_label: shop})
    yield shop
    shop.stop()


@pytest.mark.slow
@needs_chromium
def test_inspect_demo_shop_selectors_work_there(capsys, quiet_shop, owrl_run_flow):
    elements = inspect_json(capsys, "demo:shop")
    selectors = {e["selector"] for e in elements}
    for selector in ('role=button[name="Reject cookies"]', 'role=button[name="Accept cookies"]',
                     'role=link[name="Shirts"]', 'role=searchbox[name="Search products"]', 'role=button[name="Search"]'):
        assert selector in selectors, selector
    asyncio.run(check_selectors(quiet_shop.base_url + "/", elements))
    reject = [{"calls": [{"name": "click", "arguments": {"selector": 'role=button[name="Reject cookies"]'},
                          "expect": {"text_absent": "We use cookies"}}]},
              {"calls": [{"name": "done", "arguments": {"response": "ok"}}]}]
    assert owrl_run_flow(reject, "demo:shop/").outcome.status == "success"


@needs_chromium
def test_owrl_inspect_demo_shop_as_a_user_runs_it():
    result = owrl("inspect", "demo:shop/product/chelsea-boots", "--no-snapshot", env={"COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    assert "page: Leather Chelsea Boots" in result.stdout
    assert 'role=button[name="Add to cart"]' in result.stdout
    assert "options: Choose a size, 38" in result.stdout


def test_inspect_refuses_what_it_cannot_open_in_one_line(capsys, tmp_path):
    for args, words in [
        (["not a url"], "'not a url' is not an address to open"),
        ([str(tmp_path / "missing.html")], "missing.html: no such file"),
        (["ftp://example.com/"], "is not an address to open"),
        (["demo:nowhere"], "unknown demo site"),
        (["http://127.0.0.1:8000/", "--allow-domain", "example.com"], "127.0.0.1 is not an allowed domain"),
    ]:
        code, out, err = cli(capsys, "inspect", *args)
        assert code == 2 and out == "", args
        assert err.count("\n") == 1 and words in err, err


@needs_chromium
def test_inspect_of_an_unreachable_page_is_one_line_and_exit_2(capsys):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, out, err = cli(capsys, "inspect", f"http://127.0.0.1:{port}/")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "ERR_CONNECTION_REFUSED" in err and "nothing answers" in err, err


# ---------------------------------------------------------------------------- owrl tasks


def test_tasks_lists_the_suites_with_plugin_and_size(capsys, monkeypatch):
    from owrl_demo import load_tasks

    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = cli(capsys, "tasks", "--json")
    assert code == 0, err
    rows = {r["suite"]: r for r in json.loads(out)}
    assert rows["demo-shop"]["plugin"] == "demo"
    assert rows["demo-shop"]["tasks"] == len(load_tasks()) and rows["demo-shop"]["error"] is None
    assert rows["demo-shop"]["description"].startswith("An embedded web shop")
    assert "miniwob" in rows

    code, out, _ = cli(capsys, "tasks")
    assert code == 0
    line = next(row for row in out.splitlines() if "demo-shop" in row)
    assert "demo" in line.replace("demo-shop", "") and str(len(load_tasks())) in line
    assert "owrl tasks SUITE" in out


def test_a_suite_that_cannot_list_its_tasks_does_not_hide_the_others(plugins, register_plugin, settings):
    from owrl_sdk.commands.tasks import suite_rows
    from owrl_sdk.contract.components import TaskSuite
    from owrl_sdk.errors import UsageError
    from owrl_sdk.contract.plugins import hookimpl

    class Broken(TaskSuite):
        name = "broken-suite"
        description = "needs a package that is not installed"

        def tasks(self):
            raise UsageError("the broken suite needs the nothing package: pip install nothing")

    class Plugin:
        @hookimpl
        def register_task_suites(self, register):
            register(Broken)

    register_plugin(Plugin(), name="broken-plugin")
    rows = {r["suite"]: r for r in suite_rows(plugins, settings)}
    assert rows["broken-suite"]["plugin"] == "broken-plugin" and rows["broken-suite"]["tasks"] is None
    assert "pip install nothing" in rows["broken-suite"]["error"]
    assert rows["demo-shop"]["tasks"] and rows["demo-shop"]["error"] is None


def test_tasks_of_the_demo_shop(capsys, monkeypatch):
    from owrl_demo import load_tasks

    monkeypatch.setenv("COLUMNS", "250")
    code, out, err = cli(capsys, "tasks", "demo-shop", "--json")
    assert code == 0, err
    rows = json.loads(out)
    written = load_tasks()
    assert [(r["id"], r["intent"], r["start_url"], r["difficulty"]) for r in rows] == [
        (t.id, t.intent, t.start_url, t.difficulty) for t in written]  # start URLs as written: demo:shop/...
    assert rows[0]["id"] == "shop-001" and rows[0]["start_url"].startswith("demo:shop")

    code, out, _ = cli(capsys, "tasks", "demo-shop")
    assert code == 0
    assert f"demo-shop: {len(written)} task(s)" in out
    line = next(row for row in out.splitlines() if "shop-002" in row)
    assert "demo:shop/product/chelsea-boots" in line and "What is the price of the Leather Chelsea Boots?" in line


def test_tasks_of_a_task_file(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("COLUMNS", "200")
    path = tmp_path / "mine.jsonl"
    path.write_text("\n".join([
        json.dumps({"id": "t-1", "intent": "Find the opening hours [today]", "start_url": "https://example.com/",
                    "difficulty": 2}),
        "{not json",
        json.dumps({"id": "t-2", "intent": "Read the first headline", "start_url": "https://news.example.org/"}),
    ]) + "\n")
    code, out, err = cli(capsys, "tasks", str(path), "--json")
    assert code == 0
    assert json.loads(out) == [
        {"id": "t-1", "intent": "Find the opening hours [today]", "start_url": "https://example.com/", "difficulty": 2},
        {"id": "t-2", "intent": "Read the first headline", "start_url": "https://news.example.org/", "difficulty": None},
    ]
    assert "skipped" in err and "line 2" in err

    code, out, err = cli(capsys, "tasks", str(path))
    assert code == 0 and "mine: 2 task(s)" in out
    assert "Find the opening hours [today]" in out  # not eaten as markup
    t2 = next(row for row in out.splitlines() if "t-2" in row)
    assert "https://news.example.org/" in t2 and "Read the first headline" in t2 and " - " in t2


def test_tasks_of_an_unknown_suite_names_the_known_ones(capsys, tmp_path):
    code, out, err = cli(capsys, "tasks", "no-such-suite")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "no task suite named 'no-such-suite'" in err
    assert "demo-shop" in err and "miniwob" in err
    code, _, err = cli(capsys, "tasks", str(tmp_path / "gone.jsonl"))
    assert code == 2 and "gone.jsonl: no such task file" in err and "demo-shop" in err


def test_eval_help_points_at_owrl_tasks(capsys):
    code, out, _ = cli(capsys, "eval", "--help")
    assert code == 0 and "owrl tasks lists them" in " ".join(out.split())
