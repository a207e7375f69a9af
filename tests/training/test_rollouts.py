"""RL rollouts run on the SDK's executors, chosen by name, as evaluations do."""

from __future__ import annotations

import asyncio

import pytest

from owrl_baselines import OraclePolicy
from owrl_cli import owrl
from owrl_sdk import hookimpl
from owrl_sdk.errors import ConfigError, UsageError
from owrl_sdk.scheduling.executors import Executor, SharedPolicy, WorkResult
from owrl_sdk.episode.runner import EpisodeRecord
from owrl_sdk.types import Task
from owrl_train.rollouts import ExecutorRollouts
from owrl_train.serving import PolicySpec


class RecordingExecutor(Executor):
    """A plugin's executor with no browser: it notes what the rollouts asked of it and ends
    each episode at once, finishing them in the reverse order."""

    name = "recording"
    log: list = []

    def __init__(self, settings, plugins, workers=1, **options):
        super().__init__(settings, plugins, workers, **options)
        self.log.append(("made", workers, options))

    async def start(self, workload):
        await super().start(workload)
        self.log.append(("start", type(workload.policy).__name__, workload.max_steps, workload.with_trajectory))

    async def configure(self, *, policy=None, max_steps=None, out=None):
        await super().configure(policy=policy, max_steps=max_steps, out=out)
        self.log.append(("configure", max_steps, out.name))

    async def run(self, items, on_result=None):
        policy = self.workload.policy(self.settings, self.plugins)
        self.log.append(("run", [item.key for item in items], policy.name))
        results = []
        for item in reversed(items):
            record = EpisodeRecord(key=item.key, task_id=item.task.id, episode=item.episode, status="fail",
                                   success=False, score=0.0, steps=0, seconds=0.0, failure=None, answer=None,
                                   run_dir=None)
            results.append(WorkResult(item, record))
            if on_result is not None:
                on_result(results[-1])
        return results

    async def close(self):
        self.log.append(("close",))


class RecordingPlugin:
    @hookimpl
    def register_executors(self, register):
        register(RecordingExecutor)


def task(task_id: str) -> Task:
    return Task(id=task_id, intent="x", start_url="http://127.0.0.1:9/")


@pytest.mark.exercises("register_executors")
def test_rl_rollouts_run_on_the_executor_they_name_kept_across_iterations(register_plugin, plugins, settings,
                                                                        tmp_path):
    register_plugin(RecordingPlugin(), name="recording-executor")
    RecordingExecutor.log.clear()
    rollouts = ExecutorRollouts(object(), settings, plugins, workers=3, backend="recording", contexts=2,
                                address=None)
    policy = OraclePolicy(settings)
    items = [("a", task("a"), 0), ("a", task("a"), 1), ("b", task("b"), 0)]

    async def go():
        try:
            first = await rollouts.collect(policy, items, 2, tmp_path / "iter-0")
            second = await rollouts.collect(policy, items[:1], 4, tmp_path / "iter-1")
            return first, second
        finally:
            await rollouts.close()

    first, second = asyncio.run(go())
    assert RecordingExecutor.log == [
        ("made", 3, {"contexts": 2}),  # an option left unset is not passed on
        ("start", "SharedPolicy", 2, True),  # the trainer's in-process policy, shared by the workers
        ("run", ["a#0", "a#1", "b#0"], "oracle"),
        ("configure", 4, "iter-1"),  # the next iteration's horizon and folder, on the same executor
        ("run", ["a#0"], "oracle"),
        ("close",),
    ]
    # back in the order asked for, each with its group, whatever order they finished in
    assert [(t.metadata["group"], t.task.metadata["episode"]) for t in first] == [("a", 0), ("a", 1), ("b", 0)]
    assert [t.outcome.status for t in first + second] == ["infra_error"] * 4  # no trajectory came back
    assert rollouts.executor is None and rollouts.retried == 0


def test_an_unknown_backend_is_refused_naming_the_known_ones(plugins, settings):
    with pytest.raises(UsageError, match=r"no executor \(backend\) named 'nope' \(available: local, ray\)"):
        ExecutorRollouts(object(), settings, plugins, backend="nope")


def test_workers_in_other_processes_take_a_served_policy_only(plugins, settings):
    local = ExecutorRollouts(object(), settings, plugins, backend="local")
    ray = ExecutorRollouts(object(), settings, plugins, backend="ray", address="127.0.0.1:1")
    assert local.shares_policy and not ray.shares_policy
    assert isinstance(local._factory(OraclePolicy(settings)), SharedPolicy)
    with pytest.raises(ConfigError, match="ray rollouts need a served policy: set serve_base_url"):
        ray._factory(OraclePolicy(settings))
    assert ray._factory(PolicySpec("openai", {"model": "owrl-v0"})).name == "openai"


def test_owrl_train_rl_refuses_a_backend_it_cannot_run_before_loading_a_model(tmp_path):
    (tmp_path / "rl.toml").write_text('model = "no-such-model"\n')
    out = owrl("train", "rl", "--config", str(tmp_path / "rl.toml"), "--backend", "nope", cwd=tmp_path)
    assert out.returncode != 0 and "no executor (backend) named 'nope' (available: local, ray)" in out.stderr
    out = owrl("train", "rl", "--config", str(tmp_path / "rl.toml"), "--backend", "ray", cwd=tmp_path)
    assert out.returncode != 0 and "needs serve_base_url" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
