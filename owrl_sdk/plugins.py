"""Loading plugins, the catalogue they register into, and the typed facade over the hooks.

Default plugins are modules listed in :data:`DEFAULT_PLUGINS`. Third-party plugins (and
owrl's own packages under ``plugins/``) come from the ``owrl`` entry-point group, loaded
one by one so that a broken one is named and set aside rather than taking owrl down.

Environment variables:

- ``OWRL_LOAD_PLUGINS``: comma-separated entry-point names to load; set but empty loads none.
- ``OWRL_DISABLE_PLUGINS``: comma-separated plugin names never to load (defaults included).
- ``OWRL_TRACE_PLUGINS=1``: print every hook call and its result to stderr.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Callable, Iterable, Optional

import pluggy

from . import hookspecs
from .errors import PluginError

PROJECT = "owrl"
hookimpl = pluggy.HookimplMarker(PROJECT)

DEFAULT_PLUGINS: tuple[str, ...] = (
    "owrl_sdk.commands.plugins",
    "owrl_sdk.commands.doctor",
    "owrl_sdk.commands.run",
    "owrl_sdk.commands.eval",
    "owrl_sdk.commands.judge",
    "owrl_sdk.commands.blocklist",
    "owrl_sdk.commands.new",
    "owrl_sdk.commands.serve",
    "owrl_sdk.commands.report",
    "owrl_sdk.commands.inspect",
    "owrl_sdk.commands.tasks",
    "builtin_tools",
    "builtin_judges",
    "owrl_sdk.failures",
    "owrl_sdk.flowplayer",
)


@dataclass
class PluginFailure:
    name: str
    source: str
    error: str


@dataclass
class PluginInfo:
    name: str
    version: Optional[str]
    hooks: list[str]
    default: bool
    source: str


class OwrlPluginManager(pluggy.PluginManager):
    """A pluggy manager that remembers where each plugin came from and what failed."""

    def __init__(self) -> None:
        super().__init__(PROJECT)
        self.add_hookspecs(hookspecs)
        self.failures: list[PluginFailure] = []
        self.origins: dict[str, tuple[bool, Optional[str], str]] = {}  # name -> (default, version, source)


def _names(value: Optional[str]) -> Optional[set[str]]:
    if value is None:
        return None
    return {v.strip() for v in value.split(",") if v.strip()}


def _unknown_hooks(module: Any) -> list[str]:
    """Hook implementations in ``module`` that match no spec (pluggy would fail later)."""
    unknown = []
    for attr in dir(module):
        fn = getattr(module, attr, None)
        opts = getattr(fn, PROJECT + "_impl", None)
        if isinstance(opts, dict) and not opts.get("optionalhook"):
            hook_name = opts.get("specname") or attr
            if not hasattr(hookspecs, hook_name):
                unknown.append(hook_name)
    return unknown


def _register(pm: OwrlPluginManager, module: Any, name: str, default: bool, version: Optional[str], source: str) -> None:
    unknown = _unknown_hooks(module)
    if unknown:
        raise PluginError(f"implements unknown hook(s): {', '.join(unknown)}", plugin=name)
    pm.register(module, name=name)
    pm.origins[name] = (default, version, source)


def build_plugin_manager(
    environ: Optional[dict[str, str]] = None,
    entry_points: Optional[Iterable[metadata.EntryPoint]] = None,
) -> OwrlPluginManager:
    """A plugin manager with defaults and entry points loaded as the environment says."""
    environ = dict(os.environ) if environ is None else environ
    allow = _names(environ.get("OWRL_LOAD_PLUGINS"))
    deny = _names(environ.get("OWRL_DISABLE_PLUGINS")) or set()
    pm = OwrlPluginManager()
    from . import __version__

    for modname in DEFAULT_PLUGINS:
        if modname in deny:
            continue
        module = importlib.import_module(modname)
        _register(pm, module, modname, True, __version__, "default")

    eps = entry_points if entry_points is not None else metadata.entry_points(group=PROJECT)
    for ep in eps:
        if ep.name in deny or (allow is not None and ep.name not in allow):
            continue
        if pm.has_plugin(ep.name):
            pm.failures.append(PluginFailure(ep.name, ep.value, "another plugin already uses this name"))
            continue
        dist = getattr(ep, "dist", None)
        version = dist.version if dist is not None else None
        source = f"{dist.metadata['Name']} {version}" if dist is not None else ep.value
        try:
            module = ep.load()
            _register(pm, module, ep.name, False, version, source)
        except Exception as err:  # a broken plugin must not break owrl
            msg = str(err) or type(err).__name__
            pm.failures.append(PluginFailure(ep.name, source, f"{type(err).__name__}: {msg}"))
    pm.check_pending()
    if environ.get("OWRL_TRACE_PLUGINS", "") not in ("", "0"):
        _enable_trace(pm)
    return pm


def _enable_trace(pm: OwrlPluginManager) -> None:
    def before(hook_name: str, impls: list[Any], kwargs: dict[str, Any]) -> None:
        names = ", ".join(i.plugin_name for i in impls)
        args = ", ".join(f"{k}={_short(v)}" for k, v in kwargs.items())
        print(f"[owrl trace] {hook_name}({args}) -> [{names}]", file=sys.stderr)

    def after(outcome: Any, hook_name: str, impls: list[Any], kwargs: dict[str, Any]) -> None:
        try:
            result = outcome.get_result()
        except BaseException as err:  # noqa: BLE001 - tracing only reports it
            result = f"raised {type(err).__name__}: {err}"
        print(f"[owrl trace] {hook_name} returned {_short(result)}", file=sys.stderr)

    pm.add_hookcall_monitoring(before, after)


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def plugin_infos(pm: OwrlPluginManager) -> list[PluginInfo]:
    infos = []
    for name, plugin in pm.list_name_plugin():
        if plugin is None:
            continue
        hooks = sorted(h.name for h in (pm.get_hookcallers(plugin) or []))
        default, version, source = pm.origins.get(name, (False, None, "registered at run time"))
        infos.append(PluginInfo(name=name, version=version, hooks=hooks, default=default, source=source))
    return sorted(infos, key=lambda i: (not i.default, i.name))


# ============================================================================ catalogue


class Catalogue:
    """Everything plugins registered, by kind and name."""

    KINDS: dict[str, tuple[str, str, bool]] = {
        # kind: (hook, base class path, registered as instance)
        "tools": ("register_tools", "owrl_sdk.tools:Tool", True),
        "policies": ("register_policies", "owrl_sdk.policy:Policy", False),
        "memories": ("register_memories", "owrl_sdk.memory:Memory", False),
        "judges": ("register_judges", "owrl_sdk.components:Judge", False),
        "rewards": ("register_rewards", "owrl_sdk.components:Reward", False),
        "optimizers": ("register_optimizers", "owrl_sdk.components:Optimizer", False),
        "site_adapters": ("register_site_adapters", "owrl_sdk.components:SiteAdapter", True),
        "task_suites": ("register_task_suites", "owrl_sdk.components:TaskSuite", False),
        "samplers": ("register_samplers", "owrl_sdk.components:TaskSampler", False),
    }

    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {kind: {} for kind in self.KINDS}
        self.owners: dict[tuple[str, str], str] = {}

    def get(self, kind: str, name: str) -> Any:
        try:
            return self.items[kind][name]
        except KeyError:
            known = ", ".join(sorted(self.items[kind])) or "none"
            singular = kind[:-3] + "y" if kind.endswith("ies") else kind[:-1]
            raise PluginError(f"no {singular.replace('_', ' ')} named '{name}' (available: {known})") from None

    def names(self, kind: str) -> list[str]:
        return sorted(self.items[kind])


def _resolve(path: str) -> type:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def _make_register(catalogue: Catalogue, kind: str, plugin_name: str) -> Callable[[Any], None]:
    _, base_path, as_instance = Catalogue.KINDS[kind]

    def register(item: Any) -> None:
        base = _resolve(base_path)
        ok = isinstance(item, base) if as_instance else (inspect.isclass(item) and issubclass(item, base))
        if not ok:
            form = "an instance" if as_instance else "a subclass"
            raise PluginError(
                f"plugin '{plugin_name}' registered {item!r} as {kind}, but it must be {form} of {base.__qualname__}",
                plugin=plugin_name,
            )
        name = getattr(item, "name", None)
        if not isinstance(name, str) or not name:
            raise PluginError(f"plugin '{plugin_name}' registered {item!r} without a name", plugin=plugin_name)
        if name in catalogue.items[kind]:
            owner = catalogue.owners[(kind, name)]
            raise PluginError(
                f"plugin '{plugin_name}' registered {kind} '{name}', already registered by '{owner}'; "
                "rename one or disable a plugin with OWRL_DISABLE_PLUGINS",
                plugin=plugin_name,
            )
        catalogue.items[kind][name] = item
        catalogue.owners[(kind, name)] = plugin_name

    return register


def build_catalogue(pm: OwrlPluginManager) -> Catalogue:
    catalogue = Catalogue()
    for kind, (hook_name, _, _) in Catalogue.KINDS.items():
        for impl, caller in _per_plugin(pm, hook_name):
            caller(register=_make_register(catalogue, kind, impl.plugin_name))
    return catalogue


def _per_plugin(pm: OwrlPluginManager, hook_name: str) -> list[tuple[Any, Any]]:
    """One hook caller per implementation, so each registration knows which plugin made it.

    Calls still go through pluggy (and so through ``OWRL_TRACE_PLUGINS``)."""
    impls = list(getattr(pm.hook, hook_name).get_hookimpls())  # registration order
    everyone = [impl.plugin for impl in impls]
    return [
        (impl, pm.subset_hook_caller(hook_name, remove_plugins=[p for p in everyone if p is not impl.plugin]))
        for impl in impls
    ]


# ============================================================================ facade


async def _settle(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class Plugins:
    """The one door through which core code calls hooks.

    Holds the plugin manager and the catalogue; :meth:`for_task` gives the lifecycle
    hooks of one episode, site adapters matched to its start URL included.
    """

    def __init__(self, pm: Optional[OwrlPluginManager] = None):
        self.pm = pm if pm is not None else build_plugin_manager()
        self._catalogue: Optional[Catalogue] = None

    @property
    def catalogue(self) -> Catalogue:
        if self._catalogue is None:
            self._catalogue = build_catalogue(self.pm)
        return self._catalogue

    def refresh(self) -> None:
        """Forget the catalogue (after registering or unregistering a plugin)."""
        self._catalogue = None

    @property
    def failures(self) -> list[PluginFailure]:
        return self.pm.failures

    # -- catalogue hooks that are not kinds of component
    def commands(self) -> dict[str, Any]:
        import click

        found: dict[str, Any] = {}
        owners: dict[str, str] = {}
        for impl, caller in _per_plugin(self.pm, "register_commands"):

            def register(command: Any, _owner: str = impl.plugin_name) -> None:
                if not isinstance(command, click.Command) or not command.name:
                    raise PluginError(f"plugin '{_owner}' registered {command!r}, not a named click command", plugin=_owner)
                if command.name in found:
                    raise PluginError(
                        f"plugin '{_owner}' registered command '{command.name}', already registered by '{owners[command.name]}'",
                        plugin=_owner,
                    )
                found[command.name] = command
                owners[command.name] = _owner

            caller(register=register)
        return found

    def browser_launch_options(self, options: dict[str, Any]) -> dict[str, Any]:
        merged = dict(options)
        for result in reversed(self.pm.hook.browser_launch_options(options=dict(options))):
            if not result:
                continue
            for key, value in result.items():
                if key == "args":
                    merged["args"] = list(merged.get("args", [])) + list(value)
                else:
                    merged[key] = value
        return merged

    def resolve_secret(self, name: str) -> Optional[str]:
        return self.pm.hook.resolve_secret(name=name)

    def resolve_url(self, url: str) -> str:
        """A plugin's own URL scheme resolved (``demo:shop`` -> the served shop), else ``url``."""
        return self.pm.hook.resolve_url(url=url) or url

    def for_task(self, task: Any, extra: Iterable[Any] = ()) -> "EpisodeHooks":
        """Lifecycle hooks of one episode. ``extra`` objects (a task suite) take part like
        matched site adapters: their methods named after hooks run first."""
        adapters = [a for a in self.catalogue.items["site_adapters"].values() if a.matches(task.start_url)]
        return EpisodeHooks(self.pm, task, [*extra, *adapters])


class EpisodeHooks:
    """Lifecycle hooks for one episode: global plugins plus matched site adapters."""

    def __init__(self, pm: OwrlPluginManager, task: Any, adapters: list[Any]):
        self.pm = pm
        self.task = task
        self.adapters = adapters

    def _adapter_calls(self, name: str, **kwargs: Any) -> list[Any]:
        results = []
        for adapter in self.adapters:
            fn = getattr(adapter, name, None)
            if fn is not None:
                params = inspect.signature(fn).parameters
                results.append(fn(**{k: v for k, v in kwargs.items() if k in params}))
        return results

    async def episode_start(self, env: Any) -> None:
        for r in self._adapter_calls("episode_start", env=env, task=self.task):
            await _settle(r)
        for r in self.pm.hook.episode_start(env=env, task=self.task):
            await _settle(r)

    async def observation(self, observation: Any, env: Any) -> None:
        kw = dict(observation=observation, env=env, task=self.task)
        for r in self._adapter_calls("observation", **kw) + list(reversed(self.pm.hook.observation(**kw))):
            extra = await _settle(r)
            if extra:
                observation.extras.update(extra)

    async def before_tool_call(self, call: Any, env: Any) -> Any:
        for r in self._adapter_calls("before_tool_call", call=call, env=env, task=self.task):
            r = await _settle(r)
            if r is not None:
                return r
        return await _settle(self.pm.hook.before_tool_call(call=call, env=env, task=self.task))

    async def dismiss_overlays(self, env: Any) -> list[str]:
        """What each plugin (site adapters first) dismissed; empty when nothing was."""
        kw = dict(env=env, task=self.task)
        done = []
        for r in self._adapter_calls("dismiss_overlays", **kw) + list(self.pm.hook.dismiss_overlays(**kw)):
            said = await _settle(r)
            if said:
                done.append(str(said))
        return done

    async def after_tool_call(self, call: Any, result: Any, env: Any) -> None:
        kw = dict(call=call, result=result, env=env, task=self.task)
        for r in self._adapter_calls("after_tool_call", **kw) + list(self.pm.hook.after_tool_call(**kw)):
            await _settle(r)

    def step_end(self, step: Any) -> None:
        self._adapter_calls("step_end", step=step, task=self.task)
        self.pm.hook.step_end(step=step, task=self.task)

    def classify_failure(self, error: BaseException, stage: str) -> Any:
        for r in self._adapter_calls("classify_failure", error=error, stage=stage, task=self.task):
            if r is not None:
                return r
        return self.pm.hook.classify_failure(error=error, stage=stage, task=self.task)

    async def episode_end(self, trajectory: Any) -> None:
        for r in self._adapter_calls("episode_end", trajectory=trajectory):
            await _settle(r)
        for r in self.pm.hook.episode_end(trajectory=trajectory):
            await _settle(r)

    def tools(self) -> list[Any]:
        extra = []
        for adapter in self.adapters:
            extra.extend(adapter.tools() if hasattr(adapter, "tools") else [])
        return extra
