"""{{ cookiecutter.description }}.

A site adapter's hook methods run only in episodes whose start URL is on its domains;
its ``tools()`` join the tool set there. Every method below is optional: delete the ones
you do not need.
"""

from __future__ import annotations

from owrl_sdk import hookimpl
from owrl_sdk.api import SiteAdapter


class Adapter(SiteAdapter):
    name = "{{ cookiecutter.name }}"
    domains = ("{{ cookiecutter.domain }}",)

    async def episode_start(self, env, task):
        """After the start page opened: accept a cookie banner if there is one."""
        button = env.page.get_by_role("button", name="Accept cookies")
        if await button.count():
            await button.first.click()

    def observation(self, observation, env, task):
        """Hints the policy reads with every observation."""
        return {"hints": "Prices include tax."}

    async def dismiss_overlays(self, env, task):
        """A call's target was covered: close this site's pop-ups, say what was closed."""
        close = env.page.get_by_role("button", name="Close")
        if await close.count():
            await close.first.click()
            return "a pop-up"
        return None

    def tools(self):
        return []


@hookimpl
def register_site_adapters(register):
    register(Adapter())
