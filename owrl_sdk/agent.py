"""The Python API for embedders: an :class:`Agent` runs a task and returns the trajectory.

    from owrl_sdk import Agent
    with Agent(policy="scripted", flow="flow.json") as agent:     # sync
        trajectory = agent.run_sync("Buy a shirt", "http://127.0.0.1:8000/")

    async with Agent(policy="scripted", flow=flow) as agent:      # async
        trajectory = await agent.run(task)

    with Agent() as agent:                                         # a flow with its inputs
        trajectory = agent.run_flow_sync("invoice.json", inputs={"customer": "Globex Ltd", "amount": 120})

One Agent owns one browser process (started on first use, closed by ``close()``); each
run gets a fresh browser context and its own run folder.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, Optional, Union

from owrl_sdk.config import Settings, load_settings
from owrl_sdk.formats.documents import Flow, check_flow_tools, flow_from_data, load_flow
from owrl_sdk.contract.env import Environment
from owrl_sdk.errors import UsageError
from owrl_sdk.flows.flowplayer import FLOW_METADATA, HealingPolicy, ScriptedPolicy, flow_memory
from owrl_sdk.contract.plugins import Plugins
from owrl_sdk.contract.policy import Policy
from owrl_sdk.episode.runner import StepCallback, run_episode
from owrl_sdk.flows.runrequest import RunRequest
from owrl_sdk.episode.runstore import RunDir, RunStore
from owrl_sdk.types import Step, Task, Trajectory

if TYPE_CHECKING:
    from owrl_sdk.browser.host import BrowserHost
    from owrl_sdk.formats.documents import Flow

#: Makes the environment of one episode: (run folder, trace?) -> environment.
EnvFactory = Callable[[Optional[RunDir], bool], Awaitable[Environment]]


class Agent:
    def __init__(
        self,
        policy: Union[str, Policy, None] = None,
        *,
        settings: Optional[Settings] = None,
        plugins: Optional[Plugins] = None,
        memory: Optional[str] = None,
        env_factory: Optional[EnvFactory] = None,
        **policy_options: Any,
    ):
        self.settings = settings or load_settings()
        self.plugins = (plugins or Plugins()).bind(self.settings)  # hooks receive this agent's settings
        self._policy: Optional[Policy] = None
        self._policy_name: Optional[str] = None
        if isinstance(policy, Policy):
            self._policy = policy
        else:  # the name is checked now; the policy is made when first used, so an Agent that
            # only plays flows (run_flow) never loads the default model
            self._policy_name = policy or self.settings.policy
            self.plugins.catalogue.get("policies", self._policy_name)  # fail early on a bad name
        self._policy_options = policy_options
        self.memory_name = memory or self.settings.memory
        self.plugins.catalogue.get("memories", self.memory_name)  # fail early on a bad name
        self._env_factory = env_factory
        self._host: Optional[BrowserHost] = None

    @property
    def policy(self) -> Policy:
        """The policy :meth:`run` plays tasks with (made on first use)."""
        if self._policy is None:
            assert self._policy_name is not None
            self._policy = self.plugins.catalogue.build("policies", self._policy_name, self.settings,
                                                        **self._policy_options)
        return self._policy

    @policy.setter
    def policy(self, value: Policy) -> None:
        self._policy = value

    # ------------------------------------------------------------------ browser

    async def _browser_env(self, run: Optional[RunDir], trace: bool) -> Environment:
        if self._host is None or not self._host.connected:
            from owrl_sdk.browser import browser_host

            if self._host is not None:
                await self._host.close()
            self._host = browser_host(self.settings, self.plugins)
            await self._host.start()
        return await self._host.new_env(run_dir=run.path if run else None, trace=trace)

    # ------------------------------------------------------------------ running

    def make_task(self, task: Union[Task, str], url: Optional[str] = None) -> Task:
        """The task :meth:`run` runs: a :class:`Task` as it is (a plugin's URL scheme resolved),
        or task text and ``url`` prepared as every door prepares a run (:class:`RunRequest`: a
        bare host gets https://, an address that cannot be one is a UsageError)."""
        if isinstance(task, Task):
            return self.plugins.resolve_task(task)
        if not url:
            raise UsageError("a task needs a start URL: pass url=... (or --url)")
        return RunRequest(intent=task, url=url, source="Agent.run").task(self.plugins, {})

    async def run(
        self,
        task: Union[Task, str],
        url: Optional[str] = None,
        *,
        out: Union[str, Path, None] = None,
        trace: bool = False,
        on_step: Optional[Callable[[Trajectory, Optional[Step]], None]] = None,
        store: bool = True,
        hooks: Iterable[Any] = (),
        trace_with_secrets: bool = False,
    ) -> Trajectory:
        """Run one episode. ``out`` is the runs folder (default: the ``runs_dir`` setting).

        ``trace`` records a Playwright trace in the run folder, deleted at the end when the
        episode used secrets (a trace cannot be redacted); ``trace_with_secrets`` records one
        and keeps it anyway (``owrl run --trace-with-secrets``).

        ``hooks`` are plugins of this episode only (objects with ``step_end`` /
        ``episode_end`` methods and the like, see :func:`owrl_sdk.episode.runner.build_episode`);
        ``on_step(trajectory, step)`` is called after each step and with ``None`` at the end.
        Both see a step after the run folder has written it (with ``store``); the final
        ``trajectory.json`` is written before this returns."""
        task = self.make_task(task, url)
        return await self._run(task, self.policy, self.memory_name, out=out, trace=trace, on_step=on_step,
                               store=store, hooks=hooks, trace_with_secrets=trace_with_secrets)

    def prepare_flow(self, flow: Union["Flow", str, Path, dict[str, Any]], inputs: Optional[dict[str, Any]] = None,
                     url: Optional[str] = None) -> Task:
        """The task that plays ``flow`` (a file, its data or a :class:`~owrl_sdk.formats.documents.Flow`) with
        ``inputs``: every input checked and typed at once (the errors ``owrl run --input`` gives, as
        one :class:`~owrl_sdk.errors.UsageError`), the tools checked, the placeholders filled in.
        Nothing starts a browser; :meth:`run_flow` runs the task."""
        source = str(flow) if isinstance(flow, (str, Path)) else "flow"
        loaded = flow if isinstance(flow, Flow) else (flow_from_data(flow, source) if isinstance(flow, dict)
                                                     else load_flow(flow))
        check_flow_tools(loaded, self.plugins.catalogue.items["tools"], source)
        request = RunRequest(flow=loaded, inputs=dict(inputs or {}), url=url, source=source)
        return request.task(self.plugins, default_intent=f"Play {source}")

    async def run_flow(self, flow: Union["Flow", str, Path, dict[str, Any]], inputs: Optional[dict[str, Any]] = None,
                       url: Optional[str] = None, **kwargs: Any) -> Trajectory:
        """Play ``flow`` with ``inputs`` (checked, typed and filled in by :meth:`prepare_flow`
        before a browser starts), whatever policy this Agent has for tasks; ``kwargs`` are
        :meth:`run`'s (``out``, ``trace``, ``on_step``, ``store``, ``hooks``, ``trace_with_secrets``)."""
        task = self.prepare_flow(flow, inputs, url)
        mine = self._policy  # a flow player (or a healing one) given to this Agent plays it; else a new player
        policy = mine if isinstance(mine, (ScriptedPolicy, HealingPolicy)) else \
            ScriptedPolicy(self.settings, flow=flow_from_data(task.metadata[FLOW_METADATA], "flow"))
        memory = self.memory_name if policy is mine else flow_memory(self.plugins.catalogue, self.settings)
        return await self._run(task, policy, memory, **kwargs)

    def run_flow_sync(self, flow: Union["Flow", str, Path, dict[str, Any]], inputs: Optional[dict[str, Any]] = None,
                      url: Optional[str] = None, **kwargs: Any) -> Trajectory:
        """:meth:`run_flow` for code without an event loop. Closes the browser after."""
        self.prepare_flow(flow, inputs, url)  # input errors before any event loop or browser

        async def once() -> Trajectory:
            try:
                return await self.run_flow(flow, inputs, url, **kwargs)
            finally:
                await self.close()

        return asyncio.run(once())

    async def _run(self, task: Task, policy: Policy, memory_name: str, *, out: Union[str, Path, None] = None,
                   trace: bool = False, on_step: Optional[Callable[[Trajectory, Optional[Step]], None]] = None,
                   store: bool = True, hooks: Iterable[Any] = (), trace_with_secrets: bool = False) -> Trajectory:
        run = RunStore(out or self.settings.runs_dir).new_run(task.intent, keep_secret_traces=trace_with_secrets) \
            if store else None
        factory = self._env_factory or self._browser_env
        env = await factory(run, trace or trace_with_secrets)
        memory = self.plugins.catalogue.get("memories", memory_name)(self.settings)
        extra = [run, *hooks, StepCallback(on_step) if on_step is not None else None]
        trajectory = await run_episode(task, env, policy, self.settings, self.plugins, memory=memory,
                                       extra_hooks=extra)
        if run is not None:
            trajectory.metadata.setdefault("run_dir", str(run.path.resolve()))
            run.save(trajectory)
        return trajectory

    def run_sync(self, task: Union[Task, str], url: Optional[str] = None, **kwargs: Any) -> Trajectory:
        """The same as :meth:`run`, for code without an event loop. Closes the browser after."""

        async def once() -> Trajectory:
            try:
                return await self.run(task, url, **kwargs)
            finally:
                await self.close()

        return asyncio.run(once())

    async def close(self) -> None:
        if self._host is not None:
            host, self._host = self._host, None
            await host.close()
        if self._policy is not None:
            await self._policy.close()

    async def __aenter__(self) -> "Agent":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __enter__(self) -> "Agent":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._host is not None:
            asyncio.run(self.close())
