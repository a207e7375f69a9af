"""owrl's public API: the names plugins, templates and embedders may use.

Everything a plugin (a site adapter, a tool, a judge, a memory, a policy, a trainer) or an
application that embeds owrl needs is importable from here, and only what is here is promised:

    from owrl_sdk.api import Tool, ToolResult, TargetArgs, Register, hookimpl

The modules behind these names (``owrl_sdk.types``, ``owrl_sdk.browser.env``, ...) are the
SDK's own and may be reorganised in any release. The promise (``docs/api.md``):

- a name listed in :data:`__all__` keeps its meaning and its signature's accepted calls within a
  major version (semantic versioning);
- a name to be removed or changed incompatibly first warns (``DeprecationWarning``) for at least
  one minor version, and ``CHANGELOG.md`` says so;
- ``tests/api_snapshot.txt`` records every name with its signature; a change to it is a
  deliberate edit of that file, reviewed with the change.

Names load on first use (PEP 562): importing this module costs nothing; ``from owrl_sdk.api
import BrowserEnv`` loads the browser environment, ``import Settings`` does not.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: Each public name, the module that defines it, and its name there (a module itself: None).
#: The groups are the sections of docs/api.md.
SECTIONS: dict[str, dict[str, tuple[str, "str | None"]]] = {
    "Plugins and hooks": {
        "hookimpl": ("owrl_sdk.contract.plugins", "hookimpl"),
        "Register": ("owrl_sdk.contract.hookspecs", "Register"),
        "Plugins": ("owrl_sdk.contract.plugins", "Plugins"),
        "command_plugins": ("owrl_sdk.cli", "command_plugins"),
    },
    "Running": {
        "Agent": ("owrl_sdk.agent", "Agent"),
        "RunRequest": ("owrl_sdk.flows.runrequest", "RunRequest"),
        "Settings": ("owrl_sdk.config", "Settings"),
        "load_settings": ("owrl_sdk.config", "load_settings"),
        "load_checked_settings": ("owrl_sdk.contract.plugins", "load_checked_settings"),
        "openai_endpoint": ("owrl_sdk.config", "openai_endpoint"),
        "read_toml": ("owrl_sdk.config", "read_toml"),
        "validate_table": ("owrl_sdk.config", "validate_table"),
    },
    "Types": {
        "Task": ("owrl_sdk.types", "Task"),
        "Trajectory": ("owrl_sdk.types", "Trajectory"),
        "Step": ("owrl_sdk.types", "Step"),
        "Turn": ("owrl_sdk.types", "Turn"),
        "ToolCall": ("owrl_sdk.types", "ToolCall"),
        "ToolResult": ("owrl_sdk.types", "ToolResult"),
        "CallRecord": ("owrl_sdk.types", "CallRecord"),
        "Observation": ("owrl_sdk.types", "Observation"),
        "Target": ("owrl_sdk.types", "Target"),
        "Expectation": ("owrl_sdk.types", "Expectation"),
        "Check": ("owrl_sdk.types", "Check"),
        "Verdict": ("owrl_sdk.types", "Verdict"),
        "Failure": ("owrl_sdk.types", "Failure"),
        "Judgement": ("owrl_sdk.types", "Judgement"),
        "PolicyInfo": ("owrl_sdk.types", "PolicyInfo"),
        "Flow": ("owrl_sdk.formats.documents", "Flow"),
        "load_trajectory": ("owrl_sdk.formats.documents", "load_trajectory"),
        "save_trajectory": ("owrl_sdk.formats.documents", "save_trajectory"),
        "load_flow": ("owrl_sdk.formats.documents", "load_flow"),
        "format_validation_error": ("owrl_sdk.formats.documents", "format_validation_error"),
    },
    "Components": {
        "Policy": ("owrl_sdk.contract.policy", "Policy"),
        "TrainablePolicy": ("owrl_sdk.contract.policy", "TrainablePolicy"),
        "trainable": ("owrl_sdk.contract.policy", "trainable"),
        "Environment": ("owrl_sdk.contract.env", "Environment"),
        "Tool": ("owrl_sdk.contract.tools", "Tool"),
        "TargetArgs": ("owrl_sdk.contract.tools", "TargetArgs"),
        "ToolArgumentError": ("owrl_sdk.contract.tools", "ToolArgumentError"),
        "Judge": ("owrl_sdk.contract.components", "Judge"),
        "Reward": ("owrl_sdk.contract.components", "Reward"),
        "Optimizer": ("owrl_sdk.contract.components", "Optimizer"),
        "TaskSampler": ("owrl_sdk.contract.components", "TaskSampler"),
        "TaskSuite": ("owrl_sdk.contract.components", "TaskSuite"),
        "SuiteCheck": ("owrl_sdk.contract.components", "SuiteCheck"),
        "SiteAdapter": ("owrl_sdk.contract.components", "SiteAdapter"),
        "Memory": ("owrl_sdk.contract.memory", "Memory"),
        "Context": ("owrl_sdk.contract.memory", "Context"),
    },
    "The browser": {
        "BrowserEnv": ("owrl_sdk.browser.env", "BrowserEnv"),
        "ActionError": ("owrl_sdk.browser.errors", "ActionError"),
        "Located": ("owrl_sdk.browser.targets", "Located"),
        "short": ("owrl_sdk.browser.feedback", "short"),
        "bound_snapshot": ("owrl_sdk.browser.observation_budget", "bound_snapshot"),
        "DomainPolicy": ("owrl_sdk.safety.domains", "DomainPolicy"),
        "Blocklist": ("owrl_sdk.safety.blocklist", "Blocklist"),
        "host_of": ("owrl_sdk.safety.blocklist", "host_of"),
    },
    "Errors": {
        "OwrlError": ("owrl_sdk.errors", "OwrlError"),
        "UsageError": ("owrl_sdk.errors", "UsageError"),
        "ConfigError": ("owrl_sdk.errors", "ConfigError"),
        "DocumentError": ("owrl_sdk.errors", "DocumentError"),
        "InfraError": ("owrl_sdk.errors", "InfraError"),
        "ModelUnavailable": ("owrl_sdk.errors", "ModelUnavailable"),
        "require_extra": ("owrl_sdk.errors", "require_extra"),
    },
    "Training and scale-out": {
        "Executor": ("owrl_sdk.scheduling.executors", "Executor"),
        "InProcessExecutor": ("owrl_sdk.scheduling.executors", "InProcessExecutor"),
        "executor_class": ("owrl_sdk.scheduling.executors", "executor_class"),
        "Workload": ("owrl_sdk.scheduling.executors", "Workload"),
        "WorkItem": ("owrl_sdk.scheduling.executors", "WorkItem"),
        "NamedPolicy": ("owrl_sdk.scheduling.executors", "NamedPolicy"),
        "SharedPolicy": ("owrl_sdk.scheduling.executors", "SharedPolicy"),
        "failed_trajectory": ("owrl_sdk.scheduling.executors", "failed_trajectory"),
        "run_episode": ("owrl_sdk.episode.runner", "run_episode"),
        "episode_limits": ("owrl_sdk.episode.runner", "episode_limits"),
        "RunStore": ("owrl_sdk.episode.runstore", "RunStore"),
    },
    "Utilities": {
        "secrets": ("owrl_sdk.safety.secrets", None),
        "SafeConsole": ("owrl_sdk.support.console", "SafeConsole"),
        "write_atomic": ("owrl_sdk.support.files", "write_atomic"),
        "cache_dir": ("owrl_sdk.support.dirs", "cache_dir"),
        "match_answer": ("owrl_sdk.support.answers", "match_answer"),
        "normalize": ("owrl_sdk.support.answers", "normalize"),
    },
}

#: Where each public name comes from.
PUBLIC: dict[str, tuple[str, "str | None"]] = {name: where for names in SECTIONS.values() for name, where in names.items()}

__all__ = sorted(PUBLIC)


def __getattr__(name: str) -> Any:
    where = PUBLIC.get(name)
    if where is None:
        raise AttributeError(f"owrl_sdk.api has no {name!r}: the public names are owrl_sdk.api.__all__ (docs/api.md)")
    module = importlib.import_module(where[0])
    value = module if where[1] is None else getattr(module, where[1])
    globals()[name] = value  # loaded once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # what type checkers see: the same names, eagerly
    from owrl_sdk.safety import secrets as secrets
    from owrl_sdk.agent import Agent as Agent
    from owrl_sdk.support.answers import match_answer as match_answer, normalize as normalize
    from owrl_sdk.safety.blocklist import Blocklist as Blocklist, host_of as host_of
    from owrl_sdk.browser.env import BrowserEnv as BrowserEnv
    from owrl_sdk.browser.errors import ActionError as ActionError
    from owrl_sdk.browser.feedback import short as short
    from owrl_sdk.browser.targets import Located as Located
    from owrl_sdk.cli import command_plugins as command_plugins
    from owrl_sdk.contract.components import (Judge as Judge, Optimizer as Optimizer, Reward as Reward,
                                     SiteAdapter as SiteAdapter, SuiteCheck as SuiteCheck, TaskSampler as TaskSampler,
                                     TaskSuite as TaskSuite)
    from owrl_sdk.config import (Settings as Settings, load_settings as load_settings, openai_endpoint as openai_endpoint,
                                 read_toml as read_toml, validate_table as validate_table)
    from owrl_sdk.support.console import SafeConsole as SafeConsole
    from owrl_sdk.support.dirs import cache_dir as cache_dir
    from owrl_sdk.formats.documents import Flow as Flow, format_validation_error as format_validation_error
    from owrl_sdk.formats.documents import load_flow as load_flow, load_trajectory as load_trajectory
    from owrl_sdk.formats.documents import save_trajectory as save_trajectory
    from owrl_sdk.safety.domains import DomainPolicy as DomainPolicy
    from owrl_sdk.contract.env import Environment as Environment
    from owrl_sdk.errors import (ConfigError as ConfigError, DocumentError as DocumentError, InfraError as InfraError,
                                 ModelUnavailable as ModelUnavailable, OwrlError as OwrlError, UsageError as UsageError,
                                 require_extra as require_extra)
    from owrl_sdk.scheduling.executors import (Executor as Executor, InProcessExecutor as InProcessExecutor,
                                               NamedPolicy as NamedPolicy, SharedPolicy as SharedPolicy,
                                               WorkItem as WorkItem, Workload as Workload, executor_class as executor_class,
                                               failed_trajectory as failed_trajectory)
    from owrl_sdk.support.files import write_atomic as write_atomic
    from owrl_sdk.contract.hookspecs import Register as Register
    from owrl_sdk.contract.memory import Context as Context, Memory as Memory
    from owrl_sdk.browser.observation_budget import bound_snapshot as bound_snapshot
    from owrl_sdk.contract.plugins import Plugins as Plugins, hookimpl as hookimpl, load_checked_settings as load_checked_settings
    from owrl_sdk.contract.policy import Policy as Policy, TrainablePolicy as TrainablePolicy, trainable as trainable
    from owrl_sdk.episode.runner import episode_limits as episode_limits, run_episode as run_episode
    from owrl_sdk.flows.runrequest import RunRequest as RunRequest
    from owrl_sdk.episode.runstore import RunStore as RunStore
    from owrl_sdk.contract.tools import TargetArgs as TargetArgs, Tool as Tool, ToolArgumentError as ToolArgumentError
    from owrl_sdk.types import (CallRecord as CallRecord, Check as Check, Expectation as Expectation, Failure as Failure,
                                Judgement as Judgement, Observation as Observation, PolicyInfo as PolicyInfo, Step as Step,
                                Target as Target, Task as Task, ToolCall as ToolCall, ToolResult as ToolResult,
                                Trajectory as Trajectory, Turn as Turn, Verdict as Verdict)
