"""owrl's pytest fixtures for plugin authors, used as a plugin author would."""

from __future__ import annotations

from owrl_sdk import hookimpl


def test_fixtures_run_a_flow_with_a_registered_plugin(owrl_register_plugin, owrl_page_server, owrl_run_flow):
    seen = []

    class Banner:
        @hookimpl
        async def episode_start(self, env, task):
            await env.page.get_by_role("button", name="Accept cookies").click()
            seen.append(task.start_url)

    owrl_register_plugin(Banner(), name="banner")
    url = owrl_page_server({"/": "<title>Shop</title><div id=b><button onclick=\"b.remove()\">Accept cookies</button></div>"
                                 "<h1>Shop</h1>"})
    traj = owrl_run_flow([{"calls": [{"name": "done", "arguments": {"response": "ok"}}]}], url)
    assert traj.outcome.status == "success" and seen == [url]
    assert "Accept cookies" not in traj.steps[0].observation.aria
