"""Every hook an owrl plugin can implement.

pluggy project and entry-point group: ``owrl``. Implement a hook with
``@owrl_sdk.hookimpl`` on a function of the same name; declare only the arguments you
use. Hooks marked *async-capable* may return an awaitable (an ``async def`` hookimpl):
owrl awaits it before going on; the others are called synchronously. An exception in an
episode's hook ends the episode as ``infra_error`` (stage ``hook``), except in
``episode_end`` (a trajectory warning) and ``classify_failure`` (owrl's own kind is used).

Catalogue hooks run once when the catalogue is built and hand the plugin a ``register``
callback; registration checks the type and refuses a name that is already taken.
Lifecycle hooks run inside an episode, in the order pluggy gives (``tryfirst`` first, then
last registered first). The objects that take part in one episode only, matched site
adapters and the task suite being evaluated, are plugins too: their methods named after
the hooks in :data:`EPISODE_HOOKS` are hook implementations, registered ``tryfirst``, so
they run before the global plugins (the suite before the adapters).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

import pluggy

if TYPE_CHECKING:  # pragma: no cover - names for annotations only
    from owrl_sdk.config import Settings
    from owrl_sdk.types import Failure, Observation, Step, Task, ToolCall, ToolResult, Trajectory

hookspec = pluggy.HookspecMarker("owrl")

Register = Callable[..., None]

#: The lifecycle hooks a site adapter or task suite implements as plain methods.
EPISODE_HOOKS: tuple[str, ...] = (
    "episode_start", "observation", "before_tool_call", "dismiss_overlays", "after_tool_call",
    "step_end", "classify_failure", "episode_end", "reads_changes",
)

# ============================================================================ catalogue


@hookspec
def register_tools(register: Register) -> None:
    """Register tools the policy can call.

    Called once, when the catalogue is built.
    ``register(tool)`` takes an instance of :class:`owrl_sdk.contract.tools.Tool`.
    Returns nothing; a name already registered is refused with a :class:`PluginError`.
    """


@hookspec
def register_policies(register: Register) -> None:
    """Register policies (what decides the next calls).

    Called once, when the catalogue is built.
    ``register(cls)`` takes a subclass of :class:`owrl_sdk.contract.policy.Policy` with a unique
    ``name``; it is constructed only when chosen, so heavy imports belong in ``__init__``.
    """


@hookspec
def register_memories(register: Register) -> None:
    """Register memory strategies (what context the policy sees).

    Called once, when the catalogue is built.
    ``register(cls)`` takes a subclass of :class:`owrl_sdk.contract.memory.Memory` with a unique ``name``.
    """


@hookspec
def register_judges(register: Register) -> None:
    """Register judges that score a finished trajectory.

    Called once, when the catalogue is built.
    ``register(cls)`` takes a subclass of :class:`owrl_sdk.contract.components.Judge` with a unique ``name``.
    """


@hookspec
def register_rewards(register: Register) -> None:
    """Register reward functions that turn judgements into a scalar reward.

    Called once, when the catalogue is built.
    ``register(cls)`` takes a subclass of :class:`owrl_sdk.contract.components.Reward` with a unique ``name``.
    """


@hookspec
def register_optimizers(register: Register) -> None:
    """Register optimizers (training algorithms such as SFT or MM-GRPO).

    Called once, when the catalogue is built.
    ``register(cls)`` takes a subclass of :class:`owrl_sdk.contract.components.Optimizer` with a unique ``name``.
    """


@hookspec
def register_site_adapters(register: Register) -> None:
    """Register site adapters: plugins scoped to the sites whose domains they match.

    Called once, when the catalogue is built.
    ``register(adapter)`` takes an instance of :class:`owrl_sdk.contract.components.SiteAdapter`.
    """


@hookspec
def register_task_suites(register: Register) -> None:
    """Register task suites that ``owrl eval --suite NAME`` can run.

    Called once, when the catalogue is built.
    ``register(cls)`` takes a subclass of :class:`owrl_sdk.contract.components.TaskSuite` with a unique ``name``.
    """


@hookspec
def register_samplers(register: Register) -> None:
    """Register task samplers for online RL (which tasks each iteration practises).

    Called once, when the catalogue is built.
    ``register(cls)`` takes a subclass of :class:`owrl_sdk.contract.components.TaskSampler` with a unique ``name``.
    """


@hookspec
def register_executors(register: Register) -> None:
    """Register executors: where the episodes of an evaluation (``owrl eval --backend NAME``),
    a batch and RL rollouts (``owrl train rl --backend NAME``, ``rollout_backend``) run.

    Called once, when the catalogue is built.
    ``register(cls)`` takes a subclass of :class:`owrl_sdk.scheduling.executors.Executor` with a unique
    ``name``; the core registers ``local`` and ``ray``. One whose workers run in other
    processes sets ``shares_policy = False``: RL then hands it a served policy only.
    """


@hookspec
def register_commands(register: Register) -> None:
    """Register CLI subcommands.

    Called once, when the ``owrl`` command line is built.
    ``register(command)`` takes a :class:`click.Command` (or group) with a unique name.
    """


# ============================================================================ browser


@hookspec
def browser_launch_options(options: dict[str, Any], settings: "Settings") -> Optional[dict[str, Any]]:
    """Adjust how the browser is launched.

    Called once per browser launch, before it starts.
    ``options`` are the Playwright launch keyword arguments chosen so far (read them,
    do not change them in place). Return a dict of keys to override, or None.
    Every result is merged in registration order (the reverse of call order): on a key
    clash the last-registered plugin's value wins; ``args`` lists are appended, not replaced.
    ``settings``: the settings of the run (a plugin's own table: ``settings.options(NAME, Model)``).
    """


@hookspec(firstresult=True)
def resolve_url(url: str, settings: "Settings") -> Optional[str]:
    """Turn a start URL of a plugin's own scheme (``demo:shop``) into a real one.

    Called for every start URL before its episode (``owrl run``, ``owrl eval`` and
    training, a batch, ``owrl serve``, ``owrl record``, the Agent), in the process that runs
    the episode, so a plugin may start a server it owns (in process, for the life of the process).
    Return the resolved URL, or None when the URL is not yours. Stops at the first
    non-None result. ``settings``: the settings of the run that asks.
    """


@hookspec
def site_origins(scheme: str, settings: "Settings") -> Optional[list[str]]:
    """Say where this process serves the site of a URL scheme (``demo:shop``).

    Called when owrl picks the site adapters of an episode, for each adapter that names a
    ``scheme``. Return the origins (``http://127.0.0.1:PORT``) on which a site of ``scheme``
    is served in this process right now, or None when the scheme is not yours. The results
    of all plugins are put together. A URL on one of them is handed to the adapter's
    ``matches`` written in the scheme (``demo:shop/cart``), so an adapter of a site served
    on a random port knows it without reading another package's state. ``settings``: the
    settings of the run that asks.
    """


@hookspec(firstresult=True)
def resolve_secret(name: str, settings: "Settings") -> Optional[str]:
    """Give the value of secret ``name`` (a secret-store plugin).

    Called when a tool types a ``{{secret:NAME}}`` placeholder, at that moment only.
    Return the value, or None to let the next plugin (and finally the environment
    variable ``OWRL_SECRET_NAME``) answer. Stops at the first non-None result. The value
    is redacted from everything owrl records. ``settings``: the settings of the run that asks.
    """


# ============================================================================ episode


@hookspec
def episode_start(env: Any, task: "Task") -> Optional[Any]:
    """Prepare an episode: set cookies, log in, dismiss banners.

    Called after the environment opened the task's start page, before the first observation.
    ``env`` is the episode's environment, ``task`` its task. Async-capable.
    Returns nothing (or an awaitable); an exception makes the episode an infrastructure error.
    """


@hookspec
def observation(observation: "Observation", env: Any, task: "Task") -> Optional[Any]:
    """Enrich an observation before the policy sees it.

    Called after each ``env.observe()``. Return a dict (or an awaitable of one) whose
    items are merged into ``observation.extras``, or None. All results are merged in call
    order (task suite, matched site adapters, then the global plugins, last registered
    first), each one's items replacing earlier ones: on a key clash the result merged last
    wins, so a global plugin's over a site adapter's, and the first-registered plugin's
    over a later one's.
    """


@hookspec(firstresult=True)
def before_tool_call(call: "ToolCall", env: Any, task: "Task") -> Optional[Any]:
    """Inspect a call before it runs; veto it by returning a ToolResult.

    Called for each call of a turn whose tool exists and whose arguments validated, just
    before its tool runs (once: not again for the retry after ``dismiss_overlays``; not for a
    call skipped after an earlier one failed). Async-capable.
    Return None to let the call run, or a :class:`ToolResult` (usually an error) that is
    used instead of running it. Stops at the first non-None result.
    """


@hookspec
def dismiss_overlays(env: Any, task: "Task") -> Optional[Any]:
    """Dismiss what covers the page (cookie banners, pop-ups, chat widgets).

    Called when a call failed because another element covered its target; site adapters
    know their sites' overlays. Async-capable. Return a short description of what was
    dismissed (a string), or None when nothing was. When any plugin dismissed something,
    the call is retried once.
    """


@hookspec
def after_tool_call(call: "ToolCall", result: "ToolResult", env: Any, task: "Task") -> Optional[Any]:
    """See a call's result; may add to its feedback by mutating ``result.feedback``.

    Called after each call ran, was vetoed, or was refused by the loop (an unknown tool,
    bad arguments: ``result.error_kind`` says which), before its expectation is checked; not
    for a call skipped after an earlier one failed. Async-capable. Returns nothing.
    """


@hookspec
def step_end(step: "Step", task: "Task", trajectory: "Trajectory") -> None:
    """See a finished step (observation, turn, call records with verdicts).

    Called once per step, after the step was appended to ``trajectory`` (the episode's
    trajectory so far, outcome not yet set) and the memory recorded it, before the next
    observation. Called synchronously (an ``async def`` implementation is never awaited);
    an exception ends the episode as ``infra_error`` (stage ``hook``). Like every hook, an implementation takes only the arguments it names: the
    run store takes ``step`` and ``trajectory`` (it writes the step's screenshot, then
    rewrites ``trajectory.json``). Returns nothing.
    """


@hookspec
def reads_changes(task: "Task") -> Optional[bool]:
    """Ask for each call's change feedback in this episode.

    Called once per episode, before the reset. The after-action snapshot and the change
    description it gives (``ToolResult.feedback`` and ``changed``) are computed only when
    something reads them: the policy or the memory (their ``reads_changes``), the
    ``change_feedback = "always"`` setting, or a plugin (a ``step_end`` reader, a live view)
    that returns True here. Return True to ask, None otherwise; False is the same as None.
    """


@hookspec(firstresult=True)
def classify_failure(error: BaseException, stage: str, task: "Task") -> Optional["Failure"]:
    """Say what kind of failure an exception is.

    Called when an exception escapes a stage of the episode (``stage`` is one of
    ``reset``, ``observe``, ``policy``, ``memory``, ``tool``, ``verify``, ``hook``).
    Return a :class:`Failure` or None; stops at the first non-None result. owrl's own
    classifier (``owrl_sdk.failures``, a ``trylast`` default plugin) answers when no other
    plugin does: network, page, policy and infra kinds, and a ``SiteFault`` carries its own.
    """


@hookspec
def episode_end(trajectory: "Trajectory") -> Optional[Any]:
    """See a finished trajectory, outcome set.

    Called once per episode, after the outcome is known and before the environment
    closes. Async-capable. Returns nothing.
    """
