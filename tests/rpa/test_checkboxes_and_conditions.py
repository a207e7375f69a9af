"""A boolean input drives a checkbox (set_checked), a radio is chosen in one call, and a flow's
turns and calls run only when their condition holds: on the invoice form, through `owrl run`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from owrl_cli import owrl

from owrl_sdk.formats.documents import flow_from_data
from owrl_sdk.rules.inputs import apply_inputs, evaluate_condition, truthy


def invoice_flow() -> dict[str, Any]:
    return {
        "task": "Create an invoice for {{input:customer}}",
        "inputs": {"customer": {"type": "string", "required": True},
                   "amount": {"type": "number", "required": True},
                   "currency": {"type": "string", "default": "EUR"},
                   "due": {"type": "string", "default": "2027-01-31"},
                   "priority": {"type": "boolean", "default": False},
                   "card": {"type": "boolean", "default": False}},
        "turns": [
            {"calls": [{"name": "write", "arguments": {"selector": "#user", "message": "ops"}},
                       {"name": "write", "arguments": {"selector": "#password", "message": "s3cret"}},
                       {"name": "click", "arguments": {"selector": "role=button[name=\"Log in\"]"},
                        "expect": {"text_visible": "New invoice"}}]},
            {"calls": [{"name": "write", "arguments": {"selector": "#customer", "message": "{{input:customer}}"}},
                       {"name": "click", "arguments": {"selector": "role=option[name=\"{{input:customer}}\"]"}}]},
            {"calls": [{"name": "write", "arguments": {"selector": "#amount", "message": "{{input:amount}}"}},
                       {"name": "select_option", "arguments": {"selector": "#currency", "value": "{{input:currency}}"}},
                       {"name": "write", "arguments": {"selector": "#due", "message": "{{input:due}}"}},
                       {"name": "set_checked", "arguments": {"selector": "#priority", "checked": "{{input:priority}}"}}]},
            {"when": "{{input:card}}", "thought": "pay by card",
             "calls": [{"name": "set_checked", "arguments": {"selector": "role=radio[name=\"Card\"]"}}]},
            {"calls": [{"name": "click", "arguments": {"selector": "#submit"},
                        "expect": {"text_visible": "created for {{input:customer}}"}},
                       {"name": "extract", "arguments": {"selector": "#status", "what": "text"}, "save_as": "confirmation"}]},
            {"calls": [{"name": "done", "arguments": {"response": "created"}, "when": "{{output:confirmation}}"}]},
        ],
    }


def run(tmp_path: Path, site: str, *inputs: str, flow: dict[str, Any] | None = None) -> tuple[int, dict[str, Any], str]:
    path = tmp_path / "invoice.json"
    path.write_text(json.dumps(flow or invoice_flow()))
    args = [a for value in inputs for a in ("--input", value)]
    out = owrl("run", "--flow", str(path), "--url", site, *args, "--json", "--out", "runs", cwd=tmp_path)
    return out.returncode, (json.loads(out.stdout) if out.stdout.strip() else {}), out.stderr


def test_a_boolean_input_ticks_the_box_and_a_condition_chooses_the_radio(tmp_path, invoice_site):
    code, result, err = run(tmp_path, invoice_site, "customer=Globex Ltd", "amount=120.5", "priority=yes", "card=true")
    assert code == 0, (err, result)
    assert "created for Globex Ltd: 120.5 EUR, due 2027-01-31 (priority, card)" in result["outputs"]["confirmation"]
    assert result["steps"] == 6


def test_false_conditions_skip_their_turn_and_the_box_is_cleared(tmp_path, invoice_site):
    code, result, err = run(tmp_path, invoice_site, "customer=Initech", "amount=7", "priority=false")
    assert code == 0, (err, result)
    assert "created for Initech: 7 EUR, due 2027-01-31 (normal, bank)" in result["outputs"]["confirmation"]
    assert result["steps"] == 5  # the card turn did not play
    traj = json.loads((Path(result["run_dir"]) / "trajectory.json").read_text())
    thoughts = [s["turn"]["thought"] for s in traj["steps"]]
    assert thoughts[3].startswith("(skipped, their condition false: turn 4)")


def test_a_condition_on_an_output_not_saved_skips_its_call(tmp_path, invoice_site):
    flow = invoice_flow()
    flow["turns"][4]["calls"].pop()  # nothing is saved as confirmation: done does not run
    code, result, err = run(tmp_path, invoice_site, "customer=Initech", "amount=7", flow=flow)
    assert code == 1
    assert "ran out of turns" in json.dumps(result["outcome"])


def test_set_checked_refuses_what_is_not_a_box_and_clearing_a_radio(tmp_path, invoice_site):
    flow = invoice_flow()
    flow["turns"][3] = {"calls": [{"name": "set_checked", "arguments": {"selector": "role=radio[name=\"Card\"]",
                                                                        "checked": False}}]}
    code, result, err = run(tmp_path, invoice_site, "customer=Initech", "amount=7", flow=flow)
    assert code == 1
    assert "is a radio button: it cannot be cleared" in result["outcome"]["failure"]["detail"]
    flow["turns"][3] = {"calls": [{"name": "set_checked", "arguments": {"selector": "#amount"}}]}
    code, result, err = run(tmp_path, invoice_site, "customer=Initech", "amount=7", flow=flow)
    assert code == 1
    assert "is not a checkbox or a radio button" in result["outcome"]["failure"]["detail"]


def test_a_condition_is_not_a_script():
    for bad in ("1 + 1", "{{input:a}} and", "{{input:a}} === x", "{{secret:A}}", "__import__('os')", "({{input:a}}",
                "{{input:a}} == x)", "approve", "{{input:a}} > {{input:b}} > ", "len({{input:a}})"):
        try:
            flow_from_data({"turns": [{"when": bad, "calls": [{"name": "done"}]}]}, "flow.json")
        except Exception as err:  # noqa: BLE001 - the document error names the field
            assert "turns[0].when" in str(err) and "is not a condition" in str(err)
        else:
            raise AssertionError(f"{bad!r} was accepted")


def test_conditions_read_values_by_their_type():
    assert truthy("false") and truthy("0") and not truthy("  ") and not truthy(0) and not truthy(None)
    assert not truthy([]) and truthy({"a": 1}) and truthy(0.5) and not truthy(False)
    assert evaluate_condition("not {{input:p}}", {"p": False}, {})
    assert evaluate_condition("{{input:c}} == EUR", {"c": "EUR"}, {})
    assert evaluate_condition("{{input:n}} != 3", {"n": 4}, {})
    assert evaluate_condition("{{input:b}} == true", {"b": True}, {})
    assert not evaluate_condition("{{output:x}}", {}, {})
    # decided when the inputs are filled in, with the typed values
    flow = flow_from_data({"inputs": {"p": {"type": "boolean"}, "s": {"type": "string"}},
                           "turns": [{"when": "{{input:p}}", "calls": [{"name": "done"}]},
                                     {"when": "{{input:s}}", "calls": [{"name": "done", "when": "not {{input:p}}"}]}]},
                          "flow.json")
    filled = apply_inputs(flow, {"p": False, "s": "false"})
    assert [t.when for t in filled.turns] == [False, True] and filled.turns[1].calls[0].when is True


def test_a_failed_expectation_quotes_what_the_page_says(tmp_path, invoice_site):
    code, result, err = run(tmp_path, invoice_site, "customer=Initech", "amount=-5")
    assert code == 1
    detail = result["outcome"]["failure"]["detail"]
    assert "text_visible" in detail and 'the page says: "' in detail
    assert "Amount must be a positive number" in detail
    assert "Wrong user name" not in detail  # the log-in's alert is hidden with its section


def test_conditions_compare_numbers_and_texts_and_combine():
    """Comparisons (numbers as numbers, even written with a currency sign and thousands
    separators; texts as texts), and/or/not with brackets, quoted texts, null."""
    out = {"amount": "$12,500.00", "status": "Pending review", "date": "2026-12-07"}
    holds = lambda when, inputs=None: evaluate_condition(when, inputs or {}, out)  # noqa: E731
    assert holds("{{output:amount}} > 10000") and not holds("{{output:amount}} <= 10000")
    assert holds("{{output:amount}} == 12500") and holds("{{output:amount}} != 12499.99")
    assert holds("{{output:status}} == 'Pending review'") and holds("{{output:status}} == Pending review")
    assert holds("{{output:date}} < '2027-01-01'")  # ISO dates order as texts
    assert holds("{{input:d}} == approve and {{output:amount}} > 10000", {"d": "approve"})
    assert holds("not ({{input:d}} == approve or {{input:urgent}})", {"d": "reject", "urgent": False})
    assert holds("{{output:missing}} == null") and not holds("{{output:missing}}")
    import pytest

    from owrl_sdk.errors import UsageError

    with pytest.raises(UsageError, match="compares a number with 'Pending review'"):
        holds("{{output:status}} > 5")
    with pytest.raises(UsageError, match="orders a value that has none"):
        holds("{{output:missing}} < 5")
    # decided when the inputs are filled in where the condition reads inputs alone
    flow = flow_from_data({"inputs": {"n": {"type": "integer"}},
                           "turns": [{"when": "{{input:n}} > 3 and {{input:n}} < 10", "calls": [{"name": "done"}]},
                                     {"when": "{{input:n}} > {{output:x}}", "calls": [{"name": "done"}]}]}, "f.json")
    filled = apply_inputs(flow, {"n": 5})
    # one that reads an output too is left for the player, which reads the input's typed value then
    assert filled.turns[0].when is True and filled.turns[1].when == "{{input:n}} > {{output:x}}"
    assert evaluate_condition(filled.turns[1].when, {"n": 5}, {"x": "4"})


def test_a_turn_plays_its_else_when_its_condition_does_not_hold():
    import asyncio

    from owrl_sdk.config import Settings
    from owrl_sdk.contract.memory import Context
    from owrl_sdk.flows.flowplayer import ScriptedPolicy
    from owrl_sdk.types import Observation, Task

    data = {"inputs": {"amount": {"type": "number"}},
            "turns": [{"when": "{{input:amount}} > 10000",
                       "calls": [{"name": "click", "arguments": {"selector": "#budget"}}],
                       "else": [{"name": "click", "arguments": {"selector": "#standard"}}]},
                      {"calls": [{"name": "done", "arguments": {"response": "ok"}}]}]}
    for amount, selector in ((25000, "#budget"), (900, "#standard")):
        flow = apply_inputs(flow_from_data(data, "f.json"), {"amount": amount})
        player = ScriptedPolicy(Settings(), flow=flow)
        task = Task(intent="x", start_url="about:blank")
        turn = asyncio.run(player.act(Context(task=task, observation=Observation(url="about:blank"), tools=[])))
        assert [c.arguments["selector"] for c in turn.calls] == [selector]
        assert ("its else" in turn.thought) == (selector == "#standard")
    import pytest

    with pytest.raises(Exception, match="give the turn a 'when'"):
        flow_from_data({"turns": [{"calls": [{"name": "done"}], "else": [{"name": "done"}]}]}, "f.json")


def test_inputs_declare_their_allowed_values_and_a_row_that_breaks_them_is_refused_before_a_browser(tmp_path):
    """enum, minimum, maximum and pattern: a value that breaks them is refused with the
    input's name before anything runs (owrl run: one line, exit 2; a batch row: its failure)."""
    import pytest

    from owrl_sdk.errors import UsageError
    from owrl_sdk.flows.runrequest import RunRequest

    flow = flow_from_data({"task": "decide {{input:po}}", "start_url": "http://127.0.0.1:9/",
                           "inputs": {"decision": {"type": "string", "enum": ["approve", "reject"]},
                                      "amount": {"type": "number", "minimum": 0, "maximum": 1000000},
                                      "po": {"type": "string", "pattern": "PO-[0-9]{4}"}},
                           "turns": [{"calls": [{"name": "done", "arguments": {"response": "{{input:decision}}"}}]}]},
                          "f.json")
    ok = RunRequest(flow=flow, inputs={"decision": "approve", "amount": "12,5".replace(",", ""), "po": "PO-0042"})
    assert ok.values() == {"decision": "approve", "amount": 125, "po": "PO-0042"}
    with pytest.raises(UsageError) as err:
        RunRequest(flow=flow, inputs={"decision": "aprove", "amount": "-3", "po": "PO-42"}).values()
    said = str(err.value)
    assert "input 'decision' must be one of approve, reject: 'aprove'" in said
    assert "input 'amount' must be at least 0: '-3'" in said and "input 'po' must match the pattern PO-[0-9]{4}" in said
    for bad, words in (({"type": "integer", "enum": ["x"]}, "enum value 'x' is not an integer"),
                       ({"type": "string", "minimum": 1}, "minimum and maximum apply to integer and number"),
                       ({"type": "string", "pattern": "("}, "is not a regular expression"),
                       ({"type": "string", "enum": ["a"], "default": "b"}, "default 'b': must be one of a")):
        with pytest.raises(Exception, match=words):
            flow_from_data({"inputs": {"x": bad}, "turns": [{"calls": [{"name": "done"}]}]}, "f.json")
    # a batch row: its failure names the column, before any browser starts
    from owrl_sdk.config import Settings
    from owrl_sdk.flows.batch import Batch

    batch = Batch(flow, [{"decision": "approve", "amount": 5, "po": "PO-0001"}, {"decision": "maybe", "amount": 5, "po": "PO-0002"}],
                  out=tmp_path / "b", settings=Settings(runs_dir=str(tmp_path)))
    second = batch.prepare(batch.rows[1])
    assert second.status == "fail" and "input 'decision' must be one of approve, reject: 'maybe'" in second.detail
