"""Editors that are not native fields: a ``contenteditable`` region with role textbox, and an
element with role textbox that handles keys itself. What they hold is read back in the
change feedback and by ``value_equals``. Real Chromium, a page served on 127.0.0.1."""

from __future__ import annotations

from typing import Any

import pytest

from browser_support import act, quick_settings, ref_of, task
from owrl_sdk.testing import owrl_page_server  # noqa: F401 - the fixture
from owrl_sdk.types import Expectation

PAGE = """<!doctype html><title>Editors</title>
<label id=msg-label>Message</label>
<div id=message contenteditable=true role=textbox aria-multiline=true aria-labelledby=msg-label
     style="border:1px solid #999;min-height:40px"></div>
<div id=note role=textbox aria-label=Note tabindex=0 style="border:1px solid #999;min-height:20px"></div>
<label>Name <input id=name></label>
<button id=fill onclick="message.innerHTML = '<p>Filled by the page</p>'">Fill</button>
<script>
// a widget that takes keys itself (no contenteditable): what a custom editor does
note.addEventListener('keydown', (e) => {
  if (e.key === 'Backspace' || e.key === 'Delete') note.textContent = '';
  else if (e.key.length === 1 && !e.ctrlKey && !e.metaKey) note.textContent += e.key;
  e.preventDefault();
});
</script>"""


@pytest.fixture
def url(owrl_page_server: Any) -> str:  # noqa: F811
    return owrl_page_server({"/": PAGE})


async def write_and_read_back(env: Any, name: str, text: str) -> str:
    """Write ``text`` into the textbox ``name``: the call's feedback and ``value_equals`` both
    read it back. Its ref."""
    ref = ref_of((await env.observe()).aria, "textbox", name)
    result = await act(env, "write", ref=ref, message=text)
    assert result.ok, result.error
    assert f'textbox "{name}" now "{text}"' in result.feedback, result.feedback
    assert (await env.verify(Expectation(value_equals={"ref": ref, "value": text}))).ok
    return ref


async def test_writing_into_a_contenteditable_reads_back_its_text(env, url):
    await env.reset(task(url))
    obs = await env.observe()
    message = ref_of(obs.aria, "textbox", "Message")
    result = await act(env, "write", ref=message, message="Hello Bob, see you at noon")
    assert result.ok, result.error
    assert 'textbox "Message" now "Hello Bob, see you at noon"' in result.feedback, result.feedback
    verdict = await env.verify(Expectation(value_equals={"ref": message, "value": "Hello Bob, see you at noon"}))
    assert verdict.ok, verdict.describe()
    wrong = await env.verify(Expectation(value_equals={"selector": "#message", "value": "Hello Bob"}))
    assert not wrong.ok and "Hello Bob, see you at noon" in wrong.checks[0].detail


async def test_lines_typed_into_an_editor_compare_by_their_text(env, url):
    await env.reset(task(url))
    await env.observe()
    result = await act(env, "write", selector="#message", message="First line\nSecond line")
    assert result.ok, result.error
    assert "First line Second line" in result.feedback, result.feedback
    assert "not what was typed" not in result.feedback
    assert (await env.verify(Expectation(value_equals={"selector": "#message", "value": "First line\nSecond line"}))).ok
    assert not (await env.verify(Expectation(value_equals={"selector": "#message", "value": "First line"}))).ok


async def test_a_role_textbox_widget_that_takes_keys_itself(env, url):
    await env.reset(task(url))
    note = await write_and_read_back(env, "Note", "remember the milk")
    assert not (await env.verify(Expectation(value_equals={"ref": note, "value": "remember"}))).ok


async def test_an_editor_the_page_fills_and_a_native_field_beside_it(env, url):
    await env.reset(task(url))
    await env.observe()
    result = await act(env, "click", selector="#fill")
    assert 'textbox "Message" now "Filled by the page"' in result.feedback, result.feedback
    typed = await act(env, "write", selector="#name", message="Ada")
    assert 'textbox "Name" now "Ada"' in typed.feedback and "Message" not in typed.feedback, typed.feedback
    # nothing changed: the editor's text, read again, is no news
    same = await act(env, "click", selector="#name")
    assert same.feedback == "no visible change", same.feedback


async def test_a_slowed_page_reports_no_change_the_page_did_not_make(env, url):
    """A page whose script runs 40 times slower than usual (what a loaded machine does to a
    renderer): an editor's text read too late is no news, never "now empty" or "now filled".
    The slowed page gets 10 s per action, so that a loaded machine cannot make the click
    itself time out. The unslowed test above holds the editor's text being told."""
    env.settings = quick_settings(action_timeout=10.0)  # this environment's own, the host's untouched
    await env.reset(task(url))
    await env.observe()
    cdp = await env.page.context.new_cdp_session(env.page)
    await cdp.send("Emulation.setCPUThrottlingRate", {"rate": 40})
    result = await act(env, "click", selector="#fill")
    # read in time, the editor's new text is told; read too late (the machine loaded besides
    # the throttle), it is not mentioned: never said to be emptied or to hold something else
    assert 'paragraph "Filled by the page"' in result.feedback, result.feedback
    told = [part for part in result.feedback.split(";") if 'textbox "Message"' in part]
    assert all('now "Filled by the page"' in part for part in told), result.feedback
    for _ in range(2):
        same = await act(env, "click", selector="#name")
        assert same.feedback == "no visible change", same.feedback


#: An editor inside an open shadow root; the page holds no other editor.
IN_SHADOW = """<!doctype html><title>Shadow editor</title><div id=host></div><label>Name <input></label>
<script>
host.attachShadow({mode: 'open'}).innerHTML = '<label id=l>Reply</label><div contenteditable=true role=textbox '
  + 'aria-labelledby=l style="min-height:30px;border:1px solid #999"></div>';
</script>"""

#: An editor inside an iframe; the top document holds none.
IN_FRAME = """<!doctype html><title>Framed editor</title><label>Name <input></label>
<iframe srcdoc="<label id=l>Reply</label><div contenteditable=true role=textbox aria-labelledby=l
  style='min-height:30px;border:1px solid #999'></div>"></iframe>"""


@pytest.mark.parametrize("page", [IN_SHADOW, IN_FRAME], ids=["shadow-root", "iframe"])
async def test_an_editor_inside_a_shadow_root_or_an_iframe_is_read(env, owrl_page_server, page):  # noqa: F811
    """The one look that tells whether a page holds an editor walks open shadow roots and
    every frame: an editor found only there is read, not taken for an empty native field."""
    await env.reset(task(owrl_page_server({"/": page})))
    await write_and_read_back(env, "Reply", "thanks, on my way")
