"""A call whose target is covered: plugins dismiss the overlay and the call is retried once."""

from __future__ import annotations

import pytest

from owrl_sdk import Agent, hookimpl
from owrl_sdk.config import Settings
from owrl_sdk.formats.documents import Flow



def flow(base):
    return Flow.model_validate({"task": "open the shirts", "start_url": base + "/", "turns": [
        {"calls": [{"name": "wait", "arguments": {"seconds": 2.5}}]},  # the newsletter pop-up opens
        {"calls": [{"name": "click", "arguments": {"selector": 'nav >> role=link[name="Shirts"]'},
                    "expect": {"url_contains": "category=shirts"}}]},
        {"calls": [{"name": "done", "arguments": {"response": "ok"}}]}]})


async def run(plugins, base, tmp_path):
    s = Settings(runs_dir=str(tmp_path), action_timeout=2.0)
    async with Agent(policy="scripted", flow=flow(base), settings=s, plugins=plugins) as agent:
        return await agent.run("open the shirts", base + "/")


@pytest.fixture
def shop():
    from owrl_demo import DemoShop

    with DemoShop() as s:
        yield s.start()


async def test_covered_target_without_help_is_an_error(plugins, shop, tmp_path):
    traj = await run(plugins, shop, tmp_path)
    error = traj.steps[1].calls[0].result.error
    assert "another element covers the target" in error
    assert traj.outcome.status == "fail"


@pytest.mark.exercises("dismiss_overlays")
async def test_a_plugin_dismisses_the_overlay_and_the_call_is_retried(plugins, register_plugin, shop, tmp_path):
    seen = []

    class ShopOverlays:
        @hookimpl
        async def dismiss_overlays(self, env, task):
            seen.append(task.start_url)
            dialog = env.page.get_by_role("dialog", name="Get 10% off your first order")
            if await dialog.is_visible():
                await dialog.get_by_role("button", name="No thanks").click()
                return "newsletter pop-up"
            return None

    register_plugin(ShopOverlays(), name="shop-overlays")
    traj = await run(plugins, shop, tmp_path)
    record = traj.steps[1].calls[0]
    assert record.result.ok and record.verdict.ok
    assert "newsletter pop-up" in record.result.feedback and "retried" in record.result.feedback
    assert traj.outcome.status == "success" and len(seen) == 1
