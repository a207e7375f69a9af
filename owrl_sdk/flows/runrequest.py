"""One request to play a flow: the flow, the values given for its inputs, and where it starts.

Every door that plays a flow prepares its task here, the same way: ``owrl run --flow``, each
row of a batch (``owrl run --inputs``, ``Batch``), a server job with a flow, and
``Agent.prepare_flow`` / ``Agent.run_flow``. :meth:`RunRequest.values` checks and types the
input values (one :class:`~owrl_sdk.errors.UsageError` listing every problem, before any
browser starts); :meth:`RunRequest.task` fills them into the task text and the start URL,
resolves a plugin's URL scheme (``demo:shop/``) with the ``resolve_url`` hook, and puts on the
task what the flow player and the episode read: the flow (``metadata.flow``), the values
(``metadata.flow_inputs``, filled in by the player when the episode starts; ``metadata.inputs``,
recorded in the trajectory) and the flow's output schema.

Pure data and functions: importing this module starts nothing and imports no plugin.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

from owrl_sdk.errors import UsageError
from owrl_sdk.flows.flowplayer import FLOW_INPUTS, FLOW_METADATA
from owrl_sdk.rules.inputs import apply_inputs, fill, placeholders, resolve_inputs
from owrl_sdk.types import Task

if TYPE_CHECKING:  # pragma: no cover
    from owrl_sdk.formats.documents import Flow
    from owrl_sdk.contract.plugins import Plugins


@dataclass
class RunRequest:
    """A flow to play, the values given for its inputs (text as typed, or typed values), and
    the start URL and task text when they are not the flow's own (placeholders allowed)."""

    flow: "Flow"
    inputs: Mapping[str, Any] = field(default_factory=dict)
    url: Optional[str] = None
    intent: Optional[str] = None
    #: Where the flow came from (a file name, "flow"), for messages.
    source: str = "flow"

    def values(self) -> dict[str, Any]:
        """The input values, checked against the flow's declared inputs and typed (defaults
        filled in); every problem at once as one UsageError. Empty when the flow declares and
        uses no input and none is given."""
        declared = dict(self.flow.inputs)
        used = placeholders(self.flow) | placeholders([self.url or "", self.intent or ""])
        given = {str(k): v for k, v in self.inputs.items()}
        if not (given or declared or used):
            return {}
        return resolve_inputs(declared, given, used)

    def task(self, plugins: "Plugins", values: Optional[Mapping[str, Any]] = None, *,
             flow_data: Optional[dict[str, Any]] = None, default_intent: Optional[str] = None,
             metadata: Optional[Mapping[str, Any]] = None,
             normalise: Optional[Callable[[str], str]] = None, **fields: Any) -> Task:
        """The task that plays the flow with ``values`` (default: :meth:`values`).

        ``flow_data``: the flow's data as the task carries it, when several tasks share one (a
        batch's rows); default: this request's flow. It is carried as given, the values beside
        it, and the flow player fills them in when the episode starts. ``default_intent``: the
        task text when neither the request nor the flow has one. ``normalise``: what the start URL, filled in, goes through before the
        ``resolve_url`` hook (``owrl run``'s rules for typed addresses: a bare host gets
        https://). ``metadata`` and ``fields`` (``allowed_domains``, ``max_steps``, ``id``) go on
        the task as they are."""
        values = dict(self.values() if values is None else values)
        filled = apply_inputs(self.flow, values) if values else self.flow
        intent = fill(self.intent, values) if self.intent else (filled.task or default_intent)
        if not intent:
            raise UsageError(f"{self.source}: the flow has no task: give one (--task, task=...)")
        start = fill(self.url, values, url=True) if self.url else filled.start_url
        if not start:
            raise UsageError(f"{self.source}: the flow has no start_url: give one (--url, url=...)")
        resolved = plugins.resolve_url(normalise(start) if normalise is not None else start)
        # the flow as given, its values beside it: the player fills them in once, when the episode
        # starts (a value that holds "{{input:...}}" is never filled in a second time)
        data = flow_data if flow_data is not None else self.flow.model_dump(mode="json", by_alias=True,
                                                                             exclude_none=True)
        carried: dict[str, Any] = {FLOW_METADATA: data}
        if values:
            carried.update({FLOW_INPUTS: values, "inputs": values})
        if resolved != start:
            carried["given_start_url"] = start
        carried.update(metadata or {})
        return Task(intent=intent, start_url=resolved, output_schema=filled.output_schema, metadata=carried,
                    **fields)
