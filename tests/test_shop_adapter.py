"""The demo shop's site adapter (plugins/owrl_shop_adapter), in a real Chromium on the real demo shop.

The adapter is installed through the ``owrl`` entry point like a third party's and is off
until enabled; these tests enable it through the environment, as a user would, and hand the
settings loaded from it to the agent or bind the plugins to them (the adapter reads nothing
itself).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from owrl_sdk import Agent, hookimpl
from owrl_sdk.config import Settings
from owrl_sdk.contract.policy import Policy
from owrl_sdk.types import Task, ToolCall, Turn

USER, PASSWORD = "demo@shop.test", "demo1234"  # the demo shop's own account (plugins/owrl_demo/catalogue.py)
ADAPTER = "demo-shop-adapter"


class Recorder(Policy):
    """Plays fixed turns and keeps every context it was given (what a model policy would see)."""

    name = "recorder"

    def __init__(self, settings: Settings, turns: list[list[dict[str, Any]]]):
        super().__init__(settings)
        self.turns = [list(t) for t in turns]
        self.contexts: list[Any] = []

    async def act(self, context: Any) -> Turn:
        self.contexts.append(context)
        if not self.turns:
            return Turn(end="no more turns")
        return Turn(calls=[ToolCall(**c) for c in self.turns.pop(0)])


class ShopProbe:
    """A test plugin: when the policy calls done, read the shop's server-side state with the
    episode's own cookies, and the languages the browser asks for."""

    def __init__(self) -> None:
        self.state: dict[str, Any] = {}
        self.languages: list[str] = []

    @hookimpl
    async def after_tool_call(self, call, result, env):
        if call.name == "done" and getattr(env, "context", None) is not None:
            base = "/".join(env.page.url.split("/")[:3])
            self.state = await (await env.context.request.get(base + "/api/state")).json()
            self.languages = await env.page.evaluate("navigator.languages")


@pytest.fixture
def enabled(monkeypatch):
    from owrl_sdk.safety import secrets

    monkeypatch.setenv("OWRL_DEMO_SHOP_ADAPTER_ENABLED", "1")
    monkeypatch.setenv("OWRL_SECRET_SHOP_USER", USER)
    monkeypatch.setenv("OWRL_SECRET_SHOP_PASSWORD", PASSWORD)
    known = dict(secrets._known)
    yield
    # owrl redacts every value resolved in the process from then on: later tests that type the
    # demo account literally should not find it redacted because these tests logged in with it
    with secrets._lock:
        secrets._known.clear()
        secrets._known.update(known)


@pytest.fixture
def probe(register_plugin):
    return register_plugin(ShopProbe(), name="shop-probe")


def settings(plugins, tmp_path: Path) -> Settings:
    """The settings a command would load now: owrl.toml and the ``OWRL_*`` variables, the
    adapter's ``OWRL_DEMO_SHOP_ADAPTER_*`` among them."""
    return plugins.load_settings({"runs_dir": str(tmp_path / "runs"), "action_timeout": 2.0})


def bound(plugins, tmp_path: Path):
    """The plugins bound to the settings loaded now: their hooks receive them."""
    return plugins.bind(settings(plugins, tmp_path))


async def run(plugins, tmp_path, url: str, turns, intent: str = "shop") -> tuple[Any, Recorder]:
    policy = Recorder(settings(plugins, tmp_path), turns)
    async with Agent(policy=policy, settings=settings(plugins, tmp_path), plugins=plugins) as agent:
        traj = await agent.run(intent, url)
    return traj, policy


def text_files(run_dir: Path) -> dict[str, str]:
    return {str(p.relative_to(run_dir)): p.read_text(encoding="utf-8", errors="replace")
            for p in run_dir.rglob("*") if p.is_file() and p.suffix not in (".jpg", ".png")}


DONE = [{"name": "done", "arguments": {"response": "ok"}}]


@pytest.mark.exercises("register_site_adapters", "episode_start", "observation", "after_tool_call", "step_end",
                       "episode_end")
async def test_an_episode_on_the_shop_starts_logged_in_and_adds_to_cart(plugins, enabled, probe, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="owrl_shop_adapter")
    turns = [
        [{"name": "add_to_cart", "arguments": {"product": "Felt Fedora", "variant": "brown, M", "qty": 2}}],
        [{"name": "add_to_cart", "arguments": {"product": "Felt Fedora", "variant": "purple"}}],
        [{"name": "add_to_cart", "arguments": {"product": "classic oxford shirt", "variant": "L blue"}}],
        DONE,
    ]
    traj, policy = await run(plugins, tmp_path, "demo:shop/product/felt-fedora", turns)
    assert traj.outcome.status == "success", traj.outcome

    # episode_start: logged in with the secrets, cookie banner answered, back on the start page
    first = traj.steps[0].observation
    assert first.url.endswith("/product/felt-fedora")
    assert "Cookie consent" not in first.aria and "We use cookies" not in first.aria
    assert 'link "Account"' in first.aria and 'link "Log in"' not in first.aria
    assert probe.state["logged_in"] == USER and probe.state["consent"] == "rejected"

    # the tool is offered here, and did what it was asked: the server-side cart holds the variants
    assert "add_to_cart" in [t.name for t in policy.contexts[0].tools]
    cart = [(line["product"], line["variant"], line["qty"]) for line in probe.state["cart"]]
    assert cart == [("felt-fedora", {"size": "M", "colour": "brown"}, 2),
                    ("oxford-shirt", {"size": "L", "colour": "blue"}, 1)]
    added, unknown, by_search = (s.calls[0].result for s in traj.steps[:3])
    assert added.ok and "added 2 × Felt Fedora (M, Brown)" in added.feedback
    assert not unknown.ok and unknown.error == ("variant 'purple' names no colour of Felt Fedora: it comes in colours black, brown; "
                                         'e.g. variant="black, S"')
    assert by_search.ok and traj.steps[3].observation.url.endswith("/cart")
    assert "Classic Oxford Shirt (L, Blue)" in traj.steps[3].observation.aria  # the cart page the tool opened

    # after_tool_call: the cart count that changed, in the feedback the policy reads
    assert "the cart now holds 2 items (was 0)" in added.feedback
    assert "the cart now holds 3 items (was 2)" in by_search.feedback

    # observation: hints reach the policy's context and the openwebrl prompt
    from owrl_openwebrl.prompt import build_prompt

    hints = policy.contexts[0].observation.extras["hints"]
    assert "logged in" in hints and "add_to_cart(product" in hints and "Choose a colour and a size" in hints
    prompt = "\n".join(part["text"] for message in build_prompt(policy.contexts[0], text_mode=True).messages
                       for part in message["content"] if part["type"] == "text")
    assert "Hints: " + hints in prompt and '"name": "add_to_cart"' in prompt
    assert "Discount codes" in policy.contexts[3].observation.extras["hints"]  # the cart page's own hint

    # step_end: one log line per step; episode_end: the summary in the trajectory
    lines = [r.getMessage() for r in caplog.records if r.name == "owrl_shop_adapter"]
    assert sum("demo shop step" in line for line in lines) == 4
    summary = {"signed_in": True, "consent": "rejected", "add_to_cart": {"ok": 2, "failed": 1}, "vetoed": 0,
               "overlays_dismissed": 0}
    assert traj.metadata["demo_shop_adapter"] == summary

    # the secrets are nowhere in the run folder, nor in the log
    run_dir = Path(traj.metadata["run_dir"])
    files = text_files(run_dir)
    assert json.loads(files["trajectory.json"])["metadata"]["demo_shop_adapter"] == summary
    assert "result.json" in files and "trajectory.json" in files
    for name, text in files.items():
        assert PASSWORD not in text and USER not in text, name
    assert PASSWORD not in caplog.text and USER not in caplog.text


@pytest.mark.exercises("before_tool_call")
async def test_the_shop_api_is_refused_and_the_page_stays(plugins, enabled, tmp_path):
    base = plugins.resolve_url("demo:shop").rstrip("/")
    turns = [[{"name": "goto_url", "arguments": {"url": base + "/api/state"}}],
             [{"name": "goto_url", "arguments": {"url": base + "/products"}}], DONE]
    traj, _ = await run(plugins, tmp_path, "demo:shop/cart", turns)
    refused, allowed = traj.steps[0].calls[0].result, traj.steps[1].calls[0].result
    assert not refused.ok and refused.error.startswith(ADAPTER + ": the shop's /api/ addresses")
    assert traj.steps[1].observation.url == base + "/cart"  # the vetoed call never ran
    assert allowed.ok and traj.steps[2].observation.url == base + "/products"
    assert traj.metadata["demo_shop_adapter"]["vetoed"] == 1


@pytest.mark.exercises("dismiss_overlays")
async def test_the_newsletter_pop_up_is_dismissed_when_it_covers_a_target(plugins, enabled, tmp_path):
    turns = [[{"name": "wait", "arguments": {"seconds": 2.5}}],  # the newsletter pop-up opens
             [{"name": "click", "arguments": {"selector": 'nav >> role=link[name="Shirts"]'},
               "expect": {"url_contains": "category=shirts"}}],
             DONE]
    traj, _ = await run(plugins, tmp_path, "demo:shop/", turns)
    record = traj.steps[1].calls[0]
    assert record.result.ok and record.verdict.ok
    assert "newsletter pop-up" in record.result.feedback and "retried" in record.result.feedback
    assert traj.metadata["demo_shop_adapter"]["overlays_dismissed"] == 1


@pytest.mark.exercises("dismiss_overlays")
async def test_dismiss_overlays_answers_a_banner_left_for_later(plugins, enabled, monkeypatch, tmp_path):
    monkeypatch.setenv("OWRL_DEMO_SHOP_ADAPTER_BANNER_AT_START", "false")
    monkeypatch.setenv("OWRL_DEMO_SHOP_ADAPTER_CONSENT", "accept")
    monkeypatch.setenv("OWRL_DEMO_SHOP_ADAPTER_LOGIN", "false")
    from owrl_sdk.browser import BrowserHost

    shop = bound(plugins, tmp_path)
    url = shop.resolve_url("demo:shop/products")
    task = Task(intent="shop", start_url=url)
    hooks = shop.for_task(task)
    host = BrowserHost(shop.settings)
    await host.start()
    try:
        env = await host.new_env()
        await env.reset(task)
        await hooks.episode_start(env)
        banner = env.page.get_by_role("region", name="Cookie consent")
        assert await banner.count() == 1  # left at the start, as configured
        assert await hooks.dismiss_overlays(env) == ["cookie banner, cookies accepted"]
        assert await banner.count() == 0
        state = await (await env.context.request.get(url.split("/products")[0] + "/api/state")).json()
        assert state["consent"] == "accepted" and state["logged_in"] is None
        assert await hooks.dismiss_overlays(env) == []  # nothing left to dismiss
        await env.close()
    finally:
        await host.close()


@pytest.mark.exercises("classify_failure")
async def test_a_refused_or_missing_log_in_is_a_classified_failure(plugins, enabled, monkeypatch, tmp_path):
    monkeypatch.setenv("OWRL_SECRET_SHOP_PASSWORD", "not-the-password")
    policy = Recorder(settings(plugins, tmp_path), [DONE])
    async with Agent(policy=policy, settings=settings(plugins, tmp_path), plugins=plugins) as agent:
        refused = await agent.run("shop", "demo:shop/")
        monkeypatch.delenv("OWRL_SECRET_SHOP_PASSWORD")
        missing = await agent.run("shop", "demo:shop/")
    assert refused.outcome.status == "infra_error" and not policy.contexts  # ended before the first step
    assert refused.outcome.failure.kind == "infra.shop_login_failed"
    detail = refused.outcome.failure.detail
    assert "Incorrect email or password" in detail and "{{secret:SHOP_USER}}" in detail
    for name, text in text_files(Path(refused.metadata["run_dir"])).items():
        assert "not-the-password" not in text and USER not in text, name
    assert missing.outcome.failure.kind == "infra.missing_secret"
    assert "OWRL_SECRET_SHOP_PASSWORD" in missing.outcome.failure.detail


@pytest.mark.exercises("resolve_secret", "browser_launch_options")
async def test_a_secrets_file_answers_and_the_browser_asks_for_the_configured_language(
        plugins, enabled, probe, monkeypatch, tmp_path):
    store = tmp_path / "shop.secrets"
    store.write_text("# the shop's log-in\nSHOP_PASSWORD = demo1234\n", encoding="utf-8")
    monkeypatch.delenv("OWRL_SECRET_SHOP_PASSWORD")  # only the file knows it now
    monkeypatch.setenv("OWRL_DEMO_SHOP_ADAPTER_SECRETS_FILE", str(store))
    monkeypatch.setenv("OWRL_DEMO_SHOP_ADAPTER_ACCEPT_LANGUAGE", "de-DE,de")
    shop = bound(plugins, tmp_path)
    assert shop.resolve_secret("SHOP_PASSWORD") == PASSWORD
    assert shop.resolve_secret("OTHER") is None
    assert shop.browser_launch_options({"args": ["--x"]})["args"] == ["--x", "--accept-lang=de-DE,de"]

    traj, _ = await run(plugins, tmp_path, "demo:shop/", [DONE])
    assert traj.outcome.status == "success", traj.outcome
    assert probe.state["logged_in"] == USER
    assert probe.languages[:2] == ["de-DE", "de"]  # the browser's own would be en-US first
    for name, text in text_files(Path(traj.metadata["run_dir"])).items():
        assert PASSWORD not in text, name


@pytest.mark.exercises("resolve_url", "site_origins")
def test_scope_is_the_shop_only(plugins, enabled, monkeypatch, owrl_page_server, tmp_path):
    plugins = bound(plugins, tmp_path)
    served = plugins.resolve_url("demo:shop/cart")  # owrl_demo serves it in this process
    other = owrl_page_server({"/": "<h1>Elsewhere</h1>"})  # also on 127.0.0.1, another port
    names = lambda url: [a.name for a in plugins.for_task(Task(intent="x", start_url=url)).adapters]  # noqa: E731
    # the served shop is known through owrl_demo's site_origins hook, not the adapter's reading
    assert served.removesuffix("/cart") in plugins.site_origins("demo:shop")
    assert plugins.site_origins("demo:elsewhere") == frozenset()
    assert names(served) == [ADAPTER] and names("demo:shop/") == [ADAPTER]
    assert names(other) == [] and names("https://example.com/") == []
    assert [t.name for t in plugins.for_task(Task(intent="x", start_url=served)).tools()] == ["add_to_cart"]
    assert plugins.for_task(Task(intent="x", start_url=other)).tools() == []

    # a shop served elsewhere: base_url claims its origin and demo:shop resolves to it
    monkeypatch.setenv("OWRL_DEMO_SHOP_ADAPTER_BASE_URL", other.rstrip("/"))
    plugins = bound(plugins, tmp_path)  # settings are loaded once per run, as a command does
    assert plugins.resolve_url("demo:shop/cart") == other + "cart"
    assert names(other + "products?page=2") == [ADAPTER]

    # off (the default): no episode is the adapter's, and its module hooks answer nothing
    monkeypatch.delenv("OWRL_DEMO_SHOP_ADAPTER_ENABLED")
    plugins = bound(plugins, tmp_path)
    assert names(served) == [] and names("demo:shop/") == []
    assert plugins.resolve_url("demo:shop/cart") != other + "cart"
    assert plugins.browser_launch_options({"args": []}) == {"args": []}


async def test_add_to_cart_is_not_offered_on_other_sites(plugins, enabled, tmp_path, owrl_page_server):
    url = owrl_page_server({"/": "<title>Other</title><h1>Another local site</h1>"})
    turns = [[{"name": "add_to_cart", "arguments": {"product": "Felt Fedora", "variant": "brown, M"}}], DONE]
    traj, policy = await run(plugins, tmp_path, url, turns)
    assert "add_to_cart" not in [t.name for t in policy.contexts[0].tools]
    assert traj.steps[0].calls[0].result.error.startswith("unknown tool 'add_to_cart'")
    assert "hints" not in traj.steps[0].observation.extras and "demo_shop_adapter" not in traj.metadata


def test_options_come_from_owrl_toml_then_the_environment_and_are_checked(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no user config file here
    from owrl_sdk.config import load_settings
    from owrl_sdk.errors import ConfigError
    from owrl_sdk.contract.plugins import Plugins
    from owrl_shop_adapter import load_options, pick_variant
    from owrl_shop_adapter.options import parse_options

    models = Plugins().option_models()

    def options(environ, cwd):  # as owrl loads them: the adapter reads only the settings it is handed
        return load_options(load_settings(environ=environ, cwd=cwd, option_models=models))

    (tmp_path / "owrl.toml").write_text('[plugins.demo-shop-adapter]\nenabled = true\nconsent = "accept"\n')
    opts = options({}, tmp_path)
    assert opts.enabled and opts.consent == "accept" and opts.login
    opts = options({"OWRL_DEMO_SHOP_ADAPTER_ENABLED": "0", "OWRL_DEMO_SHOP_ADAPTER_LOGIN": "off"}, tmp_path)
    assert not opts.enabled and not opts.login and opts.consent == "accept"
    assert not options({}, tmp_path / "elsewhere").enabled  # off by default
    for bad, words in (({"password": "demo1234"}, "must be a {{secret:NAME}} placeholder"),
                       ({"consent": "maybe"}, "is not reject or accept"),
                       ({"enabled": "perhaps"}, "is not true or false"),
                       ({"colour": "red"}, "unknown setting 'colour'")):
        with pytest.raises(ConfigError, match=words.replace("{", r"\{").replace("}", r"\}")):
            parse_options(bad)
    assert pick_variant("Tee", "XL, black", ["white", "black"], ["S", "M", "L", "XL"]) == ("black", "XL")
    assert pick_variant("Bag", "", ["brown"], ["One size"]) == ("brown", "One size")
    with pytest.raises(Exception, match="names several sizes"):
        pick_variant("Tee", "black M L", ["black"], ["S", "M", "L"])


def test_an_agents_settings_reach_the_adapter_and_its_hooks(tmp_path, monkeypatch):
    """Hooks receive their host's settings: an ``Agent(settings=...)`` with the adapter's table
    resolves ``demo:shop`` to its ``base_url``, whatever owrl.toml and the environment say."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OWRL_DEMO_SHOP_ADAPTER_ENABLED", raising=False)
    from owrl_sdk import Agent
    from owrl_sdk.config import Settings

    table = {"enabled": True, "base_url": "http://127.0.0.1:8123", "login": False}
    agent = Agent("random", settings=Settings(plugins={"demo-shop-adapter": table}))
    assert agent.plugins.resolve_url("demo:shop/cart") == "http://127.0.0.1:8123/cart"
    adapter = agent.plugins.catalogue.items["site_adapters"]["demo-shop-adapter"]
    assert agent.plugins.adapter_matches(adapter, "http://127.0.0.1:8123/cart")
    plain = Agent("random", settings=Settings())  # the adapter off: demo:shop is the embedded shop's
    assert not plain.plugins.adapter_matches(adapter, "http://127.0.0.1:8123/cart")
