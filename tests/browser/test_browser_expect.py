"""Expectations: polled until they hold, and named when they do not."""

from __future__ import annotations

import time

from browser_support import act, ref_of, task

from owrl_sdk.types import Expectation


async def test_an_expectation_waits_for_content_that_arrives_later(env, site):
    # no wait for quiet after the click (it would see the content come): the polling is tested here
    env.settings = env.settings.model_copy(update={"settle_max_ms": 0})
    await env.reset(task(f"{site}/delayed.html"))
    result = await act(env, "click", selector="#load")
    assert result.ok
    started = time.monotonic()
    verdict = await env.verify(Expectation(text_visible="Results are ready", element_visible="#late"))
    assert verdict.ok, verdict.describe()
    assert 0.2 < time.monotonic() - started < 1.5  # it polled, then stopped once the text came
    assert verdict.waited_ms > 100


async def test_a_failing_expectation_names_the_check_and_what_it_saw(env, site):
    await env.reset(task(f"{site}/basic.html"))
    verdict = await env.verify(Expectation(url_contains="checkout", title_contains="Basic", text_visible="Welcome back"))
    assert not verdict.ok
    checks = {c.key: c for c in verdict.checks}
    assert not checks["url_contains"].ok and "basic.html" in checks["url_contains"].detail
    assert checks["title_contains"].ok
    assert not checks["text_visible"].ok and '"Welcome back" is not on the page' == checks["text_visible"].detail
    assert verdict.waited_ms >= 1400  # polled for the whole expect_timeout
    assert "url_contains" in verdict.describe()


async def test_value_element_url_and_tab_checks(env, site):
    await env.reset(task(f"{site}/basic.html"))
    obs = await env.observe()
    name = ref_of(obs.aria, "textbox", "Name")
    await act(env, "write", ref=name, message="Ada")
    verdict = await env.verify(
        Expectation(
            value_equals={"ref": name, "value": "Ada"},
            element_visible={"selector": "#go"},
            url_matches=r"/basic\.html$",
            new_tab=False,
            text_absent="Clicked",
        )
    )
    assert verdict.ok, verdict.describe()

    verdict = await env.verify(Expectation(value_equals={"selector": "#name", "value": "Bob"}, url_matches="(["))
    checks = {c.key: c for c in verdict.checks}
    assert checks["value_equals"].detail == 'selector #name holds "Ada"'
    assert "not a valid regular expression" in checks["url_matches"].detail

    await act(env, "click", selector="#popup")
    verdict = await env.verify(Expectation(new_tab=True, url_contains="second"))
    assert verdict.ok, verdict.describe()


async def test_hidden_text_and_hidden_elements_are_told_apart(env, site):
    await env.reset(task(f"{site}/basic.html"))
    await env.page.evaluate("document.getElementById('noop').style.display = 'none'")
    verdict = await env.verify(Expectation(text_visible="Does nothing", element_visible="#noop"))
    details = {c.key: c.detail for c in verdict.checks}
    assert details["text_visible"] == '"Does nothing" is on the page but hidden'
    assert details["element_visible"] == "selector #noop is on the page but hidden"
