"""Uses owrl's pytest fixtures (owrl_sdk.testing), installed with owrl.

The trajectories come from episodes in a real Chromium on pages served on 127.0.0.1.
"""

import asyncio

import pytest

import {{ cookiecutter.package }} as plugin
from owrl_sdk.api import Settings

JUDGE = "{{ cookiecutter.name }}"

PAGE = "<title>Orders</title><h1>Order 4521</h1><p>Shipped on 3 May</p>"


@pytest.fixture
def plugins(owrl_plugins, owrl_register_plugin):
    """owrl's plugins with this one among them: installed (pip install -e .) or, if not, registered here."""
    if JUDGE not in owrl_plugins.catalogue.names("judges"):
        owrl_register_plugin(plugin, name=JUDGE)
    return owrl_plugins


def judged(plugins, trajectory, settings=None, **metadata):
    """The trajectory's task given ``metadata`` (as a task file would), judged by this plugin."""
    task = trajectory.task.model_copy(update={"metadata": {**trajectory.task.metadata, **metadata}})
    judge = plugins.catalogue.get("judges", JUDGE)(settings or Settings())
    return asyncio.run(judge.judge(trajectory.model_copy(update={"task": task})))


def test_installed_plugin_registers_the_judge(owrl_plugins):
    # after `pip install -e .` the `owrl` entry point registers it in every owrl process
    assert JUDGE in owrl_plugins.catalogue.names("judges"), "not installed: run pip install -e . first"


def test_judges_the_answer_of_a_real_episode(plugins, owrl_page_server, owrl_run_flow):
    url = owrl_page_server({"/": PAGE})
    traj = owrl_run_flow([{"calls": [{"name": "done", "arguments": {"response": "Order 4521 shipped on 3 May"}}]}], url)
    assert traj.outcome.status == "success"

    good = judged(plugins, traj, answer_pattern=r"\b4521\b", answer_keywords=["shipped", "may"])
    assert (good.success, good.score) == (True, 1.0)

    half = judged(plugins, traj, answer_keywords=["shipped", "June"])
    assert (half.success, half.score) == (False, 0.5)
    assert half.reason == "missing: keyword June"

    strict = judged(plugins, traj, Settings(plugins={JUDGE: {"case_sensitive": True}}), answer_keywords=["may"])
    assert strict.success is False  # [plugins.{{ cookiecutter.name }}] case_sensitive = true

    unlabelled = judged(plugins, traj)
    assert unlabelled.success is None and "no answer_pattern" in unlabelled.reason


def test_an_episode_without_an_answer_fails(plugins, owrl_page_server, owrl_run_flow):
    url = owrl_page_server({"/": PAGE})
    # the flow runs out of turns without calling done: the episode fails with no answer
    traj = owrl_run_flow([{"calls": [{"name": "wait", "arguments": {"seconds": 0}}]}], url)
    assert traj.outcome.status == "fail"
    verdict = judged(plugins, traj, answer_keywords=["4521"])
    assert (verdict.success, verdict.score) == (False, 0.0)
    assert verdict.reason == "no final answer (episode fail)"
