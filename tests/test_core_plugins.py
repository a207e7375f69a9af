"""The plugin contract: loading, containment, registration checks and every lifecycle hook."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import click
import pytest

from owrl_sdk import hookimpl
from owrl_sdk.contract.components import SiteAdapter
from owrl_sdk.errors import PluginError
from owrl_sdk.episode.loop import Episode
from owrl_sdk.contract.plugins import DEFAULT_PLUGINS, Plugins, build_plugin_manager, plugin_infos
from owrl_sdk.types import Task, ToolResult, Turn

from fakes import FakeEnv, FakePage, Go, ListPolicy, call

PAGES = {"fake://shop.example.com/": FakePage("fake://shop.example.com/", "Shop", {"Cart"})}


def make_dist(root: Path, dist: str, entry_points: dict[str, str], modules: dict[str, str] | None = None) -> Path:
    """A minimal installed distribution on a temporary path, with `owrl` entry points."""
    info = root / f"{dist}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    lines = "\n".join(f"{k} = {v}" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[owrl]\n{lines}\n")
    for name, source in (modules or {}).items():
        (root / f"{name}.py").write_text(textwrap.dedent(source))
    return root


def test_defaults_and_entry_points_load(plugins):
    names = {i.name: i for i in plugin_infos(plugins.pm)}
    for mod in DEFAULT_PLUGINS:
        assert names[mod].default
    assert not names["baselines"].default and names["baselines"].hooks == ["register_policies"]
    assert "done" in plugins.catalogue.names("tools")
    assert "scripted" in plugins.catalogue.names("policies")


def test_broken_entry_point_is_named_and_contained(tmp_path, monkeypatch):
    make_dist(tmp_path, "owrl-broken", {"broken": "owrl_module_that_does_not_exist"})
    monkeypatch.syspath_prepend(str(tmp_path))
    pm = build_plugin_manager(environ={})
    assert [f.name for f in pm.failures] == ["broken"]
    assert "ModuleNotFoundError" in pm.failures[0].error
    assert "owrl-broken 0.1" in pm.failures[0].source
    assert pm.has_plugin("baselines")  # the others still loaded


def test_plugin_with_unknown_hook_is_refused(tmp_path, monkeypatch):
    make_dist(tmp_path, "owrl-typo", {"typo": "owrl_typo_plugin"}, {"owrl_typo_plugin": """
        from owrl_sdk import hookimpl
        @hookimpl
        def register_tool(register):
            pass
    """})
    monkeypatch.syspath_prepend(str(tmp_path))
    pm = build_plugin_manager(environ={})
    assert pm.failures[0].name == "typo"
    assert "unknown hook(s): register_tool" in pm.failures[0].error


def test_load_and_disable_environment(tmp_path):
    none = build_plugin_manager(environ={"OWRL_LOAD_PLUGINS": ""})
    assert not none.has_plugin("scripted") and none.has_plugin("builtin_tools")
    only = build_plugin_manager(environ={"OWRL_LOAD_PLUGINS": "memory"})
    assert only.has_plugin("memory") and not only.has_plugin("scripted")
    off = build_plugin_manager(environ={"OWRL_DISABLE_PLUGINS": "scripted,builtin_judges"})
    assert not off.has_plugin("scripted") and not off.has_plugin("builtin_judges")


@pytest.mark.exercises("register_tools", "register_policies", "register_memories", "register_judges",
                       "register_rewards", "register_optimizers", "register_site_adapters", "register_task_suites",
                       "register_samplers")
def test_catalogue_hooks_register_each_kind(plugins, register_plugin, settings):
    from owrl_sdk.contract.components import Judge, Optimizer, Reward, TaskSampler, TaskSuite
    from owrl_sdk.contract.memory import Memory

    class J(Judge):
        name = "j"

    class R(Reward):
        name = "r"

    class Opt(Optimizer):
        name = "o"

    class S(TaskSuite):
        name = "s"

    class M(Memory):
        name = "m"

    class A(SiteAdapter):
        name = "a"
        domains = ("a.test",)

    class Smp(TaskSampler):
        name = "smp"

    class Everything:
        @hookimpl
        def register_tools(self, register): register(Go())
        @hookimpl
        def register_policies(self, register): register(ListPolicy)
        @hookimpl
        def register_memories(self, register): register(M)
        @hookimpl
        def register_judges(self, register): register(J)
        @hookimpl
        def register_rewards(self, register): register(R)
        @hookimpl
        def register_optimizers(self, register): register(Opt)
        @hookimpl
        def register_site_adapters(self, register): register(A())
        @hookimpl
        def register_task_suites(self, register): register(S)
        @hookimpl
        def register_samplers(self, register): register(Smp)

    register_plugin(Everything(), name="everything")
    cat = plugins.catalogue
    for kind, name in [("tools", "go"), ("policies", "list"), ("memories", "m"), ("judges", "j"),
                       ("rewards", "r"), ("optimizers", "o"), ("site_adapters", "a"), ("task_suites", "s"),
                       ("samplers", "smp")]:
        assert name in cat.names(kind)
        assert cat.owners[(kind, name)] == "everything"


def test_duplicate_names_are_refused(plugins, register_plugin):
    class Dup:
        @hookimpl
        def register_tools(self, register):
            from builtin_tools.control import Done
            register(Done())

    register_plugin(Dup(), name="dup")
    with pytest.raises(PluginError, match="tools 'done', already registered by 'builtin_tools'"):
        _ = plugins.catalogue


def test_wrong_types_are_refused(plugins, register_plugin):
    class Wrong:
        @hookimpl
        def register_policies(self, register):
            register(object())

    register_plugin(Wrong(), name="wrong")
    with pytest.raises(PluginError, match="must be a subclass of Policy"):
        _ = plugins.catalogue


def test_unknown_component_names_the_choices(plugins):
    with pytest.raises(PluginError, match=r"no policy named 'nope' \(available: .*scripted"):
        plugins.catalogue.get("policies", "nope")


@pytest.mark.exercises("register_commands")
def test_commands_come_from_plugins(plugins, register_plugin):
    @click.command("hello")
    def hello():
        click.echo("hi")

    class Cmd:
        @hookimpl
        def register_commands(self, register):
            register(hello)

    register_plugin(Cmd(), name="cmd")
    commands = plugins.commands()
    assert {"plugins", "doctor", "hello"} <= set(commands)

    class Twice:
        @hookimpl
        def register_commands(self, register):
            register(hello)

    register_plugin(Twice(), name="twice")
    with pytest.raises(PluginError, match="command 'hello', already registered"):
        plugins.commands()


@pytest.mark.exercises("browser_launch_options")
def test_browser_launch_options_merge(plugins, register_plugin):
    class A:
        @hookimpl
        def browser_launch_options(self, options):
            return {"args": ["--lang=de"], "slow_mo": 10}

    class B:
        @hookimpl
        def browser_launch_options(self, options):
            assert options["headless"] is True
            return None

    register_plugin(A(), name="a")
    register_plugin(B(), name="b")
    merged = plugins.browser_launch_options({"headless": True, "args": ["--no-sandbox"]})
    assert merged == {"headless": True, "args": ["--no-sandbox", "--lang=de"], "slow_mo": 10}


@pytest.mark.exercises("episode_start", "observation", "before_tool_call", "after_tool_call", "step_end", "episode_end")
async def test_lifecycle_hooks_fire_in_order(plugins, register_plugin, settings):
    events = []

    class Life:
        @hookimpl
        async def episode_start(self, env, task):
            events.append(("start", task.id, env.page.url))

        @hookimpl
        def observation(self, observation, env, task):
            events.append(("observe", observation.url))
            return {"hint": "look at the cart"}

        @hookimpl
        def before_tool_call(self, call, env, task):
            events.append(("before", call.name))
            if call.name == "go" and call.arguments.get("to") == "forbidden":
                return ToolResult.failure("blocked by policy: this page is not allowed")
            return None

        @hookimpl
        async def after_tool_call(self, call, result, env, task):
            events.append(("after", call.name, result.ok))
            result.feedback += " (audited)"

        @hookimpl
        def step_end(self, step, task):
            events.append(("step", step.index))

        @hookimpl
        async def episode_end(self, trajectory):
            events.append(("end", trajectory.outcome.status))

    register_plugin(Life(), name="life")
    task = Task(id="t", intent="x", start_url="fake://shop.example.com/")
    policy = ListPolicy(settings, turns=[
        Turn(calls=[call("go", to="forbidden"), call("wait", seconds=0)]),
        Turn(calls=[call("done", response="ok")]),
    ])
    env = FakeEnv(PAGES)
    ep = Episode(task=task, env=env, policy=policy, memory=plugins.catalogue.get("memories", "default")(settings),
                 tools=list(plugins.catalogue.items["tools"].values()) + [Go()], hooks=plugins.for_task(task))
    traj = await ep.run()
    assert events == [
        ("start", "t", "fake://shop.example.com/"),
        ("observe", "fake://shop.example.com/"), ("before", "go"), ("after", "go", False),
        ("before", "wait"), ("after", "wait", True), ("step", 0),
        ("observe", "fake://shop.example.com/"), ("before", "done"), ("after", "done", True), ("step", 1),
        ("end", "success"),
    ]
    assert env.executed == ["wait", "done"]  # the vetoed call never reached the environment
    assert traj.steps[0].observation.extras == {"hint": "look at the cart"}
    assert traj.steps[0].calls[0].result.error == "blocked by policy: this page is not allowed"
    assert traj.steps[0].calls[1].result.feedback.endswith("(audited)")


async def test_site_adapters_are_scoped_to_their_domains(plugins, register_plugin, settings):
    calls = []

    class ShopAdapter(SiteAdapter):
        name = "shop"
        domains = ("example.com",)

        def episode_start(self, env, task):
            calls.append(task.start_url)

        def tools(self):
            return [Go()]

    class Reg:
        @hookimpl
        def register_site_adapters(self, register):
            register(ShopAdapter())

    register_plugin(Reg(), name="shop-adapter")
    shop = Task(intent="x", start_url="https://shop.example.com/cart")
    other = Task(intent="x", start_url="https://example.org/")
    assert [a.name for a in plugins.for_task(shop).adapters] == ["shop"]
    assert plugins.for_task(other).adapters == []
    assert [t.name for t in plugins.for_task(shop).tools()] == ["go"]
    await plugins.for_task(shop).episode_start(env=None)
    await plugins.for_task(other).episode_start(env=None)
    assert calls == ["https://shop.example.com/cart"]


@pytest.mark.exercises("site_origins")
def test_an_adapter_of_a_locally_served_site_is_asked_in_its_scheme(plugins, register_plugin):
    """A site served on a random local port: the adapter names the serving plugin's scheme,
    and owrl hands it a URL on an origin the ``site_origins`` hook gives, written in the scheme."""
    asked: list[str] = []

    class CrmAdapter(SiteAdapter):
        name = "crm"
        scheme = "acme:crm"

        def matches(self, url):
            asked.append(url)
            return url.startswith("acme:crm/") and "/admin" not in url

    class Serving:
        @hookimpl
        def register_site_adapters(self, register):
            register(CrmAdapter())

        @hookimpl
        def site_origins(self, scheme):
            return ["http://127.0.0.1:4321"] if scheme == "acme:crm" else None

    class Other:  # another plugin's answer for another scheme is not the CRM's
        @hookimpl
        def site_origins(self, scheme):
            return ["http://127.0.0.1:5555"] if scheme == "other:site" else None

    register_plugin(Serving(), name="crm-serving")
    register_plugin(Other(), name="other-serving")
    names = lambda url: [a.name for a in plugins.for_task(Task(intent="x", start_url=url)).adapters]  # noqa: E731
    assert plugins.site_origins("acme:crm") == {"http://127.0.0.1:4321"}
    assert names("http://127.0.0.1:4321/contacts?page=2") == ["crm"]
    assert asked[-1] == "acme:crm/contacts?page=2"
    assert names("HTTP://127.0.0.1:4321") == ["crm"] and asked[-1] == "acme:crm/"
    assert names("http://127.0.0.1:4321/admin") == []  # the adapter's own say still counts
    assert names("http://127.0.0.1:5555/contacts") == []  # served, but for another scheme
    assert names("http://127.0.0.1:43210/contacts") == []  # a port that only starts the same
    assert names("https://127.0.0.1:4321/contacts") == []  # another origin: another scheme
    assert names("http://crm@127.0.0.1:4321/contacts") == []  # user info makes another origin
    assert names("http://127.0.0.1:4321.evil.test/contacts") == []  # a host that only starts the same
    assert names("acme:crm/contacts") == ["crm"]


def test_trace_prints_hook_calls(capsys):
    pm = build_plugin_manager(environ={"OWRL_TRACE_PLUGINS": "1"})
    _ = Plugins(pm).catalogue
    err = capsys.readouterr().err
    assert "[owrl trace] register_tools(register=" in err
    assert "-> [builtin_tools]" in err


def test_cli_plugins_json_survives_a_broken_plugin(tmp_path):
    make_dist(tmp_path, "owrl-broken", {"broken": "owrl_module_that_does_not_exist"})
    out = subprocess.run(
        [sys.executable, "-m", "owrl_sdk", "plugins", "--all", "--json"],
        capture_output=True, text=True, env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["errors"][0]["name"] == "broken"
    by_name = {p["name"]: p for p in data["plugins"]}
    assert by_name["builtin_tools"]["hooks"] == ["register_tools"]
    # what each registers, by kind: the names --policy, the memory setting and --judge take
    assert {"click", "write", "set_checked"} <= set(by_name["builtin_tools"]["registers"]["tools"])
    assert {"openwebrl", "openai"} <= set(by_name["openwebrl"]["registers"]["policies"])
    assert "default" in by_name["memory"]["registers"]["memories"]
    assert "broken" in out.stderr  # also warned on stderr


@pytest.mark.exercises("resolve_url")
def test_resolve_url_first_answer_wins(plugins, register_plugin):
    class Scheme:
        @hookimpl
        def resolve_url(self, url):
            return "http://127.0.0.1:1/x" if url.startswith("mine:") else None

    register_plugin(Scheme(), name="scheme")
    assert plugins.resolve_url("mine:site") == "http://127.0.0.1:1/x"
    assert plugins.resolve_url("https://example.org/") == "https://example.org/"
    served = plugins.resolve_url("demo:shop/search")  # the demo plugin serves its shop in process
    assert served.startswith("http://127.0.0.1:") and served.endswith("/search")


def test_trace_never_prints_a_secret_a_store_returns_or_a_hook_is_given(capsys, monkeypatch):
    from owrl_sdk import hookimpl
    from owrl_sdk.safety import secrets

    class Vault:
        @hookimpl
        def resolve_secret(self, name):
            return "vault-value-93kq" if name == "VAULT" else None

    monkeypatch.setenv("OWRL_SECRET_SHOP_PW", "env-value-51zt")
    pm = build_plugin_manager(environ={"OWRL_TRACE_PLUGINS": "1"})
    pm.register(Vault(), name="vault")
    plugins = Plugins(pm)
    assert secrets.resolve("{{secret:VAULT}}", plugins.resolve_secret) == "vault-value-93kq"
    plugins.resolve_url("https://shop.test/?pw=env-value-51zt")  # a hook's argument that quotes one
    err = capsys.readouterr().err
    assert "resolve_secret returned a value of 16 characters (not shown)" in err
    assert "resolve_url(url='https://shop.test/?pw={{secret:SHOP_PW}}', settings=<the run's settings>)" in err, err
    assert "vault-value-93kq" not in err and "env-value-51zt" not in err


def test_components_are_handed_the_catalogue_they_were_built_from(plugins, register_plugin, settings):
    # a judge registered only in this manager: a component that fetched the process's plugins
    # instead of the catalogue it was built from would not find it
    from owrl_sdk.contract.components import Judge
    from owrl_sdk.errors import ConfigError
    from owrl_sdk.types import Judgement

    class Strict(Judge):
        name = "strict-only-here"

        async def judge(self, trajectory):
            return Judgement(judge=self.name, score=1.0, success=True, reason="strict")

    class Only:
        @hookimpl
        def register_judges(self, register): register(Strict)

    register_plugin(Only(), name="only-here")
    cat = plugins.catalogue
    chosen = settings.model_copy(update={"plugins": {"composite": {"inner": "strict-only-here"}}})
    composite = cat.build("judges", "composite", chosen)
    assert composite.inner.name == "strict-only-here"
    with pytest.raises(ConfigError, match="through the catalogue"):  # built by hand, with no catalogue
        cat.get("judges", "composite")(chosen)
    oracle = cat.build("policies", "oracle", settings)
    assert oracle.catalogue is cat
    assert not hasattr(cat.build("judges", "strict-only-here", settings), "catalogue")  # only to those that ask


def test_a_plugins_command_gets_the_plugins_that_registered_it(plugins, register_plugin):
    from owrl_sdk.cli import cli, command_plugins, main

    seen = []

    @click.command("which-plugins")
    def which():
        seen.append(command_plugins())

    class Cmd:
        @hookimpl
        def register_commands(self, register):
            register(which)

    register_plugin(Cmd(), name="which")
    cli._commands, cli._plugins = None, None  # found afresh, with the plugin above
    try:
        main(["which-plugins"])
    finally:
        cli._commands, cli._plugins = None, None
    assert len(seen) == 1 and seen[0].pm is plugins.pm and "which-plugins" in seen[0].commands()


def test_no_plugin_fetches_the_process_plugins():
    # plugins are handed the catalogue (Catalogue.build, RLRun(plugins=), command_plugins()),
    # so what an Agent or a server was given is what their components see
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    found = [f"{p.relative_to(root)}:{n}" for folder in ["plugins", *[d.name for d in root.glob("builtin_*")]]
             for p in (root / folder).rglob("*.py")
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"\bPlugins\(\)", line)]
    assert found == []
