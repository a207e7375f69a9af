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
    for bad in ("1 + 1", "{{input:a}} and {{input:b}}", "not {{input:a}} == x", "{{secret:A}}", "__import__('os')"):
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
