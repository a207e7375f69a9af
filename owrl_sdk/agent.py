"""The Python API for embedders: an :class:`Agent` runs a task and returns the trajectory.

    from owrl_sdk import Agent
    with Agent(policy="scripted", flow="flow.json") as agent:     # sync
        trajectory = agent.run_sync("Buy a shirt", "http://127.0.0.1:8000/")

    async with Agent(policy="scripted", flow=flow) as agent:      # async
        trajectory = await agent.run(task)

One Agent owns one browser process (started on first use, closed by ``close()``); each
run gets a fresh browser context and its own run folder.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, Optional, Union

from .config import Settings, load_settings
from .env import Environment
from .plugins import Plugins
from .policy import Policy
from .runner import StepCallback, run_episode
from .runstore import RunDir, RunStore
from .types import Step, Task, Trajectory

if TYPE_CHECKING:
    from .browser.host import BrowserHost

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
        self.plugins = plugins or Plugins()
        if isinstance(policy, Policy):
            self.policy = policy
        else:
            cls = self.plugins.catalogue.get("policies", policy or self.settings.policy)
            self.policy = cls(self.settings, **policy_options)
        self.memory_name = memory or self.settings.memory
        self.plugins.catalogue.get("memories", self.memory_name)  # fail early on a bad name
        self._env_factory = env_factory
        self._host: Optional[BrowserHost] = None

    # ------------------------------------------------------------------ browser

    async def _browser_env(self, run: Optional[RunDir], trace: bool) -> Environment:
        if self._host is None or not self._host.connected:
            from .browser import BrowserHost

            if self._host is not None:
                await self._host.close()
            self._host = BrowserHost(self.settings, launch_hook=self.plugins.browser_launch_options)
            await self._host.start()
        return await self._host.new_env(run_dir=run.path if run else None, trace=trace)

    # ------------------------------------------------------------------ running

    def make_task(self, task: Union[Task, str], url: Optional[str] = None) -> Task:
        if isinstance(task, Task):
            return self.plugins.resolve_task(task)
        if not url:
            from .errors import UsageError

            raise UsageError("a task needs a start URL: pass url=... (or --url)")
        resolved = self.plugins.resolve_url(url)
        return Task(intent=task, start_url=resolved,
                    metadata={"given_start_url": url} if resolved != url else {})

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
    ) -> Trajectory:
        """Run one episode. ``out`` is the runs folder (default: the ``runs_dir`` setting).

        ``hooks`` are plugins of this episode only (objects with ``step_end`` /
        ``episode_end`` methods and the like, see :func:`owrl_sdk.runner.build_episode`);
        ``on_step(trajectory, step)`` is called after each step and with ``None`` at the end.
        Both see a step after the run folder has written it (with ``store``); the final
        ``trajectory.json`` is written before this returns."""
        task = self.make_task(task, url)
        run = RunStore(out or self.settings.runs_dir).new_run(task.intent) if store else None
        factory = self._env_factory or self._browser_env
        env = await factory(run, trace)
        memory = self.plugins.catalogue.get("memories", self.memory_name)(self.settings)
        extra = [run, *hooks, StepCallback(on_step) if on_step is not None else None]
        trajectory = await run_episode(task, env, self.policy, self.settings, self.plugins, memory=memory,
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
        await self.policy.close()

    async def __aenter__(self) -> "Agent":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __enter__(self) -> "Agent":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._host is not None:
            asyncio.run(self.close())
