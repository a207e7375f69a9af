"""`owrl record`: a scripted person acts in the recorder's browser; the flow it writes replays.

The person is Playwright driving the recorder's own page (real Chromium, headless), the way a
user would: clicks, typing, a choice in a <select>, Enter, a password on a log-in page. The
recorded flow must use role selectors first and no refs, carry expectations, replay with
success through owrl's flow player, and hold the typed password nowhere.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from owrl_sdk.browser.chromium import find_chromium
from owrl_sdk.recorder import choose_text, partial_path, stable_url_part, upper_snake

needs_chromium = pytest.mark.skipif(find_chromium(check_managed=False) is None, reason="no Chromium on this machine")

PASSWORD = "s3cr3t-Pa55word!"

LOGIN = """<!doctype html><title>Sign in</title>
<h1>Sign in</h1>
<form id="login">
  <label for="email">Email</label> <input id="email" name="email" type="email">
  <label for="pw">Password</label> <input id="pw" name="password" type="password">
  <label>Plan <select name="plan"><option value="free">Free</option><option value="pro">Pro</option></select></label>
  <label><input type="checkbox" name="remember"> Keep me signed in</label>
  <button type="submit">Log in</button>
</form>
<script>
  document.getElementById("login").addEventListener("submit", (e) => {
    e.preventDefault();
    const ok = document.getElementById("pw").value.length > 0 && document.getElementById("email").value.includes("@");
    setTimeout(() => { location.href = ok ? "/account?tab=orders" : "/login"; }, 50);
  });
</script>"""

ACCOUNT = """<!doctype html><title>Account</title>
<h1>Your account</h1>
<label for="q">Search orders</label> <input id="q" type="search">
<div role="status" id="status"></div>
<button data-testid="refresh"><svg width="12" height="12"></svg></button>
<button onclick="if (confirm('Delete all drafts?')) document.getElementById('status').textContent = 'Drafts deleted'">Delete drafts</button>
<script>
  document.getElementById("q").addEventListener("keydown", (e) => {
    if (e.key === "Enter") document.getElementById("status").textContent = "Showing orders for " + e.target.value;
  });
  document.querySelector("[data-testid=refresh]").addEventListener("click", () => {
    document.getElementById("status").textContent = "Orders refreshed";
  });
</script>"""


def test_stable_url_part_keeps_what_a_replay_sees_again():
    assert stable_url_part("http://127.0.0.1:5000/products?category=shirts&page=2") == "/products?category=shirts"
    assert stable_url_part("http://127.0.0.1:5000/order/84213") == "/order/"
    assert stable_url_part("http://127.0.0.1:5000/product/chelsea-boots") == "/product/chelsea-boots"
    assert stable_url_part("http://127.0.0.1:5000/") is None
    assert stable_url_part("http://h/login?user=a&password=x") == "/login"  # a credential in a URL is never kept
    assert stable_url_part("https://other.example/docs", "http://127.0.0.1:1/") == "other.example/docs"


def test_a_navigation_recorded_as_goto_url_keeps_no_credential_in_its_query():
    """A GET log-in form whose answer comes after the 3 s cause window is recorded as goto_url of
    the URL it reached: the password in its query stayed in the flow."""
    from owrl_sdk.recorder.flowbuild import FlowBuilder, without_secret_params
    from owrl_sdk.recorder.session import Recorder

    assert without_secret_params("http://h/session?user=ann&password=hunter2&next=%2Fhome") == \
        "http://h/session?user=ann&next=%2Fhome"
    assert without_secret_params("http://h/a?q=shoes") == "http://h/a?q=shoes"
    # only credential names, matched whole; what is kept stays as written
    kept = "http://h/search?keyword=red%20shoes&passengers=2&author=Tolkien&flag"
    assert without_secret_params(kept) == kept
    assert without_secret_params("http://h/cb?state=x%20y&access_token=abc#id_token=j&scope=a") == \
        "http://h/cb?state=x%20y#scope=a"
    recording = Recorder.__new__(Recorder)  # the navigation handling alone, on a stand-in page
    page = object()
    recording._ready, recording._opened_by_action, recording._last, recording._closed_tab = True, set(), None, None
    recording.builder = FlowBuilder("http://h/")
    recording._on_navigated(page, "http://h/session?user=ann&pwd=hunter2")
    (call,) = recording.builder.calls
    assert call.arguments["url"] == "http://h/session?user=ann" and "hunter2" not in call.note
    recording._last = (0.0, page, call)  # a redirect long after: the same goto_url takes its URL
    recording._on_navigated(page, "http://h/session?user=ann&pwd=hunter2&auth_token=abc123")
    (call,) = recording.builder.calls
    assert call.arguments["url"] == "http://h/session?user=ann" and "hunter2" not in call.note


def test_choose_text_prefers_status_regions_and_words_without_numbers():
    texts = [{"text": "Classic shirt", "live": False, "distance": 10},
             {"text": "Order 1042 placed", "live": True, "distance": 500}]
    assert choose_text(texts) == "Order"  # too short once the number is cut: falls through
    assert choose_text([{"text": "Added to your cart (3 items)", "live": True, "distance": 5}]) == "Added to your cart"
    assert choose_text([]) is None
    # the words before the number were on the page already (a heading "New invoice"): another run of words
    made = [{"text": "Invoice INV-1001 created for Globex Ltd: 120.5 USD (priority, bank)", "live": True, "distance": 5}]
    assert choose_text(made) == "Invoice"
    assert choose_text(made, before=["New invoice", "Customer"]) == "created for Globex Ltd"
    assert choose_text([{"text": "Saved 3", "live": True}], before=["Saved drafts"]) is None
    assert upper_snake("current-password") == "CURRENT_PASSWORD" and upper_snake("userEmail") == "USER_EMAIL"


def test_turns_end_after_each_call_that_expects_something_and_done_comes_last():
    from owrl_sdk.recorder.flowbuild import Call, FlowBuilder

    builder = FlowBuilder(start_url="demo:shop/")
    builder.add(Call("click", {"selector": 'role=radio[name="Blue"]'}, "Click Blue."))
    builder.add(Call("click", {"selector": 'role=link[name="Shirts"]'}, "Click Shirts.",
                     navigated="http://127.0.0.1:5/products?category=shirts", url_before="http://127.0.0.1:5/"))
    builder.add(Call("click", {"selector": 'role=button[name="Add"]'}, "Click Add.", navigated="http://127.0.0.1:5/products?category=shirts",
                     url_before="http://127.0.0.1:5/products?category=shirts", landing_text="Added"))
    builder.add(Call("press_keys", {"keys": "Escape"}, "Press Escape."))
    flow = builder.flow()  # a valid owrl.flow/1
    assert flow.task == "Replay of the recording on demo:shop"
    assert [[c.name for c in t.calls] for t in flow.turns] == [["click", "click"], ["click"], ["press_keys"], ["done"]]
    assert flow.turns[0].calls[1].expect is not None and flow.turns[0].calls[1].expect.url_contains == "/products?category=shirts"
    assert flow.turns[1].calls[0].expect is not None and flow.turns[1].calls[0].expect.text_visible == "Added"
    assert flow.turns[0].thought == "Click Blue. Click Shirts."


def test_a_later_call_quoting_an_inputs_value_quotes_its_placeholder():
    """The option picked after typing a customer, and the confirmation naming it, follow the
    input (each row looks for its own customer); a value quoted before the input was filled in,
    and short values (a quantity of 2), are left alone."""
    from owrl_sdk.recorder.flowbuild import Call, FlowBuilder

    builder = FlowBuilder(start_url="http://127.0.0.1:5/invoice")
    builder.add(Call("click", {"selector": 'role=link[name="Globex Ltd"]'}, "Open the old invoice."))
    builder.add(Call("write", {"selector": "#customer", "message": "{{input:customer}}"}, "Write the customer."))
    builder.add(Call("write", {"selector": "#qty", "message": "{{input:qty}}"}, "Write the quantity."))
    builder.add(Call("click", {"selector": 'role=option[name="Globex Ltd"]'}, "Pick it."))
    builder.add(Call("click", {"selector": 'role=button[name="Add 2"]'}, "Submit.",
                     expect={"text_visible": "Invoice created for Globex Ltd"}))
    builder.inputs.update(customer="Globex Ltd", qty="2")
    calls = [c for t in builder.flow_data()["turns"] for c in t["calls"]]
    assert calls[0]["arguments"]["selector"] == 'role=link[name="Globex Ltd"]'  # before the input: the literal
    assert calls[3]["arguments"]["selector"] == 'role=option[name="{{input:customer}}"]'
    assert calls[4]["expect"] == {"text_visible": "Invoice created for {{input:customer}}"}
    assert calls[4]["arguments"]["selector"] == 'role=button[name="Add 2"]'


def calls_of(flow: dict[str, Any]) -> list[dict[str, Any]]:
    return [call for turn in flow["turns"] for call in turn["calls"]]


def grep_folder(folder: Path, needle: str) -> list[str]:
    found = []
    for path in folder.rglob("*"):
        if path.is_file() and needle.encode() in path.read_bytes():
            found.append(str(path))
    return found


async def record(url: str, out: Path, act: Any, **options: Any) -> dict[str, Any]:
    from owrl_sdk.config import Settings
    from owrl_sdk.contract.plugins import Plugins
    from owrl_sdk.recorder import Recorder

    plugins = Plugins()
    recorder = Recorder(plugins.resolve_url(url), out, Settings(headless=True), plugins, start_url=url, **options)
    page = await recorder.start()
    try:
        await act(page, recorder)
        await asyncio.sleep(1.5)  # what the last action changed is reported after it settles
    finally:
        await recorder.stop()
    return json.loads(out.read_text())


@pytest.mark.slow
@needs_chromium
def test_a_recorded_login_replays_and_never_holds_the_password(tmp_path, owrl_page_server, owrl_run_flow, monkeypatch):
    base = owrl_page_server({"/login": LOGIN, "/account": ACCOUNT})
    out = tmp_path / "rec" / "login.json"

    async def person(page: Any, recorder: Any) -> None:
        await page.get_by_label("Email").click()
        await page.keyboard.type("maria@example.org", delay=5)
        await page.get_by_label("Password").click()
        await page.keyboard.type(PASSWORD, delay=5)
        await page.get_by_label("Plan").focus()  # a person picks by keyboard or mouse: trusted events
        await page.keyboard.type("p")  # (Playwright's select_option dispatches untrusted ones)
        await page.get_by_label("Keep me signed in").check()
        await page.get_by_role("button", name="Log in").click()
        await page.wait_for_url("**/account?tab=orders")
        await asyncio.sleep(0.5)
        await page.get_by_label("Search orders").click()
        await page.keyboard.type("shirts", delay=5)
        await page.keyboard.press("Enter")
        await asyncio.sleep(1.5)
        await page.get_by_test_id("refresh").click()
        await asyncio.sleep(1.5)
        page.once("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))
        await page.get_by_role("button", name="Delete drafts").click()
        await page.get_by_text("Drafts deleted").wait_for()

    flow = asyncio.run(record(base + "login", out, person, task="Sign in and tidy the account"))
    calls = calls_of(flow)
    names = [c["name"] for c in calls]
    assert flow["task"] == "Sign in and tidy the account" and flow["start_url"] == base + "login"
    assert names == ["write", "write", "select_option", "set_checked", "click", "write", "press_keys", "click", "click",
                     "handle_dialog", "done"], names
    selectors = [c["arguments"].get("selector", "") for c in calls]
    assert selectors[:5] == ['role=textbox[name="Email"]', 'role=textbox[name="Password"]', 'role=combobox[name="Plan"]',
                             'role=checkbox[name="Keep me signed in"]', 'role=button[name="Log in"]']
    assert selectors[7] == '[data-testid="refresh"]'  # an icon with no name: the test id
    assert not any("ref" in c["arguments"] for c in calls)
    assert calls[0]["arguments"]["message"] == "maria@example.org"
    assert calls[0]["expect"] == {"value_equals": {"selector": 'role=textbox[name="Email"]', "value": "maria@example.org"}}
    assert calls[1]["arguments"]["message"] == "{{secret:PASSWORD}}" and "expect" not in calls[1]
    assert calls[2]["arguments"]["value"] == "pro"
    assert calls[3]["arguments"] == {"selector": 'role=checkbox[name="Keep me signed in"]', "checked": True}
    assert calls[4]["expect"] == {"url_contains": "/account?tab=orders"}
    assert calls[6] == {"name": "press_keys", "arguments": {"keys": "Enter"}, "expect": {"text_visible": "Showing orders for shirts"}}
    assert calls[7]["expect"] == {"text_visible": "Orders refreshed"}
    assert calls[9]["arguments"] == {"accept": True} and calls[9]["expect"] == {"text_visible": "Drafts deleted"}
    assert not partial_path(out).exists()

    from owrl_sdk.formats.documents import load_flow

    monkeypatch.setenv("OWRL_SECRET_PASSWORD", PASSWORD)
    traj = owrl_run_flow(load_flow(out), base + "login")  # its run folder is under tmp_path too
    assert traj.outcome.status == "success", [(c.call.name, c.result.error, c.verdict) for s in traj.steps for c in s.calls]
    assert grep_folder(tmp_path, PASSWORD) == []


SHOWN_PASSWORDS = """<!doctype html><title>Security</title>
<h1>Security</h1>
<label for="pw">Current password</label> <input id="pw" name="password" type="text" autocomplete="current-password">
<label for="pin">New PIN</label> <input id="pin" name="pin" type="text" autocomplete="new-password">
<button onclick="document.getElementById('s').textContent = 'Settings saved'">Save</button> <p id="s"></p>"""


@needs_chromium
def test_a_password_field_shown_as_text_is_still_a_secret(tmp_path, owrl_page_server):
    """A "show password" toggle makes a password field type=text; its autocomplete still says
    what it holds, and the recorder keeps the value out of the flow and its partial file."""
    base = owrl_page_server({"/security": SHOWN_PASSWORDS})
    out = tmp_path / "rec" / "security.json"
    pin = "Heron-5521-pin"
    seen_midway: list[str] = []

    async def person(page: Any, recorder: Any) -> None:
        await page.get_by_label("Current password").click()
        await page.keyboard.type(PASSWORD, delay=5)
        await page.get_by_label("New PIN").click()
        await page.keyboard.type(pin, delay=5)
        await asyncio.sleep(1.0)
        seen_midway.extend(grep_folder(tmp_path, PASSWORD) + grep_folder(tmp_path, pin))
        await page.get_by_role("button", name="Save").click()
        await page.get_by_text("Settings saved").wait_for()

    flow = asyncio.run(record(base + "security", out, person))
    writes = [c for c in calls_of(flow) if c["name"] == "write"]
    assert [w["arguments"]["message"] for w in writes] == ["{{secret:PASSWORD}}", "{{secret:PIN}}"], writes
    assert not any("expect" in w for w in writes)
    assert seen_midway == [] and grep_folder(tmp_path, PASSWORD) == [] and grep_folder(tmp_path, pin) == []


@needs_chromium
def test_input_fields_become_placeholders_with_the_typed_default(tmp_path, owrl_page_server):
    base = owrl_page_server({"/login": LOGIN, "/account": ACCOUNT})
    out = tmp_path / "inputs.json"

    async def person(page: Any, recorder: Any) -> None:
        await page.get_by_label("Email").fill("maria@example.org")
        await page.get_by_label("Password").fill(PASSWORD)
        await page.get_by_label("Plan").focus()
        await page.keyboard.type("p")
        await page.get_by_label("Keep me signed in").click()
        await page.get_by_role("button", name="Log in").click()
        await page.wait_for_url("**/account?tab=orders")

    flow = asyncio.run(record(base + "login", out, person, input_fields=("email", "remember", "plan")))
    write = calls_of(flow)[0]
    assert write["arguments"]["message"] == "{{input:email}}"
    chosen = calls_of(flow)[2]  # a select named in --input-fields: its option from the input
    assert chosen["name"] == "select_option" and chosen["arguments"]["value"] == "{{input:plan}}"
    assert flow["inputs"]["plan"]["default"] == "pro"
    box = calls_of(flow)[3]
    assert box["name"] == "set_checked" and box["arguments"]["checked"] == "{{input:remember}}"
    assert flow["inputs"]["remember"] == {"type": "boolean", "default": True, "description": "set while recording"}
    from owrl_sdk.formats.documents import Flow

    if "inputs" in Flow.model_fields:  # declared, with the typed value as default; the replay fills it in
        assert flow["inputs"]["email"]["default"] == "maria@example.org"
        from owrl_cli import owrl

        env = {**os.environ, "OWRL_SECRET_PASSWORD": PASSWORD}
        done = owrl("run", "--flow", str(out), "--out", str(tmp_path / "runs"), "--json", env=env, timeout=180)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        result = json.loads(done.stdout)
        assert result["outcome"]["status"] == "success"
        assert result["inputs"] == {"email": "maria@example.org", "remember": True, "plan": "pro"}
    assert grep_folder(tmp_path, PASSWORD) == []


HOME = """<!doctype html><title>Home</title><h1>Home</h1>
<a href="/details" target="_blank">Open details</a>
<div role="status" id="home-status"></div>
<button onclick="document.getElementById('home-status').textContent = 'Home refreshed'">Refresh home</button>
<iframe id="pay" src="/frame" title="Payment"></iframe>"""

DETAILS = """<!doctype html><title>Details</title><h1>Details</h1>
<p id="out"></p><button onclick="document.getElementById('out').textContent = 'Details confirmed'">Confirm</button>"""

FRAME = """<!doctype html><p id="paid"></p>
<button onclick="document.getElementById('paid').textContent = 'Payment accepted'">Pay now</button>"""


@pytest.mark.slow
@needs_chromium
def test_tabs_and_frames_are_recorded_and_closing_the_browser_ends_the_recording(tmp_path, owrl_page_server, owrl_run_flow):
    from owrl_sdk.config import Settings
    from owrl_sdk.contract.plugins import Plugins
    from owrl_sdk.recorder import Recorder

    base = owrl_page_server({"/": HOME, "/details": DETAILS, "/frame": FRAME})
    out = tmp_path / "tabs.json"

    async def go() -> None:
        recorder = Recorder(base, out, Settings(headless=True), Plugins())
        home = await recorder.start()
        await home.frame_locator("#pay").get_by_role("button", name="Pay now").click()
        await asyncio.sleep(1.5)
        async with home.context.expect_page() as opened:
            await home.get_by_role("link", name="Open details").click()
        details = await opened.value
        await details.wait_for_load_state()
        await asyncio.sleep(0.5)
        await details.get_by_role("button", name="Confirm").click()
        await asyncio.sleep(1.5)
        await home.get_by_role("button", name="Refresh home").click()
        await asyncio.sleep(1.5)
        for page in list(recorder.context.pages):  # the person closes the window
            await page.close()
        await asyncio.wait_for(recorder.wait(), 10)
        await recorder.stop()

    asyncio.run(go())
    calls = calls_of(json.loads(out.read_text()))
    assert [c["name"] for c in calls] == ["click", "click", "click", "switch_tab", "click", "done"], calls
    assert calls[0]["arguments"]["selector"] == 'iframe#pay >>> role=button[name="Pay now"]'
    assert calls[0]["expect"] == {"text_visible": "Payment accepted"}
    assert calls[1]["expect"] == {"new_tab": True}
    assert calls[2]["expect"] == {"text_visible": "Details confirmed"}
    assert calls[3]["arguments"] == {"tab_index": 0}
    assert calls[4]["expect"] == {"text_visible": "Home refreshed"}
    traj = owrl_run_flow(json.loads(out.read_text()), base)
    assert traj.outcome.status == "success", [(c.call.name, c.result.error, c.verdict) for s in traj.steps for c in s.calls]


PICKER = """<!doctype html><title>Picker</title><h1>Picker</h1>
<label><input type="checkbox" id="gift"> Gift wrap</label>
<p id="count"></p><button ondblclick="document.getElementById('count').textContent = 'Opened twice'">Open</button>
<p id="named"></p>
<button onclick="const n = prompt('Your name?'); if (n) document.getElementById('named').textContent = 'Hello ' + n">Name it</button>"""


@pytest.mark.slow
@needs_chromium
def test_labels_double_clicks_prompts_and_typed_addresses(tmp_path, owrl_page_server, owrl_run_flow):
    base = owrl_page_server({"/picker": PICKER, "/account": ACCOUNT})
    out = tmp_path / "picker.json"

    async def person(page: Any, recorder: Any) -> None:
        await page.get_by_text("Gift wrap").click()  # on the label
        await page.get_by_role("button", name="Open").dblclick()
        await asyncio.sleep(1.5)
        page.once("dialog", lambda dialog: asyncio.ensure_future(dialog.accept("Ada")))
        await page.get_by_role("button", name="Name it").click()
        await page.get_by_text("Hello Ada").wait_for()
        await asyncio.sleep(1.5)
        await asyncio.sleep(3.2)  # long after the last action: the person types an address
        await page.goto(base + "account")

    calls = calls_of(asyncio.run(record(base + "picker", out, person)))
    assert [c["name"] for c in calls] == ["set_checked", "click", "click", "handle_dialog", "goto_url", "done"], calls
    assert calls[0]["arguments"] == {"selector": 'role=checkbox[name="Gift wrap"]', "checked": True}
    assert calls[1]["arguments"] == {"selector": 'role=button[name="Open"s]', "clicks": 2} or \
        calls[1]["arguments"] == {"selector": 'role=button[name="Open"]', "clicks": 2}, calls[1]
    assert calls[1]["expect"] == {"text_visible": "Opened twice"}
    assert calls[3] == {"name": "handle_dialog", "arguments": {"accept": True, "prompt_text": "Ada"},
                        "expect": {"text_visible": "Hello Ada"}}
    assert calls[4]["arguments"] == {"url": base + "account"}
    traj = owrl_run_flow(json.loads(out.read_text()), base + "picker")
    assert traj.outcome.status == "success", [(c.call.name, c.result.error, c.verdict) for s in traj.steps for c in s.calls]


@pytest.fixture
def quiet_shop(monkeypatch):
    """demo:shop served by a shop whose newsletter pop-up never opens."""
    import owrl_demo
    from owrl_demo import DemoShop

    shop = DemoShop(newsletter_delay=3600)
    shop.start()
    monkeypatch.setattr(owrl_demo, "_served", {shop.add_label: shop})
    yield shop
    shop.stop()


@pytest.mark.slow
@needs_chromium
def test_a_recording_on_the_demo_shop_replays(tmp_path, quiet_shop, owrl_run_flow, monkeypatch):
    out = tmp_path / "shop.json"

    async def person(page: Any, recorder: Any) -> None:
        await page.get_by_role("button", name="Reject cookies").click()
        await page.wait_for_load_state()
        await asyncio.sleep(0.5)
        await page.get_by_label("Email", exact=True).click()
        await page.keyboard.type("demo@shop.test", delay=5)
        await page.get_by_label("Password").click()
        await page.keyboard.type("demo1234", delay=5)
        await page.keyboard.press("Enter")
        await page.wait_for_url("**/account")
        await asyncio.sleep(0.5)
        await page.get_by_role("link", name="Shirts").first.click()
        await page.wait_for_url("**/products?category=shirts*")
        await asyncio.sleep(0.3)
        await page.get_by_role("link", name="Classic Oxford Shirt").first.click()
        await page.wait_for_url("**/product/**")
        await asyncio.sleep(0.3)
        await page.get_by_role("combobox", name="Size").focus()
        await page.keyboard.type("m")
        await page.get_by_role("button", name="Add to cart").click()
        await page.get_by_text("Added to your cart").first.wait_for()

    flow = asyncio.run(record("demo:shop/login", out, person))
    calls = calls_of(flow)
    assert flow["start_url"] == "demo:shop/login" and flow["task"] == "Replay of the recording on demo:shop"
    assert [c["name"] for c in calls] == ["click", "write", "write", "press_keys", "click", "click", "select_option",
                                          "click", "done"], calls
    assert calls[0]["arguments"]["selector"] == 'role=button[name="Reject cookies"]'
    assert calls[1]["arguments"]["selector"] == 'role=textbox[name="Email"s]'  # "Email address" is another field
    assert calls[2]["arguments"]["message"] == "{{secret:PASSWORD}}"
    assert calls[3]["expect"] == {"url_contains": "/account"}
    assert calls[4]["expect"] == {"url_contains": "/products?category=shirts"}
    assert calls[7]["expect"] == {"text_visible": "Added to your cart"}
    assert all(c["arguments"].get("selector", "role=").startswith("role=") for c in calls)
    monkeypatch.setenv("OWRL_SECRET_PASSWORD", "demo1234")
    traj = owrl_run_flow(flow, "demo:shop/login")
    assert traj.outcome.status == "success", [(c.call.name, c.result.error, c.verdict) for s in traj.steps for c in s.calls]
    assert grep_folder(tmp_path, "demo1234") == []


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def click_over_cdp(port: int) -> None:
    """A script acting in the recorded browser through --debug-port."""
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.connect_over_cdp(f"http://127.0.0.1:{port}")
        page = browser.contexts[0].pages[0]
        await page.get_by_test_id("refresh").click()
        await page.get_by_text("Orders refreshed").wait_for()
        await asyncio.sleep(1.5)


@needs_chromium
def test_sigint_to_owrl_record_writes_a_valid_flow(tmp_path, owrl_page_server):
    from owrl_sdk.formats.documents import load_flow

    base = owrl_page_server({"/account": ACCOUNT})
    out = tmp_path / "cli.json"
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("DISPLAY", None)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "owrl_sdk", "record", base + "account", "-o", str(out), "--json",
                             "--headless", "--task", "Look at the account", "--debug-port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    try:
        deadline = time.monotonic() + 60
        while not partial_path(out).exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert partial_path(out).exists(), proc.communicate(timeout=5)
        asyncio.run(click_over_cdp(port))
        assert "Orders refreshed" in partial_path(out).read_text()  # kept as it goes
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    flow = load_flow(out)
    assert flow.task == "Look at the account" and flow.turns[-1].calls[-1].name == "done"
    assert flow.turns[0].calls[0].arguments == {"selector": '[data-testid="refresh"]'}
    done = json.loads(stdout)  # --json: what was written, for a script
    assert done["flow"] == str(out) and done["calls"] == sum(len(t.calls) for t in flow.turns) and done["inputs"] == {}
    assert not partial_path(out).exists()


def test_record_without_a_display_or_xvfb_is_one_clear_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DISPLAY"}
    env["PATH"] = str(Path(sys.executable).parent)  # no Xvfb there
    proc = subprocess.run([sys.executable, "-m", "owrl_sdk", "record", "https://example.com/", "--out", str(tmp_path / "f.json")],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2
    assert "--headless" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@needs_chromium
def test_an_address_that_does_not_open_is_one_line_and_exit_2(tmp_path):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.run([sys.executable, "-m", "owrl_sdk", "record", f"http://127.0.0.1:{port}/", "--headless",
                           "--out", str(tmp_path / "f.json")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "cannot open" in proc.stderr and "Traceback" not in proc.stderr


def test_a_start_address_outside_allow_domain_is_refused_before_a_browser_starts(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "owrl_sdk", "record", "http://127.0.0.1:9/", "--headless",
                           "--allow-domain", "intranet.example", "--out", str(tmp_path / "f.json")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "cannot open http://127.0.0.1:9/: 127.0.0.1 is not an allowed domain" in proc.stderr, proc.stderr
    assert not (tmp_path / "f.json").exists()


FORM = """<!doctype html><title>Invoice</title><h1>New invoice</h1>
<label for="due">Due date</label> <input id="due" type="date">
<label for="ref">Reference</label> <input id="ref">
<button onclick="document.getElementById('ok').textContent = 'Saved ' + document.getElementById('due').value">Save</button>
<p id="ok" role="status"></p>"""


@needs_chromium
def test_a_field_typed_part_by_part_is_one_write_of_its_final_value(tmp_path, owrl_page_server, owrl_run_flow):
    """A date typed with the keyboard (each part an event) and a field edited twice in a row
    become one write each, which replays (four identical writes stopped the replay as a repeat)."""
    base = owrl_page_server({"/form": FORM})
    out = tmp_path / "form.json"

    async def person(page: Any, recorder: Any) -> None:
        await page.get_by_label("Due date").focus()
        await page.keyboard.type("01312027", delay=80)
        await page.get_by_label("Reference").fill("A-1")
        await page.evaluate("document.activeElement.blur()")  # the field is left: its write is reported
        await asyncio.sleep(0.3)
        await page.get_by_label("Reference").fill("A-17")  # and edited again, nothing done in between
        await page.get_by_role("button", name="Save").click()
        await page.wait_for_function("document.getElementById('ok').textContent.startsWith('Saved')")

    flow = asyncio.run(record(base + "form", out, person))
    writes = [(c["arguments"]["selector"], c["arguments"]["message"]) for c in calls_of(flow) if c["name"] == "write"]
    assert len(writes) == 2, writes
    assert writes[0][1] == "2027-01-31" and writes[1][1] == "A-17", writes
    traj = owrl_run_flow(json.loads(out.read_text()), base + "form")
    assert traj.outcome.status == "success", traj.outcome


ORDER = """<!doctype html><title>Order</title><h1>Order</h1>
<button onclick="document.getElementById('num').textContent = 'ORD-' + (4000 + Math.floor(Math.random() * 999))">Place order</button>
<p>Order number: <span id="num" aria-label="Order number"></span></p>
<script>document.addEventListener("keydown", (e) => { if (e.code === "KeyE") document.title = "page saw the chord"; });</script>"""


@needs_chromium
def test_alt_shift_e_over_an_element_records_an_extract_that_replays(tmp_path, owrl_page_server, owrl_run_flow):
    """The person marks "extract this" with Alt+Shift+E over the order number: the flow reads it
    with extract and saves it as an output, so each replay hands back its own number. The page
    never sees the chord."""
    base = owrl_page_server({"/order": ORDER})
    out = tmp_path / "order.json"
    seen = {}

    async def person(page: Any, recorder: Any) -> None:
        await page.get_by_role("button", name="Place order").click()
        await page.wait_for_function("document.getElementById('num').textContent.startsWith('ORD-')")
        await page.locator("#num").hover()
        await page.keyboard.press("Alt+Shift+E")
        await asyncio.sleep(0.5)
        seen["title"] = await page.title()
        seen["number"] = await page.inner_text("#num")

    flow = asyncio.run(record(base + "order", out, person))
    assert seen["title"] == "Order", seen  # the page did not see the chord
    extracts = [c for c in calls_of(flow) if c["name"] == "extract"]
    assert len(extracts) == 1, calls_of(flow)
    assert extracts[0]["save_as"] == "order_number" and "expect" not in extracts[0], extracts
    assert seen["number"] not in json.dumps(flow)  # the value read while recording is not pinned
    traj = owrl_run_flow(json.loads(out.read_text()), base + "order")
    assert traj.outcome.status == "success", traj.outcome
    assert traj.outcome.outputs["order_number"].startswith("ORD-"), traj.outcome.outputs
