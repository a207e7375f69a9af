"""What a call's feedback says: what changed, or a model-readable error."""

from __future__ import annotations

from browser_support import act, ref_of, task


async def test_feedback_names_a_navigation(env, site):
    await env.reset(task(f"{site}/basic.html"))
    result = await act(env, "click", selector="text=Next page")
    assert result.feedback == f"navigated: {site}/basic.html -> {site}/second.html"


async def test_feedback_names_a_new_tab(env, site):
    await env.reset(task(f"{site}/basic.html"))
    result = await act(env, "click", selector="#popup")
    assert result.feedback.startswith(f"a new tab opened (tab 1): {site}/second.html")


async def test_feedback_counts_and_names_appeared_elements(env, site):
    await env.reset(task(f"{site}/basic.html"))
    await env.observe()
    result = await act(env, "click", selector="#more")
    assert result.feedback == '3 elements appeared (button "Alpha item", button "Beta item", button "Gamma item")'


async def test_feedback_says_no_visible_change(env, site):
    await env.reset(task(f"{site}/basic.html"))
    result = await act(env, "click", selector="#noop")
    assert result.ok
    assert result.feedback == "no visible change"


async def test_feedback_is_bounded(host, site, tmp_path):
    env = await host.new_env(run_dir=tmp_path)
    try:
        env.settings = env.settings.with_overrides(feedback_chars=40)
        await env.reset(task(f"{site}/basic.html"))
        result = await act(env, "click", selector="#more")
        assert len(result.feedback) <= 40 and result.feedback.endswith("…")
    finally:
        await env.close()


async def test_bad_arguments_read_as_a_correction(env, site):
    await env.reset(task(f"{site}/basic.html"))
    result = await act(env, "click", point_2d=[1200, 10])
    assert not result.ok
    assert "within 0..1000" in result.error and "Arguments it takes" in result.error
    result = await act(env, "click", ref="e3", selector="#go")
    assert not result.ok and "exactly one of point_2d, ref or selector" in result.error
    result = await act(env, "scroll", direction="sideways")
    assert not result.ok and "'direction'" in result.error
    result = await act(env, "press_keys", keys="hello")
    assert not result.ok and "unknown key 'hello'" in result.error and "write" in result.error


async def test_action_errors_become_failures_the_model_can_act_on(env, site):
    await env.reset(task(f"{site}/basic.html"))
    result = await act(env, "click", selector="#missing")
    assert not result.ok and "no element matches it" in result.error

    result = await act(env, "click", selector="button")
    assert not result.ok and "matches" in result.error and "elements" in result.error

    result = await act(env, "click", selector="[[[")
    assert not result.ok and "selector is not valid" in result.error

    result = await act(env, "click", ref="e999")
    assert not result.ok and "ref e999 is not in the latest page snapshot" in result.error

    await env.page.evaluate("document.getElementById('noop').style.visibility = 'hidden'")
    result = await act(env, "click", selector="#noop")
    assert not result.ok and "not visible" in result.error


async def test_a_stale_ref_after_the_element_went_away(env, site):
    await env.reset(task(f"{site}/basic.html"))
    obs = await env.observe()
    go = ref_of(obs.aria, "button", "Go")
    await env.page.evaluate("document.getElementById('go').remove()")
    await env.observe()  # a new snapshot: the ref is gone
    result = await act(env, "click", ref=go)
    assert not result.ok
    assert f"ref {go} is not in the latest page snapshot" in result.error


async def test_refs_survive_the_feedback_snapshot(env, site):
    await env.reset(task(f"{site}/basic.html"))
    obs = await env.observe()
    first = await act(env, "click", ref=ref_of(obs.aria, "button", "Show more"))
    assert first.ok
    # a second call of the same turn still uses refs from the observation
    second = await act(env, "write", ref=ref_of(obs.aria, "textbox", "Name"), message="still valid")
    assert second.ok, second.error
    assert await env.page.input_value("#name") == "still valid"
