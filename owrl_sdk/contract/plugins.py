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

import difflib
import importlib
import inspect
import itertools
import logging
import os
import threading
import weakref
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional, Sequence
from urllib.parse import urlsplit

import pluggy

from owrl_sdk.contract import hookspecs
from owrl_sdk.contract.components import SiteAdapter, TaskSuite
from owrl_sdk.config import FailuresOptions, Settings, load_settings
from owrl_sdk.errors import PluginError
from owrl_sdk.support.logs import StderrHandler
from owrl_sdk.safety.secrets import redact
from owrl_sdk.version import __version__

if TYPE_CHECKING:  # pragma: no cover - names for annotations only
    from owrl_sdk.types import Task

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
    "owrl_sdk.commands.record",
    "owrl_sdk.commands.tasks",
    "owrl_sdk.commands.schema",
    "builtin_tools",
    "builtin_judges",
    "owrl_sdk.failures",
    "owrl_sdk.scheduling.executors",
    "owrl_sdk.scheduling.raybackend",
    "owrl_sdk.flows.flowplayer",
    "owrl_sdk.formats.outputs",
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
    """A pluggy manager that remembers where each plugin came from and what failed.

    Besides module plugins it holds *episode-scoped* plugins (:meth:`register_scoped`):
    catalogued site adapters and the per-episode parts of task suites, whose methods named
    after an :data:`~owrl_sdk.contract.hookspecs.EPISODE_HOOKS` hook are implementations without a
    ``@hookimpl`` mark. Only :class:`EpisodeHooks` calls the lifecycle hooks, and it leaves
    out every scoped plugin that does not belong to its episode.
    """

    def __init__(self) -> None:
        super().__init__(PROJECT)
        self.add_hookspecs(hookspecs)
        self.failures: list[PluginFailure] = []
        self.origins: dict[str, tuple[bool, Optional[str], str]] = {}  # name -> (default, version, source)
        self.scoped: dict[str, Any] = {}  # name -> episode-scoped plugin
        self.catalogue: Optional["Catalogue"] = None  # shared by every Plugins facade over this manager
        self.environ_key: Optional[tuple[Optional[str], ...]] = None
        self._marking: Any = None

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> Any:
        opts = super().parse_hookimpl_opts(plugin, name)
        if (opts is None and plugin is self._marking and name in hookspecs.EPISODE_HOOKS
                and inspect.isroutine(getattr(plugin, name, None))):
            return {"wrapper": False, "hookwrapper": False, "optionalhook": False,
                    "tryfirst": True, "trylast": False, "specname": None}
        return opts

    def register_scoped(self, plugin: Any, name: str, label: str) -> None:
        """Register a site adapter or an episode's part of a suite as an episode-scoped plugin.

        A public method whose name is close to a hook's but matches none (``episode_strat``),
        or that names a hook owrl never calls on such objects (``resolve_url``), and a hook
        method with arguments its spec does not have, raise :class:`PluginError` naming it.
        """
        problems = misnamed_hooks(plugin)
        if problems:
            raise PluginError(f"{label}: {'; '.join(problems)}", plugin=name)
        self._marking = plugin
        try:
            self.register(plugin, name=name)
        except (pluggy.PluginValidationError, ValueError) as err:
            raise PluginError(f"{label}: {err}", plugin=name) from None
        finally:
            self._marking = None
        self.scoped[name] = plugin

    def unregister_scoped(self, name: str) -> None:
        plugin = self.scoped.pop(name, None)
        if plugin is not None and self.has_plugin(name):
            self.unregister(name=name)

    def is_scoped(self, plugin: Any) -> bool:
        return any(p is plugin for p in self.scoped.values())


def misnamed_hooks(obj: Any) -> list[str]:
    """What is wrong with the hook-like method names of a site adapter or task suite (an
    instance or a class): each problem names the method."""
    inherited = set(dir(SiteAdapter)) | set(dir(TaskSuite))
    specs = [n for n in dir(hookspecs) if hasattr(getattr(hookspecs, n), PROJECT + "_spec")]
    problems = []
    source = obj.of if isinstance(obj, _EpisodePart) else obj
    cls = source if inspect.isclass(source) else type(source)
    for attr in sorted(dir(cls)):
        if attr.startswith("_") or attr in inherited or attr in hookspecs.EPISODE_HOOKS:
            continue
        if not callable(getattr(cls, attr, None)):
            continue
        if attr in specs:
            problems.append(f"method '{attr}' is a hook owrl does not call on site adapters or suites "
                            f"(only {', '.join(hookspecs.EPISODE_HOOKS)}); implement it as a module-level @hookimpl")
            continue
        close = difflib.get_close_matches(attr, specs, n=1, cutoff=0.8)
        if close:
            problems.append(f"method '{attr}' matches no hook; did you mean '{close[0]}'?")
    return problems


class _EpisodePart:
    """One episode's share of an object that takes part in its hooks (a task suite, an
    adapter that is not catalogued): its hook methods, registered for that episode only."""

    def __init__(self, of: Any):
        self.of = of
        for hook in hookspecs.EPISODE_HOOKS:
            fn = getattr(of, hook, None)
            if inspect.isroutine(fn):
                setattr(self, hook, fn)


_part_numbers = itertools.count(1)


def _scoped_label(obj: Any) -> tuple[str, str]:
    """(registration name, description) of an episode-scoped plugin."""
    name = getattr(obj, "name", None)
    if isinstance(obj, SiteAdapter):
        return f"site-adapter:{name}", f"site adapter '{name}'"
    if isinstance(obj, TaskSuite):
        return f"task-suite:{name}", f"task suite '{name}'"
    kind = type(obj).__qualname__
    return f"episode:{kind}", f"episode plugin {kind}"


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


#: The variables that decide what :func:`build_plugin_manager` loads.
PLUGIN_ENV = ("OWRL_LOAD_PLUGINS", "OWRL_DISABLE_PLUGINS", "OWRL_TRACE_PLUGINS")

_shared: Optional[OwrlPluginManager] = None
_shared_lock = threading.Lock()
_catalogue_lock = threading.RLock()


def _environ_key(environ: Optional[Mapping[str, str]] = None) -> tuple[Optional[str], ...]:
    source: Mapping[str, str] = os.environ if environ is None else environ
    return tuple(source.get(name) for name in PLUGIN_ENV)


def plugin_manager() -> OwrlPluginManager:
    """The process's plugin manager, built on first use (so loaded once, catalogue included).

    Built again when one of :data:`PLUGIN_ENV` changed since, so that code (and tests)
    setting ``OWRL_LOAD_PLUGINS`` or ``OWRL_DISABLE_PLUGINS`` get what they ask for."""
    global _shared
    key = _environ_key()
    with _shared_lock:
        if _shared is None or _shared.environ_key != key:
            _shared = build_plugin_manager()
            _shared.environ_key = key
        return _shared


def reset_plugin_manager(pm: Optional[OwrlPluginManager] = None) -> None:
    """Forget the process's plugin manager (the next :func:`plugin_manager` builds a fresh one),
    or make ``pm`` it. For tests that need a manager of their own."""
    global _shared
    with _shared_lock:
        if pm is not None and pm.environ_key is None:
            pm.environ_key = _environ_key()
        _shared = pm


#: The hook trace (``OWRL_TRACE_PLUGINS``): DEBUG records of the ``owrl.hooks`` logger.
_hook_log = logging.getLogger("owrl.hooks")


def _enable_trace(pm: OwrlPluginManager) -> None:
    if not _hook_log.handlers:  # asked for: shown on stderr unless the application routes it elsewhere

        _hook_log.addHandler(StderrHandler())
        _hook_log.propagate = False
    _hook_log.setLevel(logging.DEBUG)

    def before(hook_name: str, impls: Sequence[pluggy.HookImpl], kwargs: Mapping[str, Any]) -> None:
        names = ", ".join(i.plugin_name for i in impls)
        args = ", ".join(f"{k}={_short(v)}" for k, v in kwargs.items())
        _hook_log.debug("%s", redact(f"[owrl trace] {hook_name}({args}) -> [{names}]"))

    def after(outcome: pluggy.Result[Any], hook_name: str, impls: Sequence[pluggy.HookImpl],
              kwargs: Mapping[str, Any]) -> None:
        result: Any
        try:
            result = outcome.get_result()
        except BaseException as err:  # noqa: BLE001 - tracing only reports it
            result = f"raised {type(err).__name__}: {err}"
        if hook_name == "resolve_secret" and isinstance(result, str):
            shown = f"a value of {len(result)} characters (not shown)"  # not yet known to redact()
        else:
            shown = _short(result)
        _hook_log.debug("%s", redact(f"[owrl trace] {hook_name} returned {shown}"))

    pm.add_hookcall_monitoring(before, after)


def _short(value: Any, limit: int = 80) -> str:
    if isinstance(value, Settings):
        return "<the run's settings>"  # every hook that takes them gets the same; their tables are not the trace's
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def plugin_infos(pm: OwrlPluginManager) -> list[PluginInfo]:
    infos = []
    for name, plugin in pm.list_name_plugin():
        if plugin is None or name in pm.scoped:  # site adapters and suites are listed as components
            continue
        hooks = sorted(h.name for h in (pm.get_hookcallers(plugin) or []))
        default, version, source = pm.origins.get(name, (False, None, "registered at run time"))
        infos.append(PluginInfo(name=name, version=version, hooks=hooks, default=default, source=source))
    return sorted(infos, key=lambda i: (not i.default, i.name))


# ============================================================================ catalogue


def _takes_catalogue(cls: Any) -> bool:
    try:
        return "catalogue" in inspect.signature(cls).parameters
    except (TypeError, ValueError):  # a callable whose signature cannot be read
        return False


class Catalogue:
    """Everything plugins registered, by kind and name."""

    KINDS: dict[str, tuple[str, str, bool]] = {
        # kind: (hook, base class path, registered as instance)
        "tools": ("register_tools", "owrl_sdk.contract.tools:Tool", True),
        "policies": ("register_policies", "owrl_sdk.contract.policy:Policy", False),
        "memories": ("register_memories", "owrl_sdk.contract.memory:Memory", False),
        "judges": ("register_judges", "owrl_sdk.contract.components:Judge", False),
        "rewards": ("register_rewards", "owrl_sdk.contract.components:Reward", False),
        "optimizers": ("register_optimizers", "owrl_sdk.contract.components:Optimizer", False),
        "site_adapters": ("register_site_adapters", "owrl_sdk.contract.components:SiteAdapter", True),
        "task_suites": ("register_task_suites", "owrl_sdk.contract.components:TaskSuite", False),
        "samplers": ("register_samplers", "owrl_sdk.contract.components:TaskSampler", False),
        "executors": ("register_executors", "owrl_sdk.scheduling.executors:Executor", False),
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

    def build(self, kind: str, name: str, settings: Any, **options: Any) -> Any:
        """A new instance of the ``kind`` registered as ``name``, built with ``settings`` and
        ``options``. A component whose constructor takes a ``catalogue`` argument is handed this
        catalogue, where it finds the other plugins' components (instead of fetching the
        process's plugins)."""
        cls = self.get(kind, name)
        if "catalogue" not in options and _takes_catalogue(cls):
            options["catalogue"] = self
        return cls(settings, **options)

    def names(self, kind: str) -> list[str]:
        return sorted(self.items[kind])

    def option_models(self) -> dict[str, type]:
        """Registered name -> the ``Options`` model of every unit that declares one (the
        schema of its ``[plugins.NAME]`` table)."""
        found: dict[str, type] = {}
        for items in self.items.values():
            for name, item in items.items():
                model = getattr(item, "Options", None)
                if isinstance(model, type):
                    found[name] = model
        return found


def _resolve(path: str) -> type:
    module, _, attr = path.partition(":")
    found = getattr(importlib.import_module(module), attr)
    if not isinstance(found, type):
        raise PluginError(f"'{path}' is not a class")
    return found


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
        if kind in ("site_adapters", "task_suites"):
            problems = misnamed_hooks(item)
            if problems:
                raise PluginError(f"plugin '{plugin_name}' registered {kind[:-1].replace('_', ' ')} '{name}': "
                                  + "; ".join(problems), plugin=plugin_name)
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
    """The catalogue of ``pm``'s plugins; its site adapters are registered with ``pm`` as
    episode-scoped plugins named ``site-adapter:NAME`` (those of an earlier catalogue leave)."""
    for name in [n for n in pm.scoped if n.startswith("site-adapter:")]:
        pm.unregister_scoped(name)
    catalogue = Catalogue()
    for kind, (hook_name, _, _) in Catalogue.KINDS.items():
        for impl, caller in _per_plugin(pm, hook_name):
            caller(register=_make_register(catalogue, kind, impl.plugin_name))
    for adapter_name, adapter in catalogue.items["site_adapters"].items():
        owner = catalogue.owners[("site_adapters", adapter_name)]
        name, label = _scoped_label(adapter)
        pm.register_scoped(adapter, name, f"{label} (plugin '{owner}')")
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

    def __init__(self, pm: Optional[OwrlPluginManager] = None, settings: Optional["Settings"] = None):
        self.pm = pm if pm is not None else plugin_manager()
        self._settings = settings

    def bind(self, settings: "Settings") -> "Plugins":
        """A facade over the same plugins whose hooks receive ``settings`` (the run's: an
        ``Agent``'s, a command's, the server's), as every hook that takes ``settings`` does."""
        return Plugins(self.pm, settings)

    @property
    def settings(self) -> "Settings":
        """The settings hooks receive: those bound (:meth:`bind`), else this process's, loaded
        and checked once (``owrl.toml`` and ``OWRL_*``)."""
        if self._settings is None:
            self._settings = self.load_settings()
        return self._settings

    @property
    def catalogue(self) -> Catalogue:
        """The manager's catalogue, built on first use and shared by every facade over it."""
        with _catalogue_lock:  # threads (owrl serve's jobs) must not build and register it twice
            if self.pm.catalogue is None:
                self.pm.catalogue = build_catalogue(self.pm)
            return self.pm.catalogue

    def refresh(self) -> None:
        """Forget the catalogue (after registering or unregistering a plugin)."""
        self.pm.catalogue = None

    @property
    def failures(self) -> list[PluginFailure]:
        return self.pm.failures

    def option_models(self) -> dict[str, type]:
        """Table name -> options model: every catalogued component's ``Options`` (by registered
        name) and the failure checks' own ``[plugins.failures]``."""
        return {"failures": FailuresOptions, **self.catalogue.option_models()}

    def load_settings(self, overrides: Optional[Mapping[str, Any]] = None, **kwargs: Any) -> "Settings":
        """:func:`owrl_sdk.config.load_settings` with every ``[plugins.NAME]`` table checked
        against its options model (:meth:`option_models`): what the ``owrl`` commands call
        (:func:`load_checked_settings`), so a bad option ends the command before anything starts."""
        return load_settings(overrides, option_models=self.option_models(), **kwargs)

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
        for result in reversed(self.pm.hook.browser_launch_options(options=dict(options), settings=self.settings)):
            if not result:
                continue
            for key, value in result.items():
                if key == "args":
                    merged["args"] = list(merged.get("args", [])) + list(value)
                else:
                    merged[key] = value
        return merged

    def resolve_secret(self, name: str) -> Optional[str]:
        value: Optional[str] = self.pm.hook.resolve_secret(name=name, settings=self.settings)
        return value

    def resolve_task(self, task: "Task") -> "Task":
        """``task`` with its start URL resolved (:meth:`resolve_url`); the URL as given is kept in
        ``metadata["given_start_url"]`` when a plugin changed it."""
        resolved = self.resolve_url(task.start_url)
        if resolved == task.start_url:
            return task
        return task.model_copy(update={"start_url": resolved,
                                       "metadata": {**task.metadata, "given_start_url": task.start_url}})

    def resolve_url(self, url: str) -> str:
        """A plugin's own URL scheme resolved (``demo:shop`` -> the served shop), else ``url``."""
        return self.pm.hook.resolve_url(url=url, settings=self.settings) or url

    def site_origins(self, scheme: str) -> frozenset[str]:
        """The origins on which this process serves the site of ``scheme`` (``site_origins``)."""
        return frozenset(o.rstrip("/") for found in self.pm.hook.site_origins(scheme=scheme, settings=self.settings)
                         for o in found or ())

    def adapter_matches(self, adapter: Any, url: str) -> bool:
        """Whether site adapter ``adapter`` takes part in an episode starting at ``url``: its
        ``matches`` says so for ``url``, or, for an adapter that names a ``scheme``, for ``url``
        written in that scheme when a plugin serves the scheme's site on ``url``'s origin."""
        if _matches(adapter, url, self.settings):
            return True
        scheme = getattr(adapter, "scheme", "")
        if not scheme or "://" not in url:
            return False
        parts = urlsplit(url)
        here = f"{parts.scheme}://{parts.netloc}".lower()
        if here not in {o.lower() for o in self.site_origins(scheme)}:
            return False
        rest = url[len(here):].lstrip("/")
        return _matches(adapter, f"{scheme}/{rest}", self.settings)

    def for_task(self, task: Any, extra: Iterable[Any] = ()) -> "EpisodeHooks":
        """Lifecycle hooks of one episode. ``extra`` objects (a task suite) take part like
        matched site adapters (:meth:`adapter_matches`): their methods named after hooks run first."""
        adapters = [a for a in self.catalogue.items["site_adapters"].values()
                    if self.adapter_matches(a, task.start_url)]
        return EpisodeHooks(self.pm, task, [*extra, *adapters])


def _matches(adapter: Any, url: str, settings: "Settings") -> bool:
    """A site adapter's ``matches``, given the run's settings where it takes them
    (``matches(url, settings)``; an adapter written before reads ``matches(url)``)."""
    try:
        takes = "settings" in inspect.signature(adapter.matches).parameters
    except (TypeError, ValueError):
        takes = False
    return bool(adapter.matches(url, settings=settings) if takes else adapter.matches(url))


class EpisodeHooks:
    """Lifecycle hooks for one episode: global plugins plus this episode's scoped plugins.

    ``adapters`` are the objects that take part in this episode only: the matched site
    adapters (already registered by the catalogue) and extras such as the task suite, whose
    hook methods are registered for this episode as ``task-suite:NAME#N`` and leave it when
    the episode ends (:meth:`close`). Every hook is called through pluggy, leaving out the
    scoped plugins of other episodes, so ``OWRL_TRACE_PLUGINS`` sees all of them.
    Async-capable hooks call each implementation in turn and await it before the next.
    """

    def __init__(self, pm: OwrlPluginManager, task: Any, adapters: list[Any]):
        self.pm = pm
        self.task = task
        self.adapters = adapters
        self._mine: list[Any] = []
        parts: list[str] = []
        try:
            for obj in adapters:
                if pm.is_scoped(obj):
                    self._mine.append(obj)
                    continue
                part = _EpisodePart(obj)
                name, label = _scoped_label(obj)
                name = f"{name}#{next(_part_numbers)}"
                pm.register_scoped(part, name, label)
                parts.append(name)
                self._mine.append(part)
        except BaseException:
            _release(pm, parts)
            raise
        self._close = weakref.finalize(self, _release, pm, parts)

    def close(self) -> None:
        """Unregister this episode's own parts (idempotent; also done when the hooks are dropped)."""
        self._close()

    def _caller(self, name: str) -> Any:
        others = [p for p in self.pm.scoped.values() if not any(p is m for m in self._mine)]
        return self.pm.subset_hook_caller(name, remove_plugins=others)

    async def _each(self, name: str, **kwargs: Any) -> list[Any]:
        """Each implementation's awaited result, in call order; one finishes before the next starts."""
        results = []
        for one in self._one_by_one(name):
            for r in one(**kwargs):
                results.append(await _settle(r))
        return results

    def _one_by_one(self, name: str) -> list[Any]:
        """One hook caller per implementation taking part in this episode, in call order."""
        everyone = getattr(self.pm.hook, name).get_hookimpls()
        mine = self._caller(name).get_hookimpls()
        return [  # pluggy calls the last of get_hookimpls() first
            self.pm.subset_hook_caller(name, remove_plugins=[i.plugin for i in everyone if i is not impl])
            for impl in reversed(mine)
        ]

    async def _first(self, name: str, **kwargs: Any) -> Any:
        for one in self._one_by_one(name):
            r = await _settle(one(**kwargs))
            if r is not None:
                return r
        return None

    async def episode_start(self, env: Any) -> None:
        await self._each("episode_start", env=env, task=self.task)

    async def observation(self, observation: Any, env: Any) -> None:
        """Merge every result into ``observation.extras`` in call order (a later key wins)."""
        for extra in await self._each("observation", observation=observation, env=env, task=self.task):
            if extra:
                observation.extras.update(extra)

    async def before_tool_call(self, call: Any, env: Any) -> Any:
        return await self._first("before_tool_call", call=call, env=env, task=self.task)

    async def dismiss_overlays(self, env: Any) -> list[str]:
        """What each plugin (site adapters first) dismissed; empty when nothing was."""
        return [str(said) for said in await self._each("dismiss_overlays", env=env, task=self.task) if said]

    async def after_tool_call(self, call: Any, result: Any, env: Any) -> None:
        await self._each("after_tool_call", call=call, result=result, env=env, task=self.task)

    def step_end(self, step: Any, trajectory: Any = None) -> None:
        self._caller("step_end")(step=step, task=self.task, trajectory=trajectory)

    def classify_failure(self, error: BaseException, stage: str) -> Any:
        return self._caller("classify_failure")(error=error, stage=stage, task=self.task)

    def reads_changes(self) -> bool:
        """Whether a plugin of this episode asks for change feedback (``reads_changes``)."""
        return any(bool(r) for r in self._caller("reads_changes")(task=self.task))

    async def episode_end(self, trajectory: Any) -> None:
        try:
            await self._each("episode_end", trajectory=trajectory)
        finally:
            self.close()

    def tools(self) -> list[Any]:
        extra: list[Any] = []
        for adapter in self.adapters:
            extra.extend(adapter.tools() if hasattr(adapter, "tools") else [])
        return extra


def _release(pm: OwrlPluginManager, names: list[str]) -> None:
    for name in names:
        pm.unregister_scoped(name)
    names.clear()


def load_checked_settings(overrides: Optional[Mapping[str, Any]] = None, **kwargs: Any) -> "Settings":
    """The settings (:func:`owrl_sdk.config.load_settings`) with every ``[plugins.NAME]`` table
    checked against its options model, for this process's plugins: :meth:`Plugins.load_settings`."""
    return Plugins().load_settings(overrides, **kwargs)
