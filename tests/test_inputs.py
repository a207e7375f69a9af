"""Inputs: ``{{input:NAME}}`` in flows and tasks, checked all at once and filled in before a run."""

from __future__ import annotations

import pytest

from owrl_sdk.formats.documents import Flow, flow_from_data
from owrl_sdk.errors import DocumentError, UsageError
from owrl_sdk.rules.inputs import InputSpec, apply_inputs, placeholders, resolve_inputs
from owrl_sdk.types import Task


def flow(**extra):
    data = {
        "task": "order {{input:quantity}} of {{input:item}} for {{input:name}}",
        "start_url": "http://127.0.0.1:1/search?q={{input:item}}&page=1",
        "inputs": {
            "name": {"description": "the customer's name"},
            "item": {"type": "string", "default": "tote bag"},
            "quantity": {"type": "integer", "default": 1},
            "gift": {"type": "boolean", "default": False},
        },
        "turns": [{"calls": [
            {"name": "write", "arguments": {"selector": "#name", "text": "{{input:name}}"},
             "expect": {"value_equals": {"selector": "#name", "value": "{{input:name}}"}}},
            {"name": "goto_url", "arguments": {"url": "http://127.0.0.1:1/p/{{input:item}}#{{input:name}}"},
             "expect": {"url_contains": "/p/{{input:item}}", "url_matches": "q={{ input:item }}$"}},
        ]}],
    }
    data.update(extra)
    return flow_from_data(data)


def test_a_spec_is_required_without_a_default_and_its_default_takes_its_type():
    assert InputSpec().required and InputSpec().type == "string"
    assert not InputSpec(default="x").required
    assert InputSpec.model_validate({"type": "integer", "default": "2"}).default == 2
    assert InputSpec.model_validate({"type": "boolean", "default": "yes"}).default is True
    with pytest.raises(ValueError, match="not an integer"):
        InputSpec.model_validate({"type": "integer", "default": "two"})
    with pytest.raises(ValueError):
        InputSpec.model_validate({"type": "date"})


def test_a_flow_declares_inputs_and_a_bad_declaration_names_the_field():
    f = flow()
    assert set(f.inputs) == {"name", "item", "quantity", "gift"}
    assert placeholders(f) == {"name", "item", "quantity"}
    with pytest.raises(DocumentError, match="inputs"):
        flow(inputs={"bad name": {}})
    with pytest.raises(DocumentError, match="save_as"):
        flow_from_data({"turns": [{"calls": [{"name": "done", "save_as": "not a name"}]}]})
    # a flow without inputs writes none, as before
    assert '"inputs"' not in Flow(turns=[{"calls": [{"name": "done"}]}]).to_json()


def test_values_are_typed_and_defaults_fill_in():
    f = flow()
    values = resolve_inputs(f.inputs, {"name": "Maria", "quantity": "3", "gift": "Yes"}, placeholders(f))
    assert values == {"name": "Maria", "item": "tote bag", "quantity": 3, "gift": True}
    for text, expected in [("true", True), ("no", False), ("1", True), ("0", False), ("FALSE", False)]:
        assert resolve_inputs(f.inputs, {"name": "M", "gift": text}, set())["gift"] is expected
    # values of JSON types (a JSONL row) are taken as they are
    assert resolve_inputs(f.inputs, {"name": "M", "quantity": 4, "gift": True}, set())["quantity"] == 4
    number = {"price": InputSpec(type="number")}
    assert resolve_inputs(number, {"price": "2.50"}, set()) == {"price": 2.5}
    assert resolve_inputs(number, {"price": "7"}, set()) == {"price": 7}


def test_every_problem_is_named_in_one_error():
    f = flow()
    used = placeholders(f) | {"coupon"}
    with pytest.raises(UsageError) as caught:
        resolve_inputs(f.inputs, {"quantity": "two", "gift": "maybe", "colour": "red"}, used)
    message = str(caught.value)
    assert message.startswith("5 input problems: ")
    assert "\n" not in message
    assert "missing input 'name' (the customer's name): pass --input name=..." in message
    assert "input 'quantity' must be an integer: 'two'" in message
    assert "input 'gift' must be a boolean: 'maybe' (expected true/false, yes/no or 1/0)" in message
    assert "unknown input 'colour' (inputs: coupon, gift, item, name, quantity)" in message
    assert "{{input:coupon}} is used but has no value" in message
    # the same problems as data, for a door that maps them onto its own fields (the server)
    problems = {(p.name, p.code) for p in caught.value.problems}
    assert problems == {("name", "missing"), ("quantity", "type"), ("gift", "type"), ("colour", "unknown"),
                        ("coupon", "unset")}
    coupon = next(p for p in caught.value.problems if p.name == "coupon")
    assert coupon.text("give inputs.{name} a value") == \
        "{{input:coupon}} is used but has no value: declare it or give inputs.coupon a value"


def test_wrong_numbers_are_refused():
    spec = {"n": InputSpec(type="integer"), "x": InputSpec(type="number")}
    for n, x in [("1.5", "nan"), ("1e3", "inf"), ("", ""), ("1_000", "1,5"), (True, False)]:
        with pytest.raises(UsageError, match="2 input problems"):
            resolve_inputs(spec, {"n": n, "x": x}, set())


def test_undeclared_placeholders_take_strings_and_unused_names_are_unknown():
    assert resolve_inputs({}, {"q": "42"}, {"q"}) == {"q": "42"}
    with pytest.raises(UsageError, match="unknown input 'q' \\(this flow takes no inputs\\)"):
        resolve_inputs({}, {"q": "42"}, set())


def test_an_input_value_never_carries_a_secret():
    with pytest.raises(UsageError, match="inputs are not secrets"):
        resolve_inputs({}, {"q": "x {{secret:PASSWORD}}"}, {"q"})
    with pytest.raises(UsageError, match="inputs are not secrets"):
        resolve_inputs({"q": InputSpec()}, {"q": "{{ secret:PASSWORD }}"}, set())


def test_input_values_never_make_a_secret_placeholder_between_them():
    """Each cell alone is not a placeholder, but filled in side by side (or into the text around
    them) they would make one, which a tool would then resolve and type: refused as a whole."""
    message = flow_from_data({"turns": [{"calls": [
        {"name": "write", "arguments": {"selector": "#note", "text": "{{input:first}} {{input:last}}"}}]}]})
    used = placeholders(message)
    for first, last in [("{{secret:SHOP_PASSWORD", "}}"), ("{{", "secret:SHOP_PASSWORD}}")]:
        values = resolve_inputs({}, {"first": first, "last": last}, used)  # neither is a placeholder alone
        with pytest.raises(UsageError, match=r"make a \{\{secret:\.\.\.\}\} placeholder"):
            apply_inputs(message, values)
    around = flow_from_data({"turns": [{"calls": [
        {"name": "write", "arguments": {"selector": "#note", "text": "{{secret:{{input:which}}}}"}}]}]})
    with pytest.raises(UsageError, match="inputs are not secrets"):  # a cell choosing which secret
        apply_inputs(around, resolve_inputs({}, {"which": "SHOP_PASSWORD"}, placeholders(around)))
    # the flow's own placeholder stays, and a value that merely looks like half of one is text
    own = flow_from_data({"turns": [{"calls": [
        {"name": "write", "arguments": {"selector": "#note", "text": "{{secret:PIN}} {{input:note}}"}}]}]})
    done = apply_inputs(own, resolve_inputs({}, {"note": "{{secret:"}, placeholders(own)))
    assert done.turns[0].calls[0].arguments["text"] == "{{secret:PIN}} {{secret:"


def test_values_are_written_as_text_and_encoded_in_urls():
    f = flow()
    values = resolve_inputs(f.inputs, {"name": "Ana & Bo", "item": "a b/c?d#e&x=1"}, placeholders(f))
    filled = apply_inputs(f, values)
    assert filled is not f and placeholders(f) == {"name", "item", "quantity"}  # the original is left alone
    assert filled.task == "order 1 of a b/c?d#e&x=1 for Ana & Bo"
    assert filled.start_url == "http://127.0.0.1:1/search?q=a%20b%2Fc%3Fd%23e%26x%3D1&page=1"
    write, goto = filled.turns[0].calls
    assert write.arguments["text"] == "Ana & Bo"
    assert write.expect.value_equals.value == "Ana & Bo"
    assert goto.arguments["url"] == "http://127.0.0.1:1/p/a%20b%2Fc%3Fd%23e%26x%3D1#Ana%20%26%20Bo"
    assert goto.expect.url_contains == "/p/a%20b%2Fc%3Fd%23e%26x%3D1"
    assert goto.expect.url_matches == "q=a%20b%2Fc%3Fd%23e%26x%3D1$"
    assert filled.inputs == f.inputs  # the declarations stay


def test_a_value_that_makes_the_address_is_written_as_it_is():
    f = flow_from_data({"start_url": "{{input:base}}/orders", "turns": [{"calls": [
        {"name": "goto_url", "arguments": {"url": "https://{{input:host}}/x?y={{input:host}}"}}]}]})
    filled = apply_inputs(f, {"base": "http://127.0.0.1:8000", "host": "a.example:81"})
    assert filled.start_url == "http://127.0.0.1:8000/orders"
    assert filled.turns[0].calls[0].arguments["url"] == "https://a.example:81/x?y=a.example%3A81"


def test_substitution_is_one_pass_and_keeps_types_of_booleans_as_words():
    f = flow_from_data({"task": "{{input:a}} {{input:b}} {{input:c}}", "turns": [{"calls": [{"name": "done"}]}]})
    filled = apply_inputs(f, {"a": "{{input:b}}", "b": True, "c": 2.5})
    assert filled.task == "{{input:b}} true 2.5"


def test_a_task_declares_inputs_too():
    task = Task(intent="find {{input:item}}", start_url="http://127.0.0.1:1/?q={{input:item}}",
                inputs={"item": {"default": "red shirt"}})
    values = resolve_inputs(task.inputs, {}, placeholders(task))
    filled = apply_inputs(task, values)
    assert filled.intent == "find red shirt" and filled.start_url == "http://127.0.0.1:1/?q=red%20shirt"
    assert filled.id == task.id
