"""The flow player: the ``scripted`` policy that plays an ``owrl.flow/1`` document.

Flows are a core document, so their player is part of the core and is registered as a
default plugin (it does not depend on any package under ``plugins/``).

It is the deterministic path of owrl: RPA flows, replays of recorded trajectories and
tests of the harness. A turn whose expectation failed means the page is not where the
flow assumed, so the policy stops there rather than act blindly; a flow that runs out
of turns without ``done`` ends the episode as failed.

Also here: :class:`HealingPolicy` (``owrl run --flow F --heal-with POLICY``), which hands
over to another policy when the flow stops matching the page, :func:`next_flow_version`
(where a repaired flow is saved), and :class:`FlowMemory`, the memory a flow plays with
when the configured one is not installed (``OWRL_LOAD_PLUGINS=""``).

Settings: ``[plugins.scripted]`` ``flow`` (a flow file played when none is passed).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

from owrl_sdk.formats.documents import Flow, FlowTurn, flow_from_data, load_flow
from owrl_sdk.errors import UsageError
from owrl_sdk.contract.hookspecs import Register
from owrl_sdk.rules.inputs import apply_inputs, evaluate_condition
from owrl_sdk.contract.memory import Context, Memory
from owrl_sdk.formats.outputs import record_output
from owrl_sdk.contract.plugins import hookimpl
from owrl_sdk.contract.policy import Policy
from owrl_sdk.types import Observation, PolicyInfo, Step, Task, ToolCall, Turn

if TYPE_CHECKING:  # pragma: no cover
    from owrl_sdk.config import Settings
    from owrl_sdk.contract.plugins import Catalogue
    from owrl_sdk.contract.tools import Tool

#: The registered name of the policy that plays flows and replays.
FLOW_POLICY = "scripted"

#: A task's metadata key that carries the flow to play for that task (``owrl.flow/1`` data or a
#: :class:`Flow`); a batch gives every row its own flow this way (:mod:`owrl_sdk.flows.batch`).
FLOW_METADATA = "flow"
#: With it, the values to fill into the carried flow when the episode starts (a batch's rows
#: share one flow object and carry their own values).
FLOW_INPUTS = "flow_inputs"

#: The registered name of :class:`FlowMemory`.
FLOW_MEMORY = "flow-history"


class ScriptedPolicy(Policy):
    """Plays the turns of a flow in order; stops at the first failed expectation or call."""

    name = FLOW_POLICY
    stops_turn_on_error = True  # the calls after a failed one were planned for a page that is not there

    def __init__(self, settings: "Settings", flow: Union[Flow, str, None] = None, **options: Any):
        super().__init__(settings, **options)
        flow = flow if flow is not None else settings.plugin(FLOW_POLICY).get("flow")
        if flow is None:
            raise UsageError(f"the {FLOW_POLICY} policy needs a flow: pass --flow FILE (or --replay TRAJECTORY)")
        self.flow = flow if isinstance(flow, Flow) else load_flow(flow)
        self.position = 0
        #: While the log-in is played again (the flow's session rule): its turns left.
        self._login: Optional[list[FlowTurn]] = None
        self._renewed = 0

    def info(self) -> PolicyInfo:
        return PolicyInfo(name=self.name, model=None)

    async def act(self, context: Context) -> Turn:
        if not context.history:
            self.position = 0
            carried = context.task.metadata.get(FLOW_METADATA)
            if carried is not None:  # a batch's row: the batch's flow, with this row's inputs
                self.flow = carried if isinstance(carried, Flow) else flow_from_data(carried, "task.metadata.flow")
                values = context.task.metadata.get(FLOW_INPUTS)
                if values:
                    self.flow = apply_inputs(self.flow, values)
            if self.flow.output_schema is not None and context.task.output_schema is None:
                # the flow's schema is its task's (the task is the one the episode's hooks check done against)
                context.task.output_schema = self.flow.output_schema
        if not context.history:
            self._login, self._renewed = None, 0
        last = context.last_step
        if self._login is not None:  # logging in again
            return self._log_in(context, last)
        renewal = self._session_gone(context)
        if renewal is not None:
            return renewal
        diverged = _failed_expectation(last) if last is not None else None
        if diverged:
            return Turn(end=f"flow stopped: {diverged}")
        skipped: list[str] = []
        while self.position < len(self.flow.turns):
            planned = self.flow.turns[self.position]
            self.position += 1
            try:
                holds, chosen, calls = self._calls_of(planned, context)
            except UsageError as err:
                return Turn(end=f"flow stopped: turn {self.position}: {err}")
            if not chosen or len(calls) < len(chosen):
                skipped.append(f"turn {self.position}" if not calls else
                               f"{len(chosen) - len(calls)} of turn {self.position}'s calls")
            if calls:
                note = f"(skipped, their condition false: {', '.join(skipped)}) " if skipped else ""
                took = f"(turn {self.position}: its condition false, its else) " if not holds else ""
                return Turn(thought=note + took + planned.thought, calls=calls, raw=None)
        return Turn(end=f"flow ran out of turns after {len(self.flow.turns)} without done")

    def _session_gone(self, context: Context) -> Optional[Turn]:
        """Where the flow's session rule sees the log-in gone on this page: the first turn of the
        log-in played again, or the end of the flow (after its point of no return, or when the
        session is gone again right after a log-in). None while the session holds."""
        rule = self.flow.session
        obs = context.observation
        sign = rule.gone.shows(obs.url, obs.title, obs.aria or "") if rule is not None else None
        if rule is None or sign is None:
            return None
        committed = next((r.call.describe() for s in context.history for r in s.calls
                          if r.call.commit and not r.skipped), None)
        if committed is not None:
            return Turn(end=f"flow stopped: the session is gone ({sign}) after its point of no return ({committed}): "
                            "the row is not started again")
        if self._renewed >= 1:
            return Turn(end=f"flow stopped: the session is gone again ({sign}) after logging in again")
        self._renewed += 1
        context.task.metadata["session_renewals"] = self._renewed  # the trajectory's task: a batch counts it
        self._login = [t for t in (_without_done(t) for t in rule.login.turns) if t is not None]
        return self._log_in(context, None, note=f"(the session is gone: {sign}; logging in again) ")

    def _log_in(self, context: Context, last: Optional[Step], note: str = "") -> Turn:
        """The next turn of the log-in played again; once it is done, the flow starts over at its
        start address (its calls so far were for a session that is gone)."""
        assert self._login is not None
        diverged = _failed_expectation(last) if last is not None else None
        if diverged:
            return Turn(end=f"flow stopped: logging in again failed: {diverged}")
        while self._login:
            planned = self._login.pop(0)
            try:
                calls = self._calls_of(planned, context)[2]
            except UsageError as err:
                return Turn(end=f"flow stopped: logging in again: {err}")
            if calls:
                return Turn(thought=note + planned.thought, calls=calls, raw=None)
        self._login, self.position = None, 0
        start = context.task.start_url
        return Turn(thought="(logged in again: the flow starts over at its start address)",
                    calls=[ToolCall(name="goto_url", arguments={"url": start})], raw=None)

    def _calls_of(self, planned: FlowTurn, context: Context) -> tuple[bool, list[ToolCall], list[ToolCall]]:
        """Whether ``planned``'s condition holds, the calls that chooses (its calls, else its
        ``else``), and copies of those whose own condition holds (UsageError: an input with no value)."""
        holds = self._holds(planned.when, context)
        chosen = planned.calls if holds else (planned.else_ or [])
        return holds, chosen, [c.model_copy(deep=True) for c in chosen if self._holds(c.when, context)]

    def _holds(self, when: Any, context: Context) -> bool:
        """Whether a turn's or a call's ``when`` holds: decided when the inputs were filled in,
        or here, on the outputs saved so far (UsageError: an input with no value)."""
        if when is None or isinstance(when, bool):
            return when is not False

        outputs: dict[str, Any] = {}
        for step in context.history:
            for record in step.calls:
                if not record.skipped:
                    record_output(outputs, record.call, record.result)
        return evaluate_condition(when, context.task.metadata.get(FLOW_INPUTS) or {}, outputs)


def _without_done(turn: FlowTurn) -> Optional[FlowTurn]:
    """A log-in turn without its ``done`` (the log-in flow ends there; the flow goes on)."""
    calls = [c for c in turn.calls if c.name != "done"]
    return turn.model_copy(update={"calls": calls}) if calls else None


def _failed_expectation(step: Step) -> Optional[str]:
    for record in step.calls:
        if record.verdict is not None and not record.verdict.ok:
            return f"{record.call.name}: {record.verdict.describe()}"
        if record.result is not None and not record.result.ok:
            return f"{record.call.name}: {record.result.error}"
    return None


class HealingPolicy(Policy):
    """Plays a flow; when the page stops matching it, hands over to another policy.

    The hand-over happens at the first failed expectation or failed call: from then on the
    healer decides every turn, from the current page, with the task and the history so far.
    """

    name = f"{FLOW_POLICY}-healing"

    def __init__(self, settings: "Settings", flow: Union[Flow, str], healer: Policy, **options: Any):
        super().__init__(settings, **options)
        self.script = ScriptedPolicy(settings, flow=flow)
        self.healer = healer
        self.healed_at: Optional[int] = None

    @property
    def stops_turn_on_error(self) -> bool:  # type: ignore[override]
        """The flow's rule while it plays, the healer's once it has taken over."""
        return self.script.stops_turn_on_error if self.healed_at is None else self.healer.stops_turn_on_error

    def info(self) -> PolicyInfo:
        inner = self.healer.info()
        return PolicyInfo(name=f"{FLOW_POLICY}+{inner.name}", model=inner.model, revision=inner.revision)

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
    p = Path(path)
    stem = re.sub(r"\.v\d+$", "", p.stem)
    n = 2
    while (p.parent / f"{stem}.v{n}{p.suffix}").exists():
        n += 1
    return p.parent / f"{stem}.v{n}{p.suffix}"


class FlowMemory(Memory):
    """The steps so far and the current screenshot: all a flow needs to play.

    Used to play a flow when the configured memory is not installed (see
    :func:`flow_memory`), so that flows play with the core alone."""

    name = FLOW_MEMORY

    def __init__(self, settings: "Settings", **options: Any):
        super().__init__(settings, **options)
        self.steps: list[Step] = []

    def reset(self, task: Task) -> None:
        self.steps = []

    def context(self, task: Task, observation: Observation, tools: list["Tool"]) -> Context:
        shots = [observation.screenshot] if observation.screenshot else []
        return Context(task=task, observation=observation, tools=list(tools), history=list(self.steps),
                       screenshots=shots)

    def record(self, step: Step) -> None:
        self.steps.append(step)


def flow_memory(catalogue: "Catalogue", settings: "Settings") -> str:
    """The memory to play a flow with: the configured one when it is registered, else
    :data:`FLOW_MEMORY` (the configured one is the default and no plugin provides it)."""
    configured: str = settings.memory
    if configured in catalogue.items["memories"] or configured != type(settings).model_fields["memory"].default:
        return configured  # an unknown name the user chose is reported by the Agent, as for any run
    return FLOW_MEMORY


@hookimpl
def register_policies(register: Register) -> None:
    register(ScriptedPolicy)


@hookimpl
def register_memories(register: Register) -> None:
    register(FlowMemory)
