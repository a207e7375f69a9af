"""The openwebrl profile reads answers by the official parser's rules.

The official loop parses with sglang's ``qwen25`` detector (``openwebrl/base/utils.py``,
``ToolParser`` in auto mode); these rules are that detector's documented behaviour in the
sglang 0.5 line the official requirements pin: blocks are ``<tool_call>\\n...\\n</tool_call>``
anywhere in the text, read with strict JSON, a bad block skipped, an undeclared name dropped,
``parameters`` before ``arguments``, and an answer with no surviving call a parse failure.
owrl's own profile keeps its lenient parser; the last test shows the two part ways.
"""

from __future__ import annotations

import json

from owrl_openwebrl.parser import parse_official, parse_turn
from owrl_openwebrl.profiles import OpenWebRLProfile, OwrlProfile

TOOLS = {"click", "write", "done", "scroll"}


def block(payload) -> str:
    body = payload if isinstance(payload, str) else json.dumps(payload)
    return f"<tool_call>\n{body}\n</tool_call>"


def test_a_block_that_is_not_json_is_dropped_and_its_siblings_still_run():
    text = "<think>type then submit</think>\n" + "\n".join([
        block({"name": "write", "arguments": {"message": "hi"}}),
        block("{'name': 'click', 'arguments': {}}"),  # single quotes: strict JSON refuses it
        block({"name": "click", "arguments": {"point_2d": [1, 2]}}),
    ])
    turn = parse_official(text, TOOLS)
    assert turn.parse_error is None
    assert [c.name for c in turn.calls] == ["write", "click"]
    assert turn.calls[1].arguments == {"point_2d": [1, 2]}
    assert turn.dropped == ["block 2 is not JSON"]
    assert turn.thought == "type then submit"


def test_undeclared_names_and_nameless_calls_are_dropped():
    text = "</think>" + block({"name": "call_user", "arguments": {"question": "?"}}) + "\n" + \
        block({"arguments": {"x": 1}}) + "\n" + block({"name": "done", "arguments": {"response": "ok"}})
    turn = parse_official(text, TOOLS)
    assert [c.name for c in turn.calls] == ["done"]
    assert turn.dropped == ["block 1 names an undeclared tool 'call_user'"]


def test_no_surviving_call_is_a_parse_failure():
    only_unknown = parse_official("</think>" + block({"name": "focus", "arguments": {}}), TOOLS)
    assert only_unknown.calls == [] and only_unknown.parse_error
    assert "undeclared tool 'focus'" in only_unknown.parse_error
    assert parse_official("I would click the button.", TOOLS).parse_error.endswith("(no <tool_call> block found)")
    # the detector's tokens carry their newlines: a block written on one line is not found
    one_line = parse_official('<tool_call>{"name": "done", "arguments": {"response": "x"}}</tool_call>', TOOLS)
    assert one_line.parse_error and "no block written as" in one_line.parse_error


def test_no_repair_of_what_owrl_repairs():
    slips = [
        '{"name": "done", "arguments": {"response": "x"},}',  # trailing comma
        '{"name": "done", "arguments": {"response": "x"}',  # a brace short
        "```json\n{\"name\": \"done\", \"arguments\": {}}\n```",  # fenced
    ]
    for body in slips:
        text = "</think>" + block(body)
        assert parse_official(text, TOOLS).parse_error, body
        assert parse_turn(text).calls, body  # owrl's parser reads each


def test_calls_inside_think_are_read_as_the_official_parser_reads_them():
    text = "<think>maybe " + block({"name": "click", "arguments": {"point_2d": [5, 5]}}) + " no</think>\n" + \
        block({"name": "done", "arguments": {"response": "r"}})
    assert [c.name for c in parse_official(text, TOOLS).calls] == ["click", "done"]


def test_parameters_come_before_arguments_and_a_list_holds_several_calls():
    both = parse_official(block({"name": "scroll", "parameters": {"direction": "up"},
                                 "arguments": {"direction": "down"}}), TOOLS)
    assert both.calls[0].arguments == {"direction": "up"}
    several = parse_official(block([{"name": "write", "arguments": {"message": "a"}},
                                    {"name": "click", "arguments": {"point_2d": [1, 1]}}]), TOOLS)
    assert [c.name for c in several.calls] == ["write", "click"]
    bad_args = parse_official(block({"name": "click", "arguments": [1, 2]}), TOOLS)
    assert bad_args.parse_error and "not an object" in bad_args.parse_error


def test_the_profiles_parse_by_their_own_rules():
    text = "</think>\n" + block({"name": "click", "arguments": {"point_2d": [1, 2]}}) + "\n" + block("{oops")
    official = OpenWebRLProfile().parse(text)
    assert [c.name for c in official.calls] == ["click"] and official.dropped == ["block 2 is not JSON"]
    assert OwrlProfile().parse(text).parse_error  # owrl's profile fails the answer on its bad block
    # the declared tools decide what is known: the stand-in list has no call_user
    assert OpenWebRLProfile().parse(block({"name": "call_user", "arguments": {}})).parse_error


def test_a_parse_failure_is_answered_with_the_observation_already_sent():
    """The official loop does not step the environment after an unreadable answer: the next
    tool response holds the parse-failure line and the previous observation."""
    from openwebrl_case import context
    from owrl_sdk.types import Observation, Step, Tab, Turn

    ctx = context()
    before = ctx.history[-1].observation
    unread = Step(index=3, observation=Observation(url=before.url, title="Before", tabs=[
        Tab(index=0, url=before.url, title="Before", active=True)]), turn=Turn(raw="hm", parse_error="no call"))
    ctx.history.append(unread)
    msgs = OpenWebRLProfile().render(ctx, tools_in_system=False).text_only()
    last = msgs[-1]["content"][0]["text"]
    assert last.startswith("<tool_response>\nFailed: the answer could not be read: no call")
    assert "- Tab 0 (active): " + before.url + " - Before" in last  # the step's own observation
    assert "Help" not in last  # not the page as it was looked at again


def test_where_the_detector_gives_up_the_fallback_reads_the_answer():
    """A block that is JSON but no call (a number, a text) or a call named by a list makes the
    official detector give up; its fallback then reads every block that is a JSON object right
    between the tags: an object with a name is a call, declared or not (the environment answers
    that it has no such tool), and one block that is not JSON fails the whole answer."""
    undeclared = parse_official(block("42") + "\n" + block({"name": "select_option", "arguments": {"value": "x"}}), TOOLS)
    assert [(c.name, c.arguments) for c in undeclared.calls] == [("select_option", {"value": "x"})]
    listed = parse_official(block({"name": ["click"], "arguments": {}}) + "\n" + block({"name": "click", "arguments": {"a": 1}}),
                            TOOLS)
    assert [(c.name, c.arguments) for c in listed.calls] == [("['click']", {}), ("click", {"a": 1})]
    bad = parse_official(block('"text"') + "\n" + block('{"name": "click", oops}') + "\n" + block({"name": "click"}), TOOLS)
    assert bad.parse_error is not None and "is not JSON" in bad.parse_error and bad.calls == []
    # without such a block the detector's own rules stand: an undeclared name is dropped
    assert parse_official(block({"name": "select_option", "arguments": {}}), TOOLS).parse_error is not None
