"""The one loop: observe -> compose -> act -> verify -> remember.

An :class:`Episode` sequences the environment, the policy, the memory, the tools and the
lifecycle hooks. It never raises for what happens inside the episode: every failure
becomes the trajectory's outcome, with a failure kind. Only cancellation propagates,
after the trajectory has been closed as ``aborted`` and the ``episode_end`` hooks saw it.

Whatever watches an episode (the run store, ``owrl run``'s live view, ``owrl serve``'s job
log) does so through the hooks: ``step_end`` (with the trajectory so far) after every step,
``episode_end`` once the outcome is set, as per-episode plugins of :class:`EpisodeHooks`.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from owrl_sdk.contract.env import Environment
from owrl_sdk.errors import InfraError
from owrl_sdk.contract.memory import Memory
from owrl_sdk.formats.outputs import outputs_of
from owrl_sdk.contract.plugins import EpisodeHooks
from owrl_sdk.contract.policy import Policy
from owrl_sdk.safety.secrets import scrub
from owrl_sdk.contract.tools import Tool, ToolArgumentError
from owrl_sdk.types import NO_CHANGE, CallRecord, Failure, Outcome, Step, Task, ToolCall, ToolResult, Trajectory, Turn, utc_now


@dataclass
class EpisodeLimits:
    max_steps: int = 30
    max_parse_errors: int = 3
    step_timeout: float = 300.0
    episode_timeout: float = 1800.0
    feedback_chars: int = 512
    #: The same call (name and arguments) made this many times in a row, each changing nothing
    #: (``ToolResult.changed`` False: "no visible change"), ends the episode as
    #: ``policy.repeated_without_change``; 0: never.
    max_unchanged_repeats: int = 3
    #: ``auto``: change feedback only when something reads it (:meth:`Episode._reads_changes`);
    #: ``always``: in every episode.
    change_feedback: str = "auto"


class _Stage(Exception):
    """Carries an exception out of a stage, with the stage's name."""

    def __init__(self, stage: str, error: BaseException):
        super().__init__(stage)
        self.stage = stage
        self.error = error


@dataclass
class Episode:
    task: Task
    env: Environment
    policy: Policy
    memory: Memory
    tools: list[Tool]
    hooks: EpisodeHooks
    limits: EpisodeLimits = field(default_factory=EpisodeLimits)

    def __post_init__(self) -> None:
        self.tool_index = {t.name: t for t in self.tools}
        self.trajectory = Trajectory(task=self.task, policy=self.policy.info(),  # input values: owrl_sdk.rules.inputs
                                     inputs=scrub(dict(self.task.metadata.get("inputs") or {})))
        self._unchanged: tuple[Optional[str], int] = (None, 0)  # the call repeated, how often
        self._deadline = float("inf")  # time.monotonic() past which no step starts (run() sets it)

    # ------------------------------------------------------------------ driver

    async def run(self) -> Trajectory:
        traj = self.trajectory
        # The deadline is also checked before each step: wait_for's cancellation can be lost (an
        # environment or hook that swallows CancelledError, or Python 3.11's wait_for when a nested
        # wait_for finishes as it is cancelled), and the episode would then run on to max_steps.
        self._deadline = time.monotonic() + self.limits.episode_timeout
        try:
            outcome = await asyncio.wait_for(self._steps(), timeout=self.limits.episode_timeout)
        except asyncio.TimeoutError:
            outcome = self._over_time()
        except asyncio.CancelledError:
            self._finish(Outcome(status="aborted", failure=Failure(category="infra", code="cancelled")))
            await self._end()  # the run store writes the aborted trajectory before it propagates
            raise
        except _Stage as s:
            outcome = Outcome(status="infra_error", failure=self._classify(s.error, s.stage))
        self._finish(outcome)
        await self._end()
        return traj

    async def _end(self) -> None:
        """The ``episode_end`` hooks (per-episode plugins first: the run store writes the final
        trajectory there). A failing one is a warning: a plugin's bug must not lose the episode."""
        try:
            await self.hooks.episode_end(self.trajectory)
        except Exception as err:  # noqa: BLE001 - recorded in the trajectory
            self.trajectory.warnings.append(f"episode_end hook failed: {type(err).__name__}: {err}")

    def _finish(self, outcome: Outcome) -> None:
        traj = self.trajectory
        traj.outcome = outcome
        outcome.outputs = {**outputs_of(traj), **outcome.outputs}  # save_as values, done's output
        traj.ended_at = utc_now()
        for warning in [*getattr(self.env, "warnings", []), *getattr(self.policy, "warnings", [])]:
            if warning not in traj.warnings:
                traj.warnings.append(warning)

    async def _stage(self, stage: str, coro: Any) -> Any:
        try:
            return await coro
        except (asyncio.CancelledError, _Stage, asyncio.TimeoutError):
            raise
        except Exception as err:
            raise _Stage(stage, err) from err

    def _classify(self, error: BaseException, stage: str) -> Failure:
        try:
            found = self.hooks.classify_failure(error, stage)
        except Exception:  # noqa: BLE001 - classification must not fail the episode twice
            found = None
        if isinstance(found, Failure):
            return found
        code = error.code if isinstance(error, InfraError) else type(error).__name__
        return Failure(category="infra", code=code, detail=f"{stage}: {error}"[:1000])

    def _reads_changes(self) -> bool:
        """Whether this episode's change feedback is read: by the policy, the memory or a
        plugin (the ``reads_changes`` hook), or always (the ``change_feedback`` setting)."""
        if self.limits.change_feedback == "always":
            return True
        if getattr(self.policy, "reads_changes", True) or getattr(self.memory, "reads_changes", True):
            return True
        return bool(self._plain("hook", self.hooks.reads_changes))

    # ------------------------------------------------------------------ steps

    async def _steps(self) -> Outcome:
        wanted = dict(self._plain("policy", self.policy.environment) or {})
        configure = getattr(self.env, "configure", None)
        if "error_pages" in wanted and (configure is None or not _takes(configure, "error_pages")):
            del wanted["error_pages"]  # an environment without HTTP pages (or one that predates it)
        if configure is not None and _takes(configure, "changes"):
            wanted["changes"] = self._reads_changes()
        self.trajectory.metadata["change_feedback"] = wanted.get("changes", True)
        if wanted and configure is not None:
            self._plain("reset", configure, **wanted)
        await self._stage("reset", self.env.reset(self.task))
        self._plain("memory", self.memory.reset, self.task)
        await self._stage("hook", self.hooks.episode_start(self.env))
        self.tool_index.update({t.name: t for t in self._plain("hook", self.hooks.tools)})
        parse_errors = 0
        max_steps = self.task.max_steps or self.limits.max_steps
        for index in range(max_steps):
            if time.monotonic() >= self._deadline:
                return self._over_time()
            step_started, started_at = time.perf_counter(), utc_now()
            obs = await self._stage("observe", self.env.observe())
            await self._stage("hook", self.hooks.observation(obs, self.env))
            obs = scrub(obs)  # what the hooks added (extras) is read by the policy too
            observed = time.perf_counter()
            tools = [t for t in self.tool_index.values() if self._plain("tool", t.available, self.env)]
            context = self._plain("memory", self.memory.context, self.task, obs, tools)
            try:
                turn = await self._stage(
                    "policy", asyncio.wait_for(self.policy.act(context), timeout=self.limits.step_timeout)
                )
            except asyncio.TimeoutError:
                return _infra("step_timeout", f"policy took over {self.limits.step_timeout:g} s")
            decided = time.perf_counter()
            step = Step(index=index, started_at=started_at, observation=obs, turn=turn)
            left = max(self.limits.step_timeout - (decided - observed), 0.001)
            try:
                outcome = await asyncio.wait_for(self._turn(step, turn), timeout=left)
            except asyncio.TimeoutError:
                self._remember(step, quiet=True)
                return _infra("step_timeout", f"step {index} took over {self.limits.step_timeout:g} s")
            except _Stage:
                self._remember(step, quiet=True)  # the calls that ran before the failure stay on disk
                raise
            step.timings = {
                "observe_ms": (observed - step_started) * 1000,
                "policy_ms": (decided - observed) * 1000,
                "act_ms": (time.perf_counter() - decided) * 1000,
            }
            if turn.parse_error:
                parse_errors += 1
            elif turn.calls:
                parse_errors = 0
            self._remember(step)
            if outcome is not None:
                return outcome
            if parse_errors >= self.limits.max_parse_errors:
                return Outcome(
                    status="aborted",
                    failure=Failure(
                        category="policy", code="unparseable", detail=f"{parse_errors} unreadable turns in a row"
                    ),
                )
        return Outcome(status="fail", failure=Failure(category="task", code="max_steps", detail=f"{max_steps} steps"))

    def _over_time(self) -> Outcome:
        return _infra("episode_timeout", f"episode exceeded {self.limits.episode_timeout:g} s")

    def _remember(self, step: Step, quiet: bool = False) -> None:
        """The step into the trajectory, the memory and the ``step_end`` hooks. A memory or hook
        that fails ends the episode as ``infra_error`` (stage ``memory`` or ``hook``); with
        ``quiet`` (the episode is already ending for another reason) it is only a warning."""
        self.trajectory.steps.append(step)
        failed: list[_Stage] = []
        for stage, fn, args in (("memory", self.memory.record, (step,)),
                                ("hook", self.hooks.step_end, (step, self.trajectory))):
            try:  # both run whatever the other did: the run store's step_end writes the step
                self._plain(stage, fn, *args)
            except _Stage as err:
                failed.append(err)
        if failed and not quiet:
            raise failed[0]
        for f in failed:
            self.trajectory.warnings.append(f"{f.stage} failed at step {step.index}: {type(f.error).__name__}: {f.error}")

    def _plain(self, stage: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)``, a plain call of a plugin (the memory, a tool's ``available``,
        a synchronous hook); an exception is the stage's, as in :meth:`_stage`."""
        try:
            return fn(*args, **kwargs)
        except (asyncio.CancelledError, _Stage):
            raise
        except Exception as err:
            raise _Stage(stage, err) from err

    async def _turn(self, step: Step, turn: Turn) -> Optional[Outcome]:
        if turn.truncated:
            step.feedback = "the answer was cut at the generation limit; its calls were not run"
            return Outcome(status="fail", failure=Failure(
                category="policy", code="length_limit", detail=f"answer cut after {turn.usage.get('completion_tokens', '?')} tokens"))
        if turn.parse_error:
            step.feedback = f"Your last answer could not be read: {turn.parse_error}"[: self.limits.feedback_chars]
            return None
        if turn.end and not turn.calls:
            return Outcome(status="fail", failure=Failure(category="policy", code="gave_up", detail=turn.end))
        if not turn.calls:
            step.feedback = "Your answer contained no tool call. Call a tool, or done(response) when finished."
            return None
        stop_reason: Optional[str] = None
        ended: Optional[Outcome] = None  # a done that ended the episode, under the last-call rule
        for call in turn.calls:
            if stop_reason is not None:
                step.calls.append(CallRecord(call=call, skipped=True, skip_reason=stop_reason))
                continue
            record, outcome = await self._call(call)
            step.calls.append(record)
            if outcome is None and self._repeated_without_change(record):
                outcome = Outcome(status="fail", failure=Failure(
                    category="policy", code="repeated_without_change",
                    detail=f"{call.describe()} made {self._unchanged[1]} times in a row, each with {NO_CHANGE}"[:1000]))
            if outcome is not None and outcome.status == "success" and not self.policy.done_ends_turn:
                ended = outcome  # the calls after it still run; it ends the episode if it stays the last
                continue
            ended = None
            if outcome is not None:
                stop_reason = "episode ended"
                final = outcome
                continue
            if record.verdict is not None and not record.verdict.ok:
                stop_reason = f"skipped: the expectation of {call.name} failed"
            elif record.result is not None and not record.result.ok and self.policy.stops_turn_on_error:
                stop_reason = f"skipped: {call.name} failed"
        step.feedback = "\n".join(_describe(r) for r in step.calls)
        if stop_reason == "episode ended":
            return final
        if ended is not None:
            return ended
        if turn.end:
            return Outcome(status="fail", failure=Failure(category="policy", code="gave_up", detail=turn.end))
        return None

    def _repeated_without_change(self, record: CallRecord) -> bool:
        """Count the same call made again with no visible change (``result.changed`` False, as
        the environment says); True at the limit."""
        limit = self.limits.max_unchanged_repeats if self.policy.repeat_limit is None else self.policy.repeat_limit
        result = record.result
        if not limit or result is None or not result.ok or result.changed is not False:
            self._unchanged = (None, 0)
            return False
        key = record.call.name + json.dumps(record.call.arguments, sort_keys=True, default=str)
        count = self._unchanged[1] + 1 if self._unchanged[0] == key else 1
        self._unchanged = (key, count)
        return count >= limit

    async def _retry_if_covered(self, tool: Tool, args: Any, call: ToolCall, result: ToolResult) -> ToolResult:
        """A target covered by another element: let plugins dismiss overlays, then retry once."""
        if not _is_covered(result):
            return result
        dismissed = await self._stage("hook", self.hooks.dismiss_overlays(self.env))
        if not dismissed:
            return result
        again: ToolResult = await self._stage("tool", self.env.execute(tool, args, call))
        note = f"an overlay covered the target and was dismissed ({', '.join(dismissed)}); the call was retried"
        again.feedback = f"{note}. {again.feedback}".strip() if again.ok else again.feedback
        if not again.ok:
            again.error = f"{again.error} ({note})"
        return again

    async def _call(self, call: ToolCall) -> tuple[CallRecord, Optional[Outcome]]:
        started = time.perf_counter()
        record = CallRecord(call=call)
        tool = self.tool_index.get(call.name)
        if tool is None:
            known = ", ".join(sorted(self.tool_index))
            record.result = ToolResult.failure(f"unknown tool '{call.name}'. Available tools: {known}.",
                                               kind="policy.unknown_tool")
        else:
            try:
                args = tool.parse_args(call.arguments)
            except ToolArgumentError as err:
                record.result = ToolResult.failure(str(err), kind="policy.bad_arguments")
            else:
                vetoed = await self._stage("hook", self.hooks.before_tool_call(call, self.env))
                if isinstance(vetoed, ToolResult):
                    record.result = vetoed
                else:
                    record.result = await self._stage("tool", self.env.execute(tool, args, call))
                    record.result = await self._retry_if_covered(tool, args, call, record.result)
        await self._stage("hook", self.hooks.after_tool_call(call, record.result, self.env))
        # a veto's result and what after_tool_call added are read by the policy too; the
        # answer is the policy's own, scrubbed with the outcome
        answer, record.result = record.result.answer, scrub(record.result)
        record.result.answer = answer
        record.result.feedback = record.result.feedback[: self.limits.feedback_chars]
        if call.expect is not None and record.result.ok:
            record.verdict = await self._stage("verify", self.env.verify(call.expect))
        record.duration_ms = (time.perf_counter() - started) * 1000
        if record.result.ends_episode and record.result.ok:
            return record, Outcome(status="success", answer=record.result.answer)
        return record, None


def _takes(fn: Any, name: str) -> bool:
    """Whether ``fn`` takes a keyword argument ``name`` (an environment's ``configure`` of a
    plugin may predate it)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _is_covered(result: ToolResult) -> bool:
    """A failed call whose target another element covers (the kind its error carries)."""
    return not result.ok and result.error_kind == "action.covered"


def _describe(record: CallRecord) -> str:
    head = record.call.describe()
    if record.skipped:
        return f"{head}: not run ({record.skip_reason})"
    result = record.result
    assert result is not None
    text = f"{head}: error: {result.error}" if not result.ok else f"{head}: {result.feedback or 'ok'}"
    if record.verdict is not None:
        text += f" [{record.verdict.describe()}]"
    return text


def _infra(code: str, detail: str) -> Outcome:
    return Outcome(status="infra_error", failure=Failure(category="infra", code=code, detail=detail))


__all__ = ["Episode", "EpisodeLimits"]
