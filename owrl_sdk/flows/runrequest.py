"""One request to run: a task or a flow, the values given for its inputs, and where it starts.

Every door prepares its run here, the same way: ``owrl run`` (with ``--task`` or ``--flow``),
each row of a batch (``owrl run --inputs``, ``Batch``: ``request.with_inputs(row)``), a server
job with a flow, and ``Agent.run`` / ``Agent.prepare_flow`` / ``Agent.run_flow``.
:meth:`RunRequest.values` checks and types the input values (one
:class:`~owrl_sdk.errors.UsageError` listing every problem, before any browser starts): the
one caller of :func:`~owrl_sdk.rules.inputs.resolve_inputs`. :meth:`RunRequest.start_url`
applies the address rules (:func:`~owrl_sdk.rules.urls.resolve_url`: a bare host gets
https://, a path file://, an address that cannot be one is refused): their one caller for a
run. :meth:`RunRequest.task` fills the values into the task text and the start URL, resolves
a plugin's URL scheme (``demo:shop/``) with the ``resolve_url`` hook, and puts on the task
what the flow player and the episode read: the flow (``metadata.flow``), the values
(``metadata.flow_inputs``, filled in by the player when the episode starts; ``metadata.inputs``,
recorded in the trajectory) and the flow's output schema.

Pure data and functions: importing this module starts nothing and imports no plugin.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

from owrl_sdk.errors import UsageError
from owrl_sdk.failures.startpage import RENEWS_SESSION
from owrl_sdk.flows.flowplayer import FLOW_INPUTS, FLOW_METADATA
from owrl_sdk.rules.inputs import apply_inputs, fill, placeholders, resolve_inputs
from owrl_sdk.rules.urls import resolve_url
from owrl_sdk.types import Task

if TYPE_CHECKING:  # pragma: no cover
    from owrl_sdk.contract.plugins import Plugins
    from owrl_sdk.formats.documents import Flow


@dataclass(frozen=True)
class RunRequest:
    """A task (``intent``) or a flow to play, the values given for their inputs (text as typed,
    or typed values), and the start URL and task text when they are not the flow's own
    (placeholders allowed)."""

    flow: Optional["Flow"] = None
    inputs: Mapping[str, Any] = field(default_factory=dict)
    url: Optional[str] = None
    intent: Optional[str] = None
    #: Where the request came from (a file name, "--task", "row 3"), for messages.
    source: str = "flow"
    #: The flow's declared inputs and the placeholders the request uses, when many requests share
    #: one flow (a batch's rows, :meth:`with_inputs`): read once, not per request.
    names: Optional[tuple[Mapping[str, Any], frozenset[str]]] = field(default=None, compare=False)

    def input_names(self) -> tuple[dict[str, Any], set[str]]:
        """The inputs the flow declares, and the names the flow, the task text and the URL use."""
        if self.names is not None:
            return dict(self.names[0]), set(self.names[1])
        declared = dict(self.flow.inputs) if self.flow is not None else {}
        used = placeholders([self.url or "", self.intent or ""])
        return declared, (used | placeholders(self.flow) if self.flow is not None else used)

    def shared(self) -> "RunRequest":
        """This request with the names it reads worked out once, for the many requests
        :meth:`with_inputs` makes of it (a batch's rows)."""
        declared, used = self.input_names()
        return dataclasses.replace(self, names=(declared, frozenset(used)))

    def with_inputs(self, values: Mapping[str, Any], **changes: Any) -> "RunRequest":
        """This request with ``values`` over its inputs (a batch row over the values every row is
        given), sharing its flow (and the names :meth:`shared` read); ``changes``: other fields
        (``source``)."""
        return dataclasses.replace(self, inputs={**self.inputs, **values}, **changes)

    def values(self) -> dict[str, Any]:
        """The input values, checked against the flow's declared inputs and typed (defaults
        filled in); every problem at once as one UsageError. Empty when nothing declares or
        uses an input and none is given."""
        declared, used = self.input_names()
        given = {str(k): v for k, v in self.inputs.items()}
        if not (given or declared or used):
            return {}
        return resolve_inputs(declared, given, used)

    def start_url(self, plugins: "Plugins", values: Optional[Mapping[str, Any]] = None, *,
                  note: Optional[Callable[[str], None]] = None, given_as: Optional[str] = None,
                  check: bool = True) -> Optional[str]:
        """The start URL as typed (``url``, else the flow's), ``values`` filled in, read by the
        address rules (``note`` hears "no scheme given: using https://..."; ``given_as``, where
        the address came from, names it in the error for one that cannot be an address;
        ``check=False`` passes such an address on, for a caller that says what is wrong with it
        in its own words). None when neither the request nor the flow names one. A plugin's
        scheme is left for the ``resolve_url`` hook."""
        values = dict(values or {})
        own = self.flow.start_url if self.flow is not None else None
        given = self.url or own
        if not given:
            return None
        filled = fill(given, values, url=True) if values else given
        where = given_as or ("url" if self.url else f"{self.source}: start_url")
        return resolve_url(filled, note=note, given_as=where if check else None, plugins=plugins)

    def task(self, plugins: "Plugins", values: Optional[Mapping[str, Any]] = None, *,
             flow_data: Optional[dict[str, Any]] = None, default_intent: Optional[str] = None,
             metadata: Optional[Mapping[str, Any]] = None, note: Optional[Callable[[str], None]] = None,
             given_as: Optional[str] = None, **fields: Any) -> Task:
        """The task that runs the request with ``values`` (default: :meth:`values`).

        ``flow_data``: the flow's data as the task carries it, when several tasks share one (a
        batch's rows); default: this request's flow. It is carried as given, the values beside
        it, and the flow player fills them in when the episode starts. ``default_intent``: the
        task text when neither the request nor the flow has one. ``note`` and ``given_as``: see
        :meth:`start_url`. ``metadata`` and ``fields`` (``allowed_domains``, ``max_steps``,
        ``id``) go on the task as they are."""
        values = dict(self.values() if values is None else values)
        flow = self.flow
        filled = apply_inputs(flow, values) if flow is not None and values else flow
        intent = fill(self.intent, values) if self.intent else ((filled.task if filled else None) or default_intent)
        if not intent:
            raise UsageError(f"{self.source}: the flow has no task: give one (--task, task=...)" if flow is not None
                             else f"{self.source}: give the task (--task TEXT, task=...)")
        start = self.start_url(plugins, values, note=note, given_as=given_as)
        if not start:
            raise UsageError(f"{self.source}: the flow has no start_url: give one (--url, url=...)" if flow is not None
                             else f"{self.source}: a task needs a start URL: give one (--url URL, url=...)")
        resolved = plugins.resolve_url(start)
        carried: dict[str, Any] = {}
        if flow is not None:
            # the flow as given, its values beside it: the player fills them in once, when the episode
            # starts (a value that holds "{{input:...}}" is never filled in a second time)
            carried[FLOW_METADATA] = flow_data if flow_data is not None else flow.model_dump(
                mode="json", by_alias=True, exclude_none=True)
            if values:
                carried[FLOW_INPUTS] = values
            if flow.session is not None:
                carried[RENEWS_SESSION] = True  # a log-in page at the start is the flow's to pass
        if values:
            carried["inputs"] = values
        if resolved != start:
            carried["given_start_url"] = start
        carried.update(metadata or {})
        return Task(intent=intent, start_url=resolved, output_schema=filled.output_schema if filled else None,
                    metadata=carried, **fields)
