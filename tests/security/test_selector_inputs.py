"""An input never changes what a selector means.

A flow's selector may hold ``{{input:NAME}}``. A value from a spreadsheet row is written as a
value of the context the placeholder sits in: escaped inside quotes and inside an attribute's
regular expression; outside quotes only a plain name is written, anything else is refused
before a browser starts. Each case plays a real flow on a page served on 127.0.0.1 whose
buttons count their clicks.
"""

from __future__ import annotations

from typing import Any

import pytest
from security_support import attack

from owrl_sdk import Agent
from owrl_sdk.config import Settings
from owrl_sdk.errors import UsageError

PAGE = {"/": """<html><head><title>Orders</title></head><body>
<div id="row-A-12"><span>Order A-12</span> <button class="view" onclick="hit('view A-12')">View</button></div>
<div id="row-nope"><button class="x" onclick="hit('nope')">Nope</button></div>
<button id="danger" onclick="hit('danger')">Delete everything</button>
<button onclick="hit('quoted')">Say "hi" \\ now</button>
<button onclick="hit('quoted-decoy')">Say</button>
<table><tr><td>A/1.2 (x)</td><td><button onclick="hit('regex')">Open</button></td></tr>
<tr><td>A/1x2 (x)</td><td><button onclick="hit('regex-decoy')">Open</button></td></tr></table>
<ol id="hits"></ol>
<script>function hit(what) { const li = document.createElement('li'); li.textContent = what;
  document.getElementById('hits').append(li); }</script>
</body></html>"""}


def flow(url: str, selector: str, name: str) -> dict[str, Any]:
    return {"schema": "owrl.flow/1", "task": "open an order", "start_url": url,
            "inputs": {name: {"type": "string"}},
            "turns": [{"calls": [{"name": "click", "arguments": {"selector": selector}}]},
                      {"calls": [{"name": "extract", "arguments": {"selector": "#hits"}, "save_as": "hits"}]},
                      {"calls": [{"name": "done", "arguments": {"response": "done"}}]}]}


async def play(url: str, selector: str, value: str, tmp_path) -> Any:
    s = Settings(runs_dir=str(tmp_path / "runs"))
    async with Agent(settings=s) as agent:
        return await agent.run_flow(flow(url, selector, "v"), {"v": value})


def clicked(traj: Any) -> str:
    return " | ".join(str(c.result.data) + (c.result.feedback or "") for s in traj.steps for c in s.calls
                      if c.call.name == "extract" and c.result is not None)


@pytest.mark.parametrize("value", ["nope .x, #danger, #nope", "A-12 .view, #danger", "A-12 >> xpath=//button[@id='danger']",
                                   "A-12:is(#danger)", "x\n#danger"])
async def test_a_value_outside_quotes_that_would_change_the_selector_is_refused(owrl_page_server, tmp_path, value):
    url = owrl_page_server(PAGE)
    with attack("inputs", f"#row-{{{{input:id}}}} .view with id = {value!r}",
                "outside quotes only a plain name is written; refused before a browser starts"):
        with pytest.raises(UsageError, match="placed in the selector"):
            await play(url, "#row-{{input:v}} .view", value, tmp_path)
        assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


async def test_values_are_written_as_values_of_their_context(owrl_page_server, tmp_path):
    url = owrl_page_server(PAGE)
    cases = [("#row-{{input:v}} .view", "A-12", "view A-12"),
             ('role=button[name="{{input:v}}"]', 'Say "hi" \\ now', "quoted"),
             ("role=row[name=/{{input:v}}/] >> role=button", "A/1.2 (x)", "regex")]
    for selector, value, expected in cases:
        with attack("inputs", f"{selector} with a value holding the context's own quote or pattern characters",
                    "escaped for the context it sits in"):
            traj = await play(url, selector, value, tmp_path / expected)
            assert traj.outcome.status == "success", traj.outcome
            got = clicked(traj)
            assert expected in got and "danger" not in got and "decoy" not in got, got
