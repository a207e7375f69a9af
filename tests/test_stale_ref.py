"""A ref that went stale within a turn is found again once, by the role and name it had."""

from __future__ import annotations

import re

from owrl_sdk import Agent
from owrl_sdk.config import Settings
from owrl_sdk.contract.policy import Policy
from owrl_sdk.types import ToolCall, Turn

PAGE = ("data:text/html,<title>Stale</title><div id=box></div><script>"
        "function draw(){document.getElementById('box').innerHTML="
        "'<button onclick=draw()>Refresh</button><button onclick=\"document.title=String(Math.random())\">Target</button>'}"
        "draw()</script>")


class UsesOldRefs(Policy):
    name = "old-refs"

    async def act(self, context):
        if context.history:
            return Turn(calls=[ToolCall(name="done", arguments={"response": context.observation.title})])
        aria = context.observation.aria
        ref = {name: re.search(rf'button "{name}" \[ref=(\w+)\]', aria).group(1) for name in ("Refresh", "Target")}
        # Refresh re-renders both buttons: the Target ref the policy saw is gone afterwards
        return Turn(calls=[ToolCall(name="click", arguments={"ref": ref["Refresh"]}),
                           ToolCall(name="click", arguments={"ref": ref["Target"]})])


async def test_stale_ref_is_resolved_by_role_and_name(tmp_path):
    s = Settings(runs_dir=str(tmp_path))
    async with Agent(UsesOldRefs(s), settings=s) as agent:
        traj = await agent.run("click the target", PAGE)
    first = traj.steps[0].calls
    assert first[0].result.ok and first[1].result.ok, first[1].result
    assert traj.outcome.answer not in ("Stale", "", None)  # the Target click ran: the title changed


async def test_without_the_fallback_the_stale_ref_fails(tmp_path, monkeypatch):
    from owrl_sdk.browser.env import BrowserEnv

    monkeypatch.setattr(BrowserEnv, "_by_role_and_name", lambda self, ref: None)
    s = Settings(runs_dir=str(tmp_path))
    async with Agent(UsesOldRefs(s), settings=s) as agent:
        traj = await agent.run("click the target", PAGE)
    assert "is not in the latest page snapshot" in traj.steps[0].calls[1].result.error
