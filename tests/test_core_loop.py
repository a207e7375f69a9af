"""The episode loop, driven through a fake in-memory environment (see tests/fakes.py)."""

from __future__ import annotations

import asyncio

import pytest

from owrl_sdk import hookimpl
from owrl_sdk.episode.loop import Episode, EpisodeLimits
from owrl_sdk.episode.runner import StepCallback
from owrl_sdk.types import Failure, Task, Turn

from fakes import FakeEnv, FakePage, Go, ListPolicy, call

PAGES = {
    "fake://home": FakePage("fake://home", "Home", {"Welcome"}),
    "fake://results": FakePage("fake://results", "Results", {"3 results"}),
}


def make_episode(plugins, settings, turns, env=None, limits=None, sinks=(), policy=None):
    task = Task(id="t1", intent="find results", start_url="fake://home")
    env = env or FakeEnv(PAGES)
    memory = plugins.catalogue.get("memories", "default")(settings)
    tools = list(plugins.catalogue.items["tools"].values()) + [Go()]
    policy = policy or ListPolicy(settings, turns=turns)
    ep = Episode(
        task=task, env=env, policy=policy, memory=memory, tools=tools,
        hooks=plugins.for_task(task, extra=[StepCallback(s) for s in sinks]), limits=limits or EpisodeLimits(),
    )
    return ep, env, policy


async def test_done_ends_with_answer(plugins, settings):
    turns = [Turn(thought="go", calls=[call("go", to="fake://results", expect={"url_contains": "results"})]),
             Turn(thought="finish", calls=[call("done", response="3 results")])]
    ep, env, policy = make_episode(plugins, settings, turns)
    traj = await ep.run()
    assert traj.outcome.status == "success"
    assert traj.outcome.answer == "3 results"
    assert len(traj.steps) == 2
    assert traj.steps[0].calls[0].verdict.ok
    assert "navigated fake://home -> fake://results" in traj.steps[0].feedback
    # the policy saw the first step's feedback in its second context
    assert policy.contexts[1].history[0].feedback == traj.steps[0].feedback
    assert traj.ended_at is not None


async def test_max_steps_is_a_failure(plugins, settings):
    turns = [Turn(calls=[call("wait", seconds=0)])]
    ep, _, _ = make_episode(plugins, settings, turns, limits=EpisodeLimits(max_steps=4))
    traj = await ep.run()
    assert traj.outcome.status == "fail"
    assert traj.outcome.failure.kind == "task.max_steps"
    assert len(traj.steps) == 4


async def test_three_unreadable_turns_abort(plugins, settings):
    bad = Turn(raw="<tool_call>{oops", parse_error="tool call is not valid JSON")
    ep, _, policy = make_episode(plugins, settings, [bad])
    traj = await ep.run()
    assert traj.outcome.status == "aborted"
    assert traj.outcome.failure.kind == "policy.unparseable"
    assert len(traj.steps) == 3
    # each unreadable turn got a parse-error feedback the model sees next time
    assert all("could not be read: tool call is not valid JSON" in s.feedback for s in traj.steps)
    assert "could not be read" in policy.contexts[1].history[0].feedback


async def test_parse_errors_reset_after_a_good_turn(plugins, settings):
    bad = Turn(parse_error="no tool call found")
    good = Turn(calls=[call("wait", seconds=0)])
    turns = [bad, bad, good, bad, bad, Turn(calls=[call("done", response="ok")])]
    ep, _, _ = make_episode(plugins, settings, turns)
    traj = await ep.run()
    assert traj.outcome.status == "success"


async def test_tool_errors_become_feedback(plugins, settings):
    turns = [Turn(calls=[call("teleport", to="x"), call("go", where="nowhere"), call("go", to="fake://nope")]),
             Turn(calls=[call("done", response="")])]
    ep, env, _ = make_episode(plugins, settings, turns)
    traj = await ep.run()
    records = traj.steps[0].calls
    assert "unknown tool 'teleport'" in records[0].result.error and "go" in records[0].result.error
    assert "bad arguments for go" in records[1].result.error and "'where' is not an argument" in records[1].result.error
    assert records[2].result.error == "no page fake://nope"
    # errors do not stop the turn: all three ran, and the model reads each error
    assert not any(r.skipped for r in records)
    assert traj.steps[0].feedback.count("error:") == 3
    assert env.executed == ["go", "done"]


async def test_failed_expectation_ends_the_turn(plugins, settings):
    turns = [Turn(calls=[
        call("go", to="fake://results", expect={"text_visible": "10 results"}),
        call("go", to="fake://home"),
        call("done", response="x"),
    ]), Turn(calls=[call("done", response="after")])]
    ep, env, _ = make_episode(plugins, settings, turns)
    traj = await ep.run()
    first = traj.steps[0]
    assert not first.calls[0].verdict.ok
    assert first.calls[0].verdict.checks[0].key == "text_visible"
    assert [r.skipped for r in first.calls] == [False, True, True]
    assert "expectation of go failed" in first.calls[1].skip_reason
    assert "not run" in first.feedback
    assert env.executed == ["go", "done"]  # the skipped calls never ran
    assert traj.outcome.answer == "after"


async def test_a_flow_runs_no_call_after_one_that_failed_where_a_model_reads_on(plugins, settings):
    """A flow's turn was planned for the page it recorded: after a call fails with an error the
    rest of the turn is skipped (a model's turn is not: it reads each error, as above). With a
    healer, the flow's rule holds until the hand-over, the healer's after it."""
    from owrl_sdk.formats.documents import flow_from_data
    from owrl_sdk.flows.flowplayer import HealingPolicy, ScriptedPolicy

    flow = flow_from_data({"turns": [
        {"calls": [{"name": "go", "arguments": {"to": "fake://nope"}}, {"name": "go", "arguments": {"to": "fake://results"}},
                   {"name": "done", "arguments": {"response": "paid"}}]}]})
    ep, env, _ = make_episode(plugins, settings, [], policy=ScriptedPolicy(settings, flow=flow))
    traj = await ep.run()
    calls = traj.steps[0].calls
    assert calls[0].result.error == "no page fake://nope"
    assert [r.skipped for r in calls] == [False, True, True]
    assert calls[1].skip_reason == "skipped: go failed"
    assert env.executed == ["go"] and env.page.url == "fake://home"  # neither the second go nor done ran
    assert traj.outcome.status == "fail" and traj.outcome.failure.kind == "policy.gave_up"
    assert traj.outcome.failure.detail == "flow stopped: go: no page fake://nope"

    healer = ListPolicy(settings, turns=[Turn(calls=[call("go", to="fake://nope"), call("go", to="fake://results"),
                                                     call("done", response="3 results")])])
    ep, env, _ = make_episode(plugins, settings, [], policy=HealingPolicy(settings, flow=flow, healer=healer))
    traj = await ep.run()
    assert [r.skipped for r in traj.steps[0].calls] == [False, True, True]  # the flow's turn
    assert [r.skipped for r in traj.steps[1].calls] == [False, False, False]  # the healer's
    assert traj.outcome.status == "success" and traj.outcome.answer == "3 results"


@pytest.mark.parametrize("stage", ["reset", "observe", "tool"])
async def test_infra_errors_become_outcomes(plugins, settings, stage):
    turns = [Turn(calls=[call("go", to="fake://results")])]
    ep, _, _ = make_episode(plugins, settings, turns, env=FakeEnv(PAGES, fail_on=stage))
    traj = await ep.run()
    assert traj.outcome.status == "infra_error"
    assert traj.outcome.failure.category == "infra"
    assert traj.outcome.failure.detail.startswith(stage)


@pytest.mark.exercises("classify_failure")
async def test_classify_failure_hook_decides_the_kind(plugins, settings, register_plugin):
    seen = []

    class Classifier:
        @hookimpl
        def classify_failure(self, error, stage, task):
            seen.append((type(error).__name__, stage, task.id))
            if isinstance(error, ConnectionResetError):
                return Failure(category="network", code="reset", detail=str(error))
            return None

    register_plugin(Classifier())
    ep, _, _ = make_episode(plugins, settings, [Turn()], env=FakeEnv(PAGES, fail_on="reset"))
    traj = await ep.run()
    assert seen == [("ConnectionResetError", "reset", "t1")]
    assert traj.outcome.failure.kind == "network.reset"


async def test_step_timeout(plugins, settings):
    class Slow(ListPolicy):
        async def act(self, context):
            await asyncio.sleep(5)

    ep, _, _ = make_episode(plugins, settings, [Turn()], limits=EpisodeLimits(step_timeout=0.05))
    ep.policy = Slow(settings)
    traj = await ep.run()
    assert traj.outcome.failure.kind == "infra.step_timeout"


async def test_episode_timeout_keeps_steps(plugins, settings):
    turns = [Turn(calls=[call("wait", seconds=0.02)])]
    ep, _, _ = make_episode(plugins, settings, turns, limits=EpisodeLimits(episode_timeout=0.2, max_steps=1000))
    traj = await ep.run()
    assert traj.outcome.failure.kind == "infra.episode_timeout"
    assert len(traj.steps) >= 2


async def test_episode_timeout_holds_when_the_cancellation_is_lost(plugins, settings):
    """An environment that catches CancelledError and carries on (a careless plugin; Python
    3.11's wait_for can lose a cancellation the same way, when a nested wait_for finishes as
    it is cancelled) must not let the episode run past its time limit to max_steps: the loop
    checks the deadline before each step."""
    import time

    class Stubborn(FakeEnv):
        swallowed = 0
        observed = 0

        async def observe(self):
            Stubborn.observed += 1
            if Stubborn.observed == 1:  # the first observation outlasts the limit: the cancellation lands here
                try:
                    await asyncio.sleep(2)
                except asyncio.CancelledError:
                    Stubborn.swallowed += 1
            return await super().observe()

    turns = [Turn(calls=[call("wait", seconds=0)])]
    ep, _, _ = make_episode(plugins, settings, turns, env=Stubborn(PAGES),
                            limits=EpisodeLimits(episode_timeout=0.5, max_steps=1000, max_unchanged_repeats=0))
    started = time.monotonic()
    traj = await ep.run()
    assert Stubborn.swallowed == 1  # the time limit's cancellation was lost
    assert traj.outcome.failure.kind == "infra.episode_timeout"  # without the deadline check: task.max_steps
    assert time.monotonic() - started < 5 and len(traj.steps) == 1  # no step starts past the deadline


async def test_cancellation_closes_the_trajectory(plugins, settings):
    written = []
    turns = [Turn(calls=[call("wait", seconds=0.05)])]
    ep, _, _ = make_episode(plugins, settings, turns, sinks=[lambda t, s: written.append(t.outcome)],
                            limits=EpisodeLimits(max_steps=1000))
    task = asyncio.ensure_future(ep.run())
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ep.trajectory.outcome.status == "aborted"
    assert written[-1].status == "aborted"  # the sink saw the final state


async def test_sinks_see_every_step(plugins, settings):
    seen = []
    turns = [Turn(calls=[call("wait", seconds=0)]), Turn(calls=[call("done", response="x")])]
    ep, _, _ = make_episode(plugins, settings, turns, sinks=[lambda t, s: seen.append(s.index if s else None)])
    await ep.run()
    assert seen == [0, 1, None]


async def test_a_policy_that_ends_fails_the_episode(plugins, settings):
    ep, _, _ = make_episode(plugins, settings, [Turn(end="nothing left to do")])
    traj = await ep.run()
    assert traj.outcome.status == "fail"
    assert traj.outcome.failure.kind == "policy.gave_up"


async def test_memory_keeps_latest_screenshot_and_history(plugins, settings):
    turns = [Turn(thought=f"t{i}", calls=[call("wait", seconds=0)]) for i in range(3)] + [
        Turn(calls=[call("done", response="")])]
    ep, _, policy = make_episode(plugins, settings, turns)
    await ep.run()
    last = policy.contexts[-1]
    assert len(last.screenshots) == 1
    assert [s.turn.thought for s in last.history] == ["t0", "t1", "t2"]


async def test_action_only_memory_drops_thoughts(plugins, settings):
    settings = settings.with_overrides(plugins={"memory": {"reasoning": "action-only", "screenshots": 2}})
    turns = [Turn(thought="secret", calls=[call("wait", seconds=0)])] * 2 + [Turn(calls=[call("done", response="")])]
    ep, _, policy = make_episode(plugins, settings, turns)
    await ep.run()
    last = policy.contexts[-1]
    assert [s.turn.thought for s in last.history] == ["", ""]
    assert [c.call.name for s in last.history for c in s.calls] == ["wait", "wait"]
    assert len(last.screenshots) == 2


def _raise(message):
    def fail(*args, **kwargs):
        raise RuntimeError(message)
    return fail


@pytest.mark.parametrize("where, stage", [("memory.context", "memory"), ("memory.record", "memory"),
                                          ("memory.reset", "memory"), ("tool.available", "tool"),
                                          ("step_end", "hook")])
async def test_a_plugin_that_raises_outside_a_stage_still_ends_the_episode_with_an_outcome(
        plugins, settings, register_plugin, where, stage):
    """The memory, a tool's ``available`` and a ``step_end`` hook are plugins' code too: an error
    there is the episode's infra_error, with episode_end run and the steps so far kept."""
    ended, step_ends = [], []

    class Watcher:
        @hookimpl
        def step_end(self, step, trajectory):
            step_ends.append(step.index)
            if where == "step_end":
                raise RuntimeError("step_end broke")

        @hookimpl
        async def episode_end(self, trajectory):
            ended.append(trajectory.outcome)

    register_plugin(Watcher())
    turns = [Turn(calls=[call("wait", seconds=0)]), Turn(calls=[call("done", response="x")])]
    ep, _, _ = make_episode(plugins, settings, turns)
    if where.startswith("memory."):
        setattr(ep.memory, where.split(".")[1], _raise(f"{where} broke"))
    elif where == "tool.available":
        ep.tool_index["wait"].available = _raise("available broke")
    traj = await asyncio.wait_for(ep.run(), 30)
    assert traj.outcome.status == "infra_error", traj.outcome
    assert traj.outcome.failure.detail.startswith(f"{stage}: ") and "broke" in traj.outcome.failure.detail
    assert ended == [traj.outcome]  # episode_end ran, once
    if where in ("memory.record", "step_end"):
        assert len(traj.steps) == 1  # the step that was taken is kept
        assert step_ends == [0]  # and the step_end hooks saw it (the run store writes it there)


def test_a_memory_that_loses_its_store_is_not_called_a_lost_browser():
    from owrl_sdk.failures import classify

    assert classify(ConnectionRefusedError(111, "Connection refused"), "memory").kind == "infra.memory_unreachable"


async def test_a_failing_step_end_while_the_episode_already_fails_is_a_warning(plugins, settings, register_plugin):
    class Broken:
        @hookimpl
        def step_end(self, step, trajectory):
            raise RuntimeError("step_end broke")

    register_plugin(Broken())
    ep, _, _ = make_episode(plugins, settings, [Turn(calls=[call("go", to="fake://results")])],
                            env=FakeEnv(PAGES, fail_on="tool"))
    traj = await ep.run()
    assert traj.outcome.failure.detail.startswith("tool")  # the first failure is the one reported
    assert any("hook failed at step 0: RuntimeError: step_end broke" in w for w in traj.warnings), traj.warnings


async def test_a_steps_start_time_is_before_its_observation_and_policy(plugins, settings):
    class SlowPolicy(ListPolicy):
        async def act(self, context):
            await asyncio.sleep(0.3)
            return await super().act(context)

    turns = [Turn(calls=[call("done", response="x")])]
    ep, _, _ = make_episode(plugins, settings, turns, policy=SlowPolicy(settings, turns=turns))
    traj = await ep.run()
    from datetime import datetime

    started, ended = (datetime.fromisoformat(t) for t in (traj.steps[0].started_at, traj.ended_at))
    assert (ended - started).total_seconds() >= 0.3  # the policy's time is inside the step


async def test_the_judge_reads_the_episode_as_the_run_folder_holds_it_scrubbed(plugins, settings, tmp_path, monkeypatch):
    """A model judge may be a remote endpoint: an answer holding a secret reached it in clear."""
    from owrl_sdk.scheduling.evaluation import TaskFileSuite
    from owrl_sdk.episode.runner import JudgedEpisodes
    from owrl_sdk.types import Judgement

    monkeypatch.setenv("OWRL_SECRET_CODE", "hunter2Pass")
    seen = []

    class SpyJudge:
        async def judge(self, trajectory):
            seen.append(trajectory.outcome.answer)
            return Judgement(judge="spy", score=1.0, success=True)

    class Host:
        async def new_env(self, run_dir=None, trace=False):
            return FakeEnv(PAGES)

    task = Task(id="t1", intent="read the code", start_url="fake://home")
    episodes = JudgedEpisodes(settings, plugins, TaskFileSuite(settings, [task]), SpyJudge(), tmp_path,
                              record_blocklist=False)
    policy = ListPolicy(settings, turns=[Turn(calls=[call("done", response="the code is hunter2Pass")])])
    record, traj = await episodes.run(Host(), policy, task, 0)
    assert seen == ["the code is {{secret:CODE}}"]
    assert record.success


class _LastCallRule(ListPolicy):
    """A model policy under the released OpenWebRL models' loop rules."""

    done_ends_turn = False
    repeat_limit = 0


async def test_under_the_last_call_rule_calls_after_done_run_and_only_a_final_done_ends(plugins, settings):
    turns = [Turn(calls=[call("done", response="too early"), call("go", to="fake://results")]),
             Turn(calls=[call("go", to="fake://home"), call("done", response="3 results")])]
    policy = _LastCallRule(settings, turns=turns)
    ep, env, _ = make_episode(plugins, settings, turns, policy=policy)
    traj = await ep.run()
    # the first turn's done did not end the episode: the call after it ran, and the episode went on
    assert [r.call.name for r in traj.steps[0].calls] == ["done", "go"]
    assert not any(r.skipped for r in traj.steps[0].calls)
    assert len(traj.steps) == 2 and env.executed == ["done", "go", "go", "done"]
    assert traj.outcome.status == "success" and traj.outcome.answer == "3 results"
    # owrl's rule, the default: done ends the episode and skips what follows
    ep, env, _ = make_episode(plugins, settings, turns)
    traj = await ep.run()
    assert traj.outcome.answer == "too early" and traj.steps[0].calls[1].skipped and len(traj.steps) == 1


async def test_a_repeat_limit_of_zero_lets_a_call_repeat_without_change(plugins, settings):
    from owrl_sdk.contract.tools import Tool
    from owrl_sdk.types import ToolResult

    class Nothing(Tool):
        name = "nothing"
        description = "changes nothing"

        async def run(self, env, args):
            return ToolResult(changed=False)

    turns = [Turn(calls=[call("nothing")])]
    for policy, steps, kind in ((ListPolicy(settings, turns=turns), 3, "policy.repeated_without_change"),
                                (_LastCallRule(settings, turns=turns), 6, "task.max_steps")):
        task = Task(id="t1", intent="x", start_url="fake://home")
        ep = Episode(task=task, env=FakeEnv(PAGES), policy=policy,
                     memory=plugins.catalogue.get("memories", "default")(settings), tools=[Nothing()],
                     hooks=plugins.for_task(task), limits=EpisodeLimits(max_steps=6))
        traj = await ep.run()
        assert traj.outcome.failure.kind == kind and len(traj.steps) == steps
