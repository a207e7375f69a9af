"""A recorder a page cannot write (issue 58, class 8).

The capture script runs in an isolated world (``owrl_sdk/recorder/world.py``): the page shares
the DOM with it and nothing else. These pages attack the recording the ways a page's own
scripts can: by poisoning the objects a script of the page's world would build its reports
with, by editing fields through trusted browser paths while nobody acts, and by putting what
the person clicks under something they do not see. The person's actions are Playwright's
input (mouse, keyboard, ``fill``), which reaches the page as the browser's trusted events.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from security_support import attack

pytestmark = pytest.mark.slow

ATTACKER = "DE00 6666 ATTACKER 0000"

# Every way a page's script could rewrite an object built by a script of its own world: a setter
# on Object.prototype for each key a report has, JSON and Array built-ins replaced, the DOM's own
# getters and methods redefined to lie about the element's name.
POISON = """<script>
const fake = {role: 'button', name: 'Delete account', tag: 'button', css: ['#delete'], role_counts: [1, 1],
              field_name: '', label: ''};
for (const key of ['token', 'doc', 'before', 'url', 'kind', 'id']) {
  Object.defineProperty(Object.prototype, key, {configurable: true, set(v) {
    Object.defineProperty(this, key, {value: v, writable: true, enumerable: true, configurable: true});
    if (this.kind === 'write') this.value = '""" + ATTACKER + """';
    if (this.kind === 'click') this.target = fake;
  }});
}
const stringify = JSON.stringify;
JSON.stringify = (v, ...rest) => stringify(Object.assign({}, v, v && v.kind === 'click' ? {target: fake} : {},
                                                          v && v.kind === 'write' ? {value: '""" + ATTACKER + """'} : {}), ...rest);
const from = Array.from;
Array.from = (...a) => from(...a);
Element.prototype.getAttribute = function (n) { return n === 'aria-label' ? 'Delete account' : null; };
Object.defineProperty(HTMLInputElement.prototype, 'value', {get() { return '""" + ATTACKER + """'; }, set(v) {}});
</script>"""

PAYEE = """<!doctype html><html><head><title>Payees</title>""" + POISON + """</head><body>
<label>IBAN <input id="iban"></label>
<button id="save" onclick="document.getElementById('done').textContent = 'Payee saved'">Save payee</button>
<button id="delete" onclick="document.getElementById('done').textContent = 'Account deleted'">Delete account</button>
<p id="done"></p></body></html>"""


async def _record(url: str, out: Any, act: Any) -> Any:
    from owrl_sdk.config import Settings
    from owrl_sdk.contract.plugins import Plugins
    from owrl_sdk.recorder import Recorder

    recorder = Recorder(url, out, Settings(headless=True), Plugins(), start_url=url)
    page = await recorder.start()
    try:
        await act(page)
        await asyncio.sleep(1.5)
    finally:
        await recorder.stop()
    return recorder


def _calls(out: Any) -> list[dict[str, Any]]:
    flow = json.loads(out.read_text())
    return [c for turn in flow["turns"] for c in turn["calls"] if c["name"] != "done"]


def test_a_page_that_poisons_its_own_world_cannot_rewrite_the_reports(tmp_path, owrl_page_server):
    url = owrl_page_server({"/payee": PAYEE}) + "payee"
    out = tmp_path / "payee.json"

    async def person(page: Any) -> None:
        await page.locator("#iban").click()
        await page.keyboard.type("DE12 5000 0000 1234")
        await page.get_by_role("button", name="Save payee").click()

    with attack("recorder", "page sets Object.prototype setters, replaces JSON.stringify and DOM getters to rewrite reports",
                "the capture script runs in an isolated world; its binding exists there only"):
        asyncio.run(_record(url, out, person))
        calls = _calls(out)
        text = json.dumps(calls)
        assert ATTACKER not in text and "Delete account" not in text and "#delete" not in text, text
        assert [c["name"] for c in calls] == ["write", "click"], calls
        assert calls[0]["arguments"]["message"] == "DE12 5000 0000 1234"
        assert calls[1]["arguments"]["selector"] == 'role=button[name="Save payee"]'
        assert calls[1]["expect"] == {"text_visible": "Payee saved"}


# Edits no person made, through paths whose events the browser marks trusted: execCommand while
# the page holds the focus, a value set by script then a trusted-looking blur, a contenteditable
# written by execCommand, and a rewrite of the field right after the person's own typing.
FORGER = """<!doctype html><html><head><title>Transfer</title></head><body>
<label>IBAN <input id="iban"></label> <label>Memo <div id="memo" contenteditable="true" role="textbox" aria-label="Memo"></div></label>
<label>Amount <input id="amount"></label>
<button onclick="document.getElementById('out').textContent = 'Transfer queued'">Send</button><p id="out"></p>
<script>
const forge = () => {
  const iban = document.getElementById('iban');
  iban.focus(); document.execCommand('selectAll'); document.execCommand('insertText', false, '""" + ATTACKER + """'); iban.blur();
  const memo = document.getElementById('memo');
  memo.focus(); document.execCommand('insertText', false, 'pay the attacker'); memo.blur();
};
setTimeout(forge, 200); setTimeout(forge, 900);
// after the person types the amount, the page writes its own number into the field
document.getElementById('amount').addEventListener('input', (e) => {
  setTimeout(() => { const a = document.getElementById('amount'); a.focus(); document.execCommand('selectAll');
                     document.execCommand('insertText', false, '999999'); }, 50);
});
</script></body></html>"""


def test_edits_no_person_made_are_not_recorded(tmp_path, owrl_page_server):
    url = owrl_page_server({"/transfer": FORGER}) + "transfer"
    out = tmp_path / "transfer.json"

    async def person(page: Any) -> None:
        await asyncio.sleep(1.3)  # the page's forgeries happen first, while nobody acts
        await page.locator("#amount").click()
        await page.keyboard.type("120")
        await asyncio.sleep(0.3)
        await page.get_by_role("button", name="Send").click()

    with attack("recorder", "page edits fields with focus + execCommand('insertText') + blur (trusted events) and "
                            "rewrites a field after the person typed",
                "a field counts only after a trusted beforeinput or key press in it; its value is the person's last edit"):
        asyncio.run(_record(url, out, person))
        calls = _calls(out)
        text = json.dumps(calls)
        assert ATTACKER not in text and "attacker" not in text and "999999" not in text, text
        assert [c["name"] for c in calls] == ["write", "click"], calls
        assert calls[0]["arguments"]["message"] == "120"


COVERED = """<!doctype html><html><head><title>Settings</title><style>
.stack { position: relative; width: 200px; height: 40px; margin: 20px; }
.stack button { position: absolute; inset: 0; width: 200px; height: 40px; }
</style></head><body>
<div class="stack" id="one">
  <button id="save1" onclick="document.getElementById('out').textContent = 'Saved'">Save</button>
  <button id="del1" style="opacity: 0" onclick="document.getElementById('out').textContent = 'Deleted'">Delete account</button>
</div>
<div class="stack" id="two">
  <button id="del2" onclick="document.getElementById('out').textContent = 'Deleted'">Delete account</button>
  <div style="position: absolute; inset: 0; background: #2a6; color: white; pointer-events: none">Save settings</div>
</div>
<button id="apply" onclick="document.getElementById('out').textContent = 'Applied'">Apply</button>
<p id="out"></p></body></html>"""


def test_a_click_on_what_the_person_could_not_see_is_recorded_with_a_warning(tmp_path, owrl_page_server):
    url = owrl_page_server({"/settings": COVERED}) + "settings"
    out = tmp_path / "settings.json"

    async def person(page: Any) -> None:
        for box in ("#one", "#two"):  # the person clicks where they see a Save button
            bounds = await page.locator(box).bounding_box()
            await page.mouse.click(bounds["x"] + 100, bounds["y"] + 20)
            await asyncio.sleep(1.3)
        await page.get_by_role("button", name="Apply").click()  # a plain, visible target: no warning

    with attack("recorder", "an opacity-0 button over 'Save', and a 'Save' cover with pointer-events: none over a button",
                "the click is recorded with a warning in its note and on the recorder"):
        recorder = asyncio.run(_record(url, out, person))
        flow = json.loads(out.read_text())
        thoughts = [t["thought"] for t in flow["turns"]]
        assert len(recorder.warnings) == 2, recorder.warnings
        assert "invisible (opacity 0)" in recorder.warnings[0]
        assert 'covered by a div showing "Save settings"' in recorder.warnings[1]
        assert sum("check that it is what you meant" in t for t in thoughts) == 2, thoughts
        assert [c["name"] for c in _calls(out)] == ["click", "click", "click"]
