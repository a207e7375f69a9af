"""The OpenWebRL answer parser against a corpus of well-formed and malformed outputs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from owrl_openwebrl.parser import parse_turn, render_turn

GOOD = [
    ('<think>click go</think>\n<tool_call>\n{"name": "click", "arguments": {"point_2d": [500, 120]}}\n</tool_call>',
     "click go", [("click", {"point_2d": [500, 120]})]),
    ('<think>two</think><tool_call>{"name": "write", "arguments": {"message": "hat", "ref": "e4"}}</tool_call>'
     '<tool_call>{"name": "press_keys", "arguments": {"keys": ["Enter"]}}</tool_call>',
     "two", [("write", {"message": "hat", "ref": "e4"}), ("press_keys", {"keys": ["Enter"]})]),
    # missing </think>: the thought runs to the first call
    ('<think>no close <tool_call>{"name": "go_back", "arguments": {}}</tool_call>', "no close", [("go_back", {})]),
    # missing </tool_call> at the end of the answer
    ('<think>t</think><tool_call>{"name": "done", "arguments": {"response": "19.99"}}', "t", [("done", {"response": "19.99"})]),
    # trailing comma, single quotes, Python literals
    ("<tool_call>{'name': 'click', 'arguments': {'ref': 'e2', 'clicks': 2,}}</tool_call>", "", [("click", {"ref": "e2", "clicks": 2})]),
    ('<tool_call>{"name": "press_keys", "arguments": {"keys": ["Control", "a"], "is_hotkey": True}}</tool_call>', "",
     [("press_keys", {"keys": ["Control", "a"], "is_hotkey": True})]),
    # a forgotten closing brace; arguments as a JSON string; the OpenAI function wrapping
    ('<tool_call>{"name": "scroll", "arguments": {"direction": "down"}</tool_call>', "", [("scroll", {"direction": "down"})]),
    ('<tool_call>{"name": "write", "arguments": "{\\"message\\": \\"hi\\"}"}</tool_call>', "", [("write", {"message": "hi"})]),
    ('<tool_call>{"function": {"name": "wait", "arguments": {"seconds": 1}}}</tool_call>', "", [("wait", {"seconds": 1})]),
    # a fenced JSON body
    ('<tool_call>```json\n{"name": "go_back", "arguments": {}}\n```</tool_call>', "", [("go_back", {})]),
    # unknown tools parse: the loop answers them with an error the model can read
    ('<tool_call>{"name": "teleport", "arguments": {"to": "mars"}}</tool_call>', "", [("teleport", {"to": "mars"})]),
]


@pytest.mark.parametrize("text, thought, calls", GOOD)
def test_good_and_repairable(text, thought, calls):
    turn = parse_turn(text)
    assert turn.parse_error is None
    assert turn.thought == thought
    assert [(c.name, c.arguments) for c in turn.calls] == calls
    assert turn.raw == text


BAD = [
    ("<think>I will click</think> the button", "no <tool_call> block found"),
    ("", "no <tool_call> block found"),
    ("<tool_call>{name: click}</tool_call>", "tool call 1 is not valid JSON"),
    ('<tool_call>{"arguments": {}}</tool_call>', "tool call 1 has no tool name"),
    ('<tool_call>["click"]</tool_call>', "tool call 1 must be a JSON object"),
    ('<tool_call>{"name": "click", "arguments": [1, 2]}</tool_call>', "arguments that are not an object"),
    ('<tool_call>{"name": "go_back", "arguments": {}}</tool_call><tool_call>{oops</tool_call>', "tool call 2 is not valid JSON"),
]


@pytest.mark.parametrize("text, error", BAD)
def test_malformed_outputs_explain_themselves(text, error):
    turn = parse_turn(text)
    assert turn.calls == []
    assert error in turn.parse_error


def test_expect_is_read_and_round_trips():
    text = ('<tool_call>{"name": "click", "arguments": {"selector": "text=Go"}, '
            '"expect": {"url_contains": "/results"}}</tool_call>')
    turn = parse_turn(text)
    assert turn.calls[0].expect.url_contains == "/results"
    again = parse_turn(render_turn("why", turn.calls))
    assert again.calls == turn.calls and again.thought == "why"


def test_bad_expect_is_a_parse_error():
    turn = parse_turn('<tool_call>{"name": "click", "arguments": {}, "expect": {"url_has": "x"}}</tool_call>')
    assert "invalid expect for click" in turn.parse_error


TOKENS = ["<tool_call>", "</tool_call>", "<think>", "</think>", "{", "}", "[", "]", '"', ":", ",", "'", " ",
          "\n", "name", "arguments", "click", "point_2d", "1", "True", "null"]


@hsettings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=60).map("".join))
def test_no_input_raises(text):
    turn = parse_turn(text)
    assert (turn.parse_error is None) == bool(turn.calls)
