"""Uses owrl's pytest fixtures (owrl_sdk.testing), installed with owrl."""

from {{ cookiecutter.package }} import Adapter


def test_matches_its_domain():
    adapter = Adapter()
    assert adapter.matches("https://{{ cookiecutter.domain }}/")
    assert adapter.matches("https://shop.{{ cookiecutter.domain }}/cart")
    assert not adapter.matches("https://elsewhere.test/")


def test_registered_and_hints_reach_the_observation(owrl_plugins):
    assert "{{ cookiecutter.name }}" in owrl_plugins.catalogue.names("site_adapters")


def test_hooks_fire_in_a_real_browser(monkeypatch, owrl_page_server, owrl_run_flow):
    # the test page is served on 127.0.0.1: let the adapter claim it for this test
    monkeypatch.setattr(Adapter, "domains", ("127.0.0.1",))
    url = owrl_page_server({"/": "<title>Shop</title><div id=b><button onclick=\"b.remove()\">Accept cookies</button>"
                                 "</div><h1>Welcome</h1>"})
    traj = owrl_run_flow([{"calls": [{"name": "done", "arguments": {"response": "ok"}}]}], url)
    first = traj.steps[0].observation
    assert "Accept cookies" not in first.aria  # episode_start accepted the banner
    assert first.extras["hints"] == "Prices include tax."  # observation hints reached the policy
