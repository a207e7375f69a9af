"""Random model output, through the parser and the real tools in a real Chromium: no
exception ever escapes the loop, and every episode ends with an outcome."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from owrl_openwebrl.parser import parse_turn
from owrl_sdk.config import Settings
from owrl_sdk.episode.loop import Episode, EpisodeLimits
from owrl_sdk.contract.plugins import Plugins
from owrl_sdk.contract.policy import Policy
from owrl_sdk.types import Task

PAGE = ("data:text/html,<title>Form</title><input id=q><button onclick=\"document.title='clicked'\">Go</button>"
        "<select id=s><option>a</option><option>b</option></select><a href='#x'>link</a>")
TOOL_NAMES = ["click", "write", "press_keys", "scroll", "wait", "done", "goto_url", "go_back", "drag", "hover",
              "new_tab", "switch_tab", "close_tab", "select_option", "handle_dialog", "teleport"]
values = st.recursive(st.none() | st.booleans() | st.integers(-2000, 2000) | st.floats(allow_nan=True) |
                      st.text(max_size=12), lambda inner: st.lists(inner, max_size=3), max_leaves=4)
arguments = st.dictionaries(st.sampled_from(["point_2d", "ref", "selector", "message", "keys", "direction", "amount",
                                             "url", "tab_index", "seconds", "value", "clicks", "x"]), values, max_size=3)
call = st.builds(lambda n, a: json.dumps({"name": n, "arguments": a}, default=str), st.sampled_from(TOOL_NAMES), arguments)
answer = st.lists(st.one_of(call.map(lambda c: f"<tool_call>{c}</tool_call>"), st.text(max_size=20),
                            st.just("<think>"), st.just("</think>"), st.just("<tool_call>{")), max_size=4).map("".join)


class Replay(Policy):
    name = "replay"

    def __init__(self, settings, texts):
        super().__init__(settings)
        self.texts = list(texts)

    async def act(self, context):
        text = self.texts[min(len(context.history), len(self.texts) - 1)]
        return parse_turn(text)


@pytest.fixture(scope="module")
def browser():
    from owrl_sdk.browser import BrowserHost

    loop = asyncio.new_event_loop()
    s = Settings(action_timeout=1.0, navigation_timeout=5.0, expect_timeout=0.2)
    host = loop.run_until_complete(BrowserHost(s).start())
    yield loop, host, s
    loop.run_until_complete(host.close())
    loop.close()


@pytest.mark.slow
@hsettings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(answer, min_size=1, max_size=3))
def test_random_answers_never_escape_the_loop(browser, texts):
    loop, host, s = browser
    plugins = Plugins()

    async def episode():
        env = await host.new_env()
        try:
            # wait is left out only to keep the examples fast (random seconds would sleep)
            tools = [t for t in plugins.catalogue.items["tools"].values() if t.name != "wait"]
            ep = Episode(task=Task(intent="fill the form", start_url=PAGE), env=env, policy=Replay(s, texts),
                         memory=plugins.catalogue.get("memories", "default")(s), tools=tools,
                         hooks=plugins.for_task(Task(intent="x", start_url=PAGE)),
                         limits=EpisodeLimits(max_steps=3, step_timeout=20, episode_timeout=60))
            return await ep.run()
        finally:
            await env.close()

    traj = loop.run_until_complete(episode())
    assert traj.outcome is not None
    assert traj.outcome.status in ("success", "fail", "aborted", "infra_error")
    if traj.outcome.status == "infra_error":  # only a dead browser may end it so, and none died here
        pytest.fail(f"infra error from model output: {traj.outcome.failure}")
