"""The plugin contract: site adapters and suites are pluggy plugins, hook result order, one manager."""

from __future__ import annotations

import pytest

from owrl_sdk import hookimpl
from owrl_sdk.contract.components import SiteAdapter, TaskSuite
from owrl_sdk.errors import PluginError
from owrl_sdk.contract.plugins import Plugins, build_plugin_manager, plugin_manager, reset_plugin_manager
from owrl_sdk.types import Observation, Task

SHOP = Task(id="t", intent="x", start_url="https://shop.example.com/")
OTHER = Task(id="o", intent="x", start_url="https://example.org/")


def adapter_plugin(adapter: SiteAdapter) -> object:
    class Reg:
        @hookimpl
        def register_site_adapters(self, register):
            register(adapter)

    return Reg()


def obs() -> Observation:
    return Observation(url=SHOP.start_url, title="Shop")


@pytest.mark.exercises("episode_start", "step_end")
async def test_site_adapter_hooks_go_through_pluggy(plugins, register_plugin, capsys):
    calls = []

    class Shop(SiteAdapter):
        name = "shop"
        domains = ("example.com",)

        async def episode_start(self, env, task):
            calls.append(("start", task.id))

        def step_end(self, step):  # fewer arguments than the spec: pluggy passes what it declares
            calls.append(("step", step))

    register_plugin(adapter_plugin(Shop()), name="shop-adapter")
    _ = plugins.catalogue  # registers the catalogued adapters with the manager
    assert "site-adapter:shop" in plugins.pm.scoped
    impls = {i.plugin_name for i in plugins.pm.hook.episode_start.get_hookimpls()}
    assert "site-adapter:shop" in impls
    await plugins.for_task(SHOP).episode_start(env=None)
    await plugins.for_task(OTHER).episode_start(env=None)
    plugins.for_task(SHOP).step_end(step=3)
    plugins.for_task(OTHER).step_end(step=4)
    assert calls == [("start", "t"), ("step", 3)]


def test_traced_calls_name_the_site_adapter(capsys, monkeypatch):
    class Shop(SiteAdapter):
        name = "traced"
        domains = ("example.com",)

        def step_end(self, step, task):
            return None

    monkeypatch.setenv("OWRL_TRACE_PLUGINS", "1")
    reset_plugin_manager()
    try:
        plugins = Plugins()
        plugins.pm.register(adapter_plugin(Shop()), name="traced-adapter")
        plugins.refresh()
        plugins.for_task(SHOP).step_end(step=1)
    finally:
        reset_plugin_manager()
    err = capsys.readouterr().err
    assert "[owrl trace] step_end(" in err and "site-adapter:traced" in err


@pytest.mark.parametrize("method", ["episode_strat", "before_tool_cal", "on_step_end"])
def test_a_misspelt_adapter_hook_is_an_error_naming_it(plugins, register_plugin, method):
    cls = type("Typo", (SiteAdapter,), {"name": "typo", "domains": ("example.com",), method: lambda self: None})
    register_plugin(adapter_plugin(cls()), name="typo-adapter")
    with pytest.raises(PluginError, match=f"'{method}' matches no hook; did you mean"):
        _ = plugins.catalogue


def test_a_module_level_hook_as_adapter_method_is_an_error(plugins, register_plugin):
    class Wrong(SiteAdapter):
        name = "wrong"

        def resolve_url(self, url):
            return None

    register_plugin(adapter_plugin(Wrong()), name="wrong-adapter")
    with pytest.raises(PluginError, match="'resolve_url' is a hook owrl does not call on site adapters"):
        _ = plugins.catalogue


def test_an_adapter_hook_with_an_unknown_argument_is_an_error(plugins, register_plugin):
    class Odd(SiteAdapter):
        name = "odd"

        def episode_start(self, env, task, page):
            return None

    register_plugin(adapter_plugin(Odd()), name="odd-adapter")
    with pytest.raises(PluginError, match="site adapter 'odd'"):
        _ = plugins.catalogue


async def test_a_suite_takes_part_for_its_episode_only_and_start_still_works(plugins):
    seen = []

    class Suite(TaskSuite):
        name = "mine"

        def tasks(self):
            return [SHOP]

        async def start(self, env, task):
            seen.append(task.id)

        def observation(self, observation, env, task):
            return {"suite": True}

    suite = Suite(settings=None)
    hooks = plugins.for_task(SHOP, extra=[suite])
    assert any(n.startswith("task-suite:mine#") for n in plugins.pm.scoped)
    await hooks.episode_start(env=None)
    o = obs()
    await plugins.for_task(OTHER).observation(o, env=None)  # another episode does not see the suite
    assert o.extras == {}
    await hooks.observation(o, env=None)
    assert seen == ["t"] and o.extras == {"suite": True}
    hooks.close()
    assert not any(n.startswith("task-suite:") for n in plugins.pm.scoped)


def test_a_misspelt_suite_hook_is_an_error_at_registration(plugins, register_plugin):
    class Typo(TaskSuite):
        name = "typo"

        def episode_ends(self, trajectory):
            return None

    class Reg:
        @hookimpl
        def register_task_suites(self, register):
            register(Typo)

    register_plugin(Reg(), name="typo-suite")
    with pytest.raises(PluginError, match="'episode_ends' matches no hook"):
        _ = plugins.catalogue


@pytest.mark.exercises("observation")
async def test_observation_results_merge_in_call_order(plugins, register_plugin):
    """hookspecs.observation: merged in call order, a later result's key replacing an earlier one's."""

    class First:
        @hookimpl
        def observation(self, observation):
            return {"who": "first", "first": 1}

    class Second:
        @hookimpl
        def observation(self, observation):
            return {"who": "second", "second": 2}

    class Shop(SiteAdapter):
        name = "shop"
        domains = ("example.com",)

        def observation(self, observation):
            return {"who": "adapter", "adapter": 3}

    register_plugin(First(), name="first")
    register_plugin(Second(), name="second")
    register_plugin(adapter_plugin(Shop()), name="shop-adapter")
    hooks = plugins.for_task(SHOP)
    order = [c.get_hookimpls()[0].plugin_name for c in hooks._one_by_one("observation")]
    assert order.index("site-adapter:shop") < order.index("second") < order.index("first")
    o = obs()
    await hooks.observation(o, env=None)
    # called: adapter, second, first; the first-registered plugin is called last and wins
    assert o.extras == {"who": "first", "first": 1, "second": 2, "adapter": 3}


async def test_an_async_veto_that_answers_none_lets_the_next_plugin_answer(plugins, register_plugin):
    class Later:
        @hookimpl
        def before_tool_call(self, call):
            return "vetoed"

    class Sooner:
        @hookimpl
        async def before_tool_call(self, call):
            return None

    register_plugin(Later(), name="later")
    register_plugin(Sooner(), name="sooner")
    assert await plugins.for_task(SHOP).before_tool_call(call=None, env=None) == "vetoed"


def test_plugins_share_one_manager_and_catalogue():
    reset_plugin_manager()
    try:
        a, b = Plugins(), Plugins()
        assert a.pm is b.pm is plugin_manager()
        assert a.catalogue is b.catalogue
        a.refresh()
        assert b.pm.catalogue is None
    finally:
        reset_plugin_manager()


def test_the_shared_manager_follows_the_plugin_environment(monkeypatch):
    reset_plugin_manager()
    try:
        everything = plugin_manager()
        monkeypatch.setenv("OWRL_DISABLE_PLUGINS", "builtin_judges")
        fewer = plugin_manager()
        assert fewer is not everything and not fewer.has_plugin("builtin_judges")
        monkeypatch.setenv("OWRL_LOAD_PLUGINS", "")
        assert plugin_manager().list_name_plugin() and plugin_manager() is plugin_manager()
        own = build_plugin_manager(environ={})
        reset_plugin_manager(own)
        assert Plugins().pm is own
    finally:
        reset_plugin_manager()


def test_optimizers_share_one_abstract_entry_point(settings, monkeypatch):
    from owrl_sdk.contract.components import Optimizer
    from owrl_train import SFT
    from owrl_train.rl import MMGRPO

    class Incomplete(Optimizer):
        name = "incomplete"

    with pytest.raises(TypeError, match="optimize"):
        Incomplete(settings)
    assert {"optimize"} <= Optimizer.__abstractmethods__

    got = []
    monkeypatch.setattr(SFT, "train", lambda self, samples, config: got.append(("train", samples, config)) or {"loss": 1.0})
    assert SFT(settings, config="cfg").optimize(["s"]) == {"loss": 1.0}
    with pytest.raises(Exception, match="config"):
        SFT(settings).optimize(["s"])

    grpo = MMGRPO.__new__(MMGRPO)  # its constructor builds a torch optimizer; the entry point is what is tested
    monkeypatch.setattr(MMGRPO, "update", lambda self, samples, iteration=0: got.append(("update", samples))
                        or {"samples": 1.0})
    assert grpo.optimize(["a"]) == {"samples": 1.0}
    assert got == [("train", ["s"], "cfg"), ("update", ["a"])]


def test_plugin_listing_is_of_plugins_not_of_their_adapters(plugins):
    from owrl_sdk.contract.plugins import plugin_infos

    _ = plugins.catalogue
    assert "site-adapter:demo-shop-adapter" in plugins.pm.scoped
    assert not [i.name for i in plugin_infos(plugins.pm) if i.name.startswith("site-adapter:")]


def test_launch_options_merge_in_registration_order(plugins, register_plugin):
    """hookspecs.browser_launch_options: the last-registered plugin's value wins a clash."""

    class Early:
        @hookimpl
        def browser_launch_options(self, options):
            return {"slow_mo": 1, "args": ["--early"]}

    class Late:
        @hookimpl
        def browser_launch_options(self, options):
            return {"slow_mo": 2, "args": ["--late"]}

    register_plugin(Early(), name="early")
    register_plugin(Late(), name="late")
    merged = plugins.browser_launch_options({"args": []})
    assert merged["slow_mo"] == 2 and merged["args"][-2:] == ["--early", "--late"]
