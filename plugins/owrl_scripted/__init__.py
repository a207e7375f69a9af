"""The ``scripted`` policy: plays a flow (``owrl.flow/1``) turn by turn.

It is the deterministic path of owrl: RPA flows, replays of recorded trajectories and
tests of the harness. A turn whose expectation failed means the page is not where the
flow assumed, so the policy stops there rather than act blindly; a flow that runs out
of turns without ``done`` ends the episode as failed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Union

from owrl_sdk import hookimpl
from owrl_sdk.documents import Flow, load_flow
from owrl_sdk.errors import UsageError
from owrl_sdk.memory import Context
from owrl_sdk.policy import Policy
from owrl_sdk.types import PolicyInfo, Turn


class ScriptedPolicy(Policy):
    name = "scripted"

    def __init__(self, settings, flow: Union[Flow, str, None] = None, **options: Any):
        super().__init__(settings, **options)
        flow = flow if flow is not None else settings.plugin("scripted").get("flow")
        if flow is None:
            raise UsageError("the scripted policy needs a flow: pass --flow FILE (or --replay TRAJECTORY)")
        self.flow = flow if isinstance(flow, Flow) else load_flow(flow)
        self.position = 0

    def info(self) -> PolicyInfo:
        return PolicyInfo(name=self.name, model=None)

    async def act(self, context: Context) -> Turn:
        if not context.history:
            self.position = 0
        last = context.last_step
        diverged = _failed_expectation(last) if last is not None else None
        if diverged:
            return Turn(end=f"flow stopped: {diverged}")
        if self.position >= len(self.flow.turns):
            return Turn(end=f"flow ran out of turns after {len(self.flow.turns)} without done")
        planned = self.flow.turns[self.position]
        self.position += 1
        calls = [c.model_copy(deep=True) for c in planned.calls]
        return Turn(thought=planned.thought, calls=calls, raw=None)


def _failed_expectation(step) -> Optional[str]:
    for record in step.calls:
        if record.verdict is not None and not record.verdict.ok:
            return f"{record.call.name}: {record.verdict.describe()}"
        if record.result is not None and not record.result.ok:
            return f"{record.call.name}: {record.result.error}"
    return None


@hookimpl
def register_policies(register):
    register(ScriptedPolicy)


class HealingPolicy(Policy):
    """Plays a flow; when the page stops matching it, hands over to another policy.

    The hand-over happens at the first failed expectation or failed call: from then on the
    healer decides every turn, from the current page, with the task and the history so far.
    """

    name = "scripted-healing"

    def __init__(self, settings, flow: Union[Flow, str], healer: Policy, **options: Any):
        super().__init__(settings, **options)
        self.script = ScriptedPolicy(settings, flow=flow)
        self.healer = healer
        self.healed_at: Optional[int] = None

    def info(self) -> PolicyInfo:
        inner = self.healer.info()
        return PolicyInfo(name=f"scripted+{inner.name}", model=inner.model, revision=inner.revision)

    async def act(self, context: Context) -> Turn:
        if not context.history:
            self.healed_at = None
        if self.healed_at is None:
            turn = await self.script.act(context)
            if turn.end is None:
                return turn
            self.healed_at = len(context.history)
        return await self.healer.act(context)

    async def close(self) -> None:
        await self.healer.close()


def next_flow_version(path: Union[str, Path]) -> Path:
    """``flow.json`` -> ``flow.v2.json`` -> ``flow.v3.json``: the first that does not exist."""
    import re

    p = Path(path)
    stem = re.sub(r"\.v\d+$", "", p.stem)
    n = 2
    while (p.parent / f"{stem}.v{n}{p.suffix}").exists():
        n += 1
    return p.parent / f"{stem}.v{n}{p.suffix}"
