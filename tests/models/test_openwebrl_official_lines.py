"""The official status lines, parse-failure message and truncation, extracted with ast from
stand-in sources (openwebrl_fake_sources: the official code's shapes, placeholder words) and
rendered from the facts owrl records: what a fetched copy of the official files gives, shown
character for character without any official text in the repository."""

from __future__ import annotations

import json

import pytest

from openwebrl_fake_sources import FAKE_FEEDBACK, FAKE_KEYBOARD, FAKE_LOOP, FAKE_WEB_ENV
from owrl_openwebrl import official
from owrl_openwebrl.profiles import OpenWebRLProfile, official_status_line, to_builtin
from owrl_sdk.types import CallRecord, Observation, Step, ToolCall, ToolResult, Turn


@pytest.fixture(scope="module")
def templates():
    found, missing = official.extract_templates(FAKE_WEB_ENV, FAKE_LOOP, FAKE_FEEDBACK, FAKE_KEYBOARD)
    assert missing == []
    return json.loads(json.dumps(found))  # as status_templates.json holds them


def line(templates, name, arguments, result):
    raw = ToolCall(name=name, arguments=arguments)
    record = CallRecord(call=to_builtin(raw, (1280, 1000)), result=result)
    return official_status_line(record, templates, (1280, 1000), raw)


def test_every_tool_and_note_is_found(templates):
    tools = templates["tools"]
    assert set(tools) == set(official.TOOLS)
    assert set(tools["click"]["notes"]) == {"navigated", "tab_opened", "no_change"}
    assert set(tools["write"]["notes"]) == {"navigated", "value_differs"}
    assert set(tools["scroll"]["notes"]) == {"no_move"} and set(tools["press_keys"]["notes"]) == {"navigated"}
    assert templates["truncation"] == {"max_chars": 60, "head_ratio": 0.5, "marker": [
        {"text": " <<cut "}, {"expr": "len(normalized) - max_chars"}, {"text": ">> "}]}
    # what cannot be found is named
    _, missing = official.extract_templates(FAKE_WEB_ENV.replace("_execute_hover", "_hover"), "x = 1", "(")
    assert missing == ["tools.hover.ok", "tools.hover.error", "parse_failure", "truncation", "keys"]


def test_lines_are_the_templates_filled_with_the_recorded_facts(templates):
    element = {"tag": "button", "label": "Go"}
    assert line(templates, "click", {"point_2d": [500, 100]},
                ToolResult(data={"element": element, "point": [640, 100]})) == \
        'FAKE-OK click over <button> "Go" @640,100. FAKE-NOTHING-HAPPENED.'
    assert line(templates, "click", {"point_2d": [500, 100]},
                ToolResult(data={"point": [640.4, 99.6]}, page={"navigated_to": "http://s/2", "tabs_opened": [1]})) == \
        "FAKE-OK click @640,100. went:http://s/2. tab#1."
    assert line(templates, "write", {"message": "1234567"},
                ToolResult(data={"element": {"tag": "input", "label": "Zip"}, "value": "12345"})) == \
        'FAKE-OK write [1234567] in <input> "Zip". holds [12345] instead.'
    assert line(templates, "scroll", {"direction": "down", "amount": 0.25, "point_2d": [500, 500]},
                ToolResult(data={"scroll": {"moved": 250}})) == "FAKE-OK scroll down 25% @(640.0, 500.0)."
    assert line(templates, "scroll", {"direction": "up"}, ToolResult(data={"scroll": {"moved": 0}})) == \
        "FAKE-OK scroll up 50%. FAKE-STUCK."
    assert line(templates, "press_keys", {"keys": ["Enter"]}, ToolResult()) == "FAKE-OK keys ['Enter']."
    # the keys the tool pressed, after the name corrections, each once however many presses
    assert line(templates, "press_keys", {"keys": ["enter", "esc", "nope"]},
                ToolResult(data={"keys": ["Enter", "Escape"]})) == "FAKE-OK keys ['Enter', 'Escape']."
    assert line(templates, "press_keys", {"keys": ["tab", "enter"], "presses": 2},
                ToolResult(data={"keys": ["Tab", "Tab", "Enter", "Enter"]})) == "FAKE-OK keys ['Tab', 'Enter']."
    assert line(templates, "wait", {}, ToolResult()) == "FAKE-OK slept 3."
    assert line(templates, "done", {"response": "12 dollars"}, ToolResult(answer="12 dollars")) == \
        "FAKE-OK finished => 12 dollars"
    assert line(templates, "switch_tab", {"tab_index": 1}, ToolResult(page={"url": "http://s/t"})) == \
        "FAKE-OK tab #1 (http://s/t)."
    assert line(templates, "close_tab", {}, ToolResult(data={"closed": 1}, page={"active_tab": 0})) == \
        "FAKE-OK closed #1 now #0."
    assert line(templates, "new_tab", {}, ToolResult(page={"active_tab": 2})) == "FAKE-OK new tab #2."
    # failures: the tool's own error template, or the unknown-tool one
    assert line(templates, "goto_url", {"url": "x"}, ToolResult.failure("net::ERR_NAME_NOT_RESOLVED")) == \
        "FAKE-ERR goto: net::ERR_NAME_NOT_RESOLVED"
    assert line(templates, "focus", {}, ToolResult.failure("unknown tool", kind="policy.unknown_tool")) == \
        "FAKE-NO-TOOL <focus>"


def test_the_profile_tells_the_model_in_the_fetched_words(templates):
    profile = OpenWebRLProfile(templates=templates)
    long = "x" * 80
    step = Step(index=0, observation=Observation(url="u"), turn=Turn(raw="<think>t</think>", calls=[
        ToolCall(name="done", arguments={"response": long})]),
        calls=[CallRecord(call=ToolCall(name="done", arguments={"response": long}), result=ToolResult(answer=long))])
    text = "FAKE-OK finished => " + long  # 100 characters, cut to 60 around the marker
    marker = " <<cut 40>> "
    head = int((60 - len(marker)) * 0.5)
    assert profile.feedback(step) == [text[:head] + marker + text[-(60 - len(marker) - head):]]
    assert len(profile.feedback(step)[0]) == 60
    unreadable = Step(index=0, observation=Observation(url="u"), turn=Turn(raw="hm", parse_error="no call"))
    assert profile.feedback(unreadable) == ["FAKE-COULD-NOT-READ-YOUR-CALLS."]
    # without the templates, owrl's wording
    assert OpenWebRLProfile().feedback(unreadable) == ["Failed: the answer could not be read: no call"]


def test_the_evaluator_runs_no_code():
    with pytest.raises(official.TemplateError):
        official.render([{"expr": "__import__('os').getcwd()"}], {})
    with pytest.raises(official.TemplateError):
        official.render([{"expr": "x.__class__.__mro__"}], {"x": 1})


# ------------------------------------------------------------------ the handlers' own checks


def test_refusals_are_the_handlers_own_checks_evaluated_on_the_arguments(templates):
    """A handler's ``return False, "..."`` under an ``if`` of its arguments is its refusal: the
    test is kept as source and evaluated on the call's arguments (the first that holds gives
    the line); a failure no check explains keeps the error template."""
    assert templates["tools"]["click"]["refusals"] == [{"test": "not point_2d", "line": [{"text": "FAKE-CLICK-NEEDS-POINT"}]}]
    refused = ToolResult.failure("bad arguments for click: give exactly one of point_2d, ref or selector")
    assert line(templates, "click", {}, refused) == "FAKE-CLICK-NEEDS-POINT"
    assert line(templates, "write", {"message": ""}, ToolResult.failure("bad arguments")) == "FAKE-WRITE-NEEDS-TEXT"
    assert line(templates, "press_keys", {"keys": ["foo"]}, ToolResult.failure("no key")) == "FAKE-NO-KEYS ['foo']"
    raw = ToolCall(name="switch_tab", arguments={"tab_index": 5})
    record = CallRecord(call=to_builtin(raw, (1280, 1000)), result=ToolResult.failure("there is no tab 5"))
    assert official_status_line(record, templates, (1280, 1000), raw, tabs=2) == "FAKE-RANGE 5 (0-1)."
    assert official_status_line(record, templates, (1280, 1000), raw, tabs=9) == "FAKE-ERR switch: there is no tab 5"
    # the browser's own words fill {e} where the call failed in the browser
    failed = ToolResult.failure("goto_url failed: ERR_X: nothing answers", data={"exception": "Page.goto: net::ERR_X at u"})
    assert line(templates, "goto_url", {"url": "http://u/"}, failed) == "FAKE-ERR goto: Page.goto: net::ERR_X at u"


def test_an_empty_write_types_nothing():
    """The official handler refuses an empty message before it touches the page: the mapped call
    cannot pass the write tool's argument check, so nothing is typed either."""
    assert to_builtin(ToolCall(name="write", arguments={"message": ""}), (1280, 1000)).arguments == {"message": None}
    assert to_builtin(ToolCall(name="write", arguments={}), (1280, 1000)).arguments == {"message": None}
    from builtin_tools.text import WriteArgs
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        WriteArgs(message=None)


def test_a_point_off_the_page_is_told_as_the_official_environment_reads_it(templates):
    """[1000, 1000] is (1280, 1000) on 1280 x 1000: off the page, where no element is, though
    owrl's click lands just inside; a point on the page keeps what owrl found there."""
    element = {"tag": "div", "text": "Corner"}
    at_edge = ToolResult(data={"element": element, "point": [1279, 999]})
    assert line(templates, "click", {"point_2d": [1000, 1000]}, at_edge) == "FAKE-OK click @1280,1000. FAKE-NOTHING-HAPPENED."
    inside = ToolResult(data={"element": element, "point": [1278.7, 998.0]})
    assert line(templates, "click", {"point_2d": [999, 998]}, inside) == 'FAKE-OK click over <div> "Corner" @1279,998. FAKE-NOTHING-HAPPENED.'


def test_a_tab_a_click_opened_is_followed_as_the_official_environment_follows_it(templates):
    opened = ToolResult(data={"point": [640, 100]}, page={"tabs_opened": [1], "active_tab": 1, "url": "http://s/new"})
    assert line(templates, "click", {"point_2d": [500, 100]}, opened) == "FAKE-OK click @640,100. went:http://s/new. tab#1."
    behind = ToolResult(data={"point": [640, 100]}, page={"tabs_opened": [1], "active_tab": 0, "url": "http://s/old"})
    assert line(templates, "click", {"point_2d": [500, 100]}, behind) == "FAKE-OK click @640,100. tab#1."


def test_an_element_is_quoted_as_the_page_holds_its_text(templates):
    """The first 30 characters of the text as written (indentation and line breaks in them), cut
    before the line's truncation collapses the whitespace, where owrl's own words collapse first."""
    element = {"tag": "a", "text": "Products Services and more thi...", "raw_text": "Products\n      Services and ..."}
    said = line(templates, "click", {"point_2d": [500, 100]}, ToolResult(data={"element": element, "point": [640, 100]}))
    assert official.truncate(said, {**templates["truncation"], "max_chars": 500}) == \
        'FAKE-OK click over <a> "Products Services and ..." @640,100. FAKE-NOTHING-HAPPENED.'


def test_key_names_are_the_fetched_keyboard_tables():
    """With the keyboard module fetched, its tables keep or drop each key (one character as it
    is; case aside, an alias, a mapped name, a legal name) and the names it gives are pressed as
    given; a key it drops leaves a call with no key, which the press tool refuses."""
    found, missing = official.extract_templates(FAKE_WEB_ENV, FAKE_LOOP, FAKE_FEEDBACK, FAKE_KEYBOARD)
    assert missing == [] and found["keys"] == {"aliases": {"ctl": "Control"}, "mapping": {"num5": "Numpad5", "ret": "Enter"},
                                               "legal": ["Enter", "Tab", "PageDown"]}
    keys = found["keys"]
    assert [official.official_key(k, keys) for k in ("x", "CTL", "num5", "pagedown", "ctrl+a", "", 5)] == \
        ["x", "Control", "Numpad5", "PageDown", None, None, None]
    mapped = to_builtin(ToolCall(name="press_keys", arguments={"keys": ["ctl", "num5", "bogus", "q"]}), (1280, 1000), keys)
    assert mapped.arguments == {"keys": ["Control", "Numpad5", "q"], "is_hotkey": False, "unknown": "as_given", "gap_ms": 100}
    assert to_builtin(ToolCall(name="press_keys", arguments={"keys": ["ctrl+a"]}), (1280, 1000), keys).arguments["keys"] == []
    from builtin_tools.text import PressKeysArgs
    from pydantic import ValidationError

    assert PressKeysArgs(keys=["Numpad5", "Control"], unknown="as_given").keys == ["Numpad5", "Control"]
    with pytest.raises(ValidationError, match="give at least one key"):
        PressKeysArgs(keys=[], unknown="as_given")
    # without the keyboard module, owrl's own key names stand in
    assert official.extract_templates(FAKE_WEB_ENV, FAKE_LOOP, FAKE_FEEDBACK)[1] == ["keys"]
