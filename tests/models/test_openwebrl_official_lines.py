"""The official status lines, parse-failure message and truncation, extracted with ast from
stand-in sources (openwebrl_fake_sources: the official code's shapes, placeholder words) and
rendered from the facts owrl records: what a fetched copy of the official files gives, shown
character for character without any official text in the repository."""

from __future__ import annotations

import json

import pytest

from openwebrl_fake_sources import FAKE_FEEDBACK, FAKE_LOOP, FAKE_WEB_ENV
from owrl_openwebrl import official
from owrl_openwebrl.profiles import OpenWebRLProfile, official_status_line, to_builtin
from owrl_sdk.types import CallRecord, Observation, Step, ToolCall, ToolResult, Turn


@pytest.fixture(scope="module")
def templates():
    found, missing = official.extract_templates(FAKE_WEB_ENV, FAKE_LOOP, FAKE_FEEDBACK)
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
    assert missing == ["tools.hover.ok", "tools.hover.error", "parse_failure", "truncation"]


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
