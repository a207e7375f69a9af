"""`Agent.run_flow` checks and fills a flow's inputs in one call, before any browser starts,
with the errors the CLI gives; then plays the flow, whatever policy the Agent has for tasks."""

from __future__ import annotations

import time

import pytest
from test_checkboxes_and_conditions import invoice_flow

from owrl_sdk import Agent
from owrl_sdk.errors import UsageError


def test_run_flow_fills_the_inputs_and_plays_the_flow(tmp_path, invoice_site):
    with Agent() as agent:  # the default policy is never made: a flow plays with the flow player
        traj = agent.run_flow_sync(invoice_flow(), inputs={"customer": "Globex Ltd", "amount": 42, "priority": True},
                                   url=invoice_site, out=tmp_path / "runs")
        assert agent._policy is None
    assert traj.outcome.status == "success", traj.outcome
    assert "created for Globex Ltd: 42 EUR" in traj.outcome.outputs["confirmation"]
    assert "(priority, bank)" in traj.outcome.outputs["confirmation"]
    assert traj.inputs["amount"] == 42 and traj.inputs["priority"] is True
    typed = [c.call.arguments.get("message") for s in traj.steps for c in s.calls if c.call.name == "write"]
    assert "{{input:customer}}" not in typed and "Globex Ltd" in typed


def test_missing_and_bad_inputs_are_refused_before_a_browser_starts(tmp_path, invoice_site):
    agent = Agent()
    started = time.monotonic()
    with pytest.raises(UsageError) as err:
        agent.run_flow_sync(invoice_flow(), inputs={"amount": "lots", "colour": "red"}, url=invoice_site,
                            out=tmp_path / "runs")
    message = str(err.value)
    assert "3 input problems" in message
    assert "customer" in message and "amount" in message and "unknown input 'colour'" in message
    assert agent._host is None and time.monotonic() - started < 5
    assert not (tmp_path / "runs").exists()


def test_an_unknown_tool_is_refused_before_a_browser_starts(invoice_site):
    flow = invoice_flow()
    flow["turns"][0]["calls"][0]["name"] = "tick_box"
    with pytest.raises(UsageError, match="tick_box"):
        Agent().prepare_flow(flow, {"customer": "Initech", "amount": 1}, url=invoice_site)
