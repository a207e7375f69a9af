"""JavaScript dialogs: held open and shown, answered with handle_dialog (or Enter / Escape)."""

from __future__ import annotations

from browser_support import act, task


async def result_text(env) -> str:
    return await env.page.locator("#result").inner_text()


async def test_alert_is_held_shown_and_accepted(env, site):
    await env.reset(task(f"{site}/dialogs.html"))
    result = await act(env, "click", selector="#alert")
    assert result.ok
    assert 'an alert dialog is open: "Saved!"' in result.feedback
    assert "handle_dialog" in result.feedback

    obs = await env.observe()
    assert obs.extras["dialog"] == {"type": "alert", "message": "Saved!", "default_value": ""}
    assert 'dialog "alert"' in obs.aria and "Saved!" in obs.aria
    assert obs.screenshot and obs.screenshot[:2] == b"\xff\xd8"  # a JPEG with the dialog drawn on it

    blocked = await act(env, "click", selector="#confirm")
    assert not blocked.ok
    assert "blocked by a dialog" in blocked.error

    result = await act(env, "handle_dialog", accept=True)
    assert result.ok, result.error
    assert 'accepted the alert dialog "Saved!"' in result.feedback
    assert await result_text(env) == "after alert"
    assert env.dialog is None


async def test_confirm_accept_and_dismiss(env, site):
    await env.reset(task(f"{site}/dialogs.html"))
    await act(env, "click", selector="#confirm")
    result = await act(env, "handle_dialog", accept=True)
    assert "accepted the confirm dialog" in result.feedback
    assert 'now "confirmed"' in result.feedback  # what the answer changed on the page
    assert await result_text(env) == "confirmed"

    await act(env, "click", selector="#confirm")
    result = await act(env, "handle_dialog", accept=False)
    assert "dismissed the confirm dialog" in result.feedback
    assert await result_text(env) == "cancelled"


async def test_prompt_takes_text(env, site):
    await env.reset(task(f"{site}/dialogs.html"))
    await act(env, "click", selector="#prompt")
    obs = await env.observe()
    assert obs.extras["dialog"]["default_value"] == "anon"
    result = await act(env, "handle_dialog", accept=True, prompt_text="Ada")
    assert result.ok
    assert await result_text(env) == "name: Ada"


async def test_enter_and_escape_answer_a_dialog(env, site):
    await env.reset(task(f"{site}/dialogs.html"))
    await act(env, "click", selector="#confirm")
    result = await act(env, "press_keys", keys="Escape")
    assert result.ok and "dismissed" in result.feedback
    assert await result_text(env) == "cancelled"
    await act(env, "click", selector="#confirm")
    result = await act(env, "press_keys", keys="enter")
    assert result.ok and "accepted" in result.feedback
    assert await result_text(env) == "confirmed"


async def test_a_decision_made_before_the_dialog_answers_it(env, site):
    await env.reset(task(f"{site}/dialogs.html"))
    result = await act(env, "handle_dialog", accept=False)
    assert "the next dialog that opens will be dismissed" in result.feedback
    result = await act(env, "click", selector="#confirm")
    assert result.ok
    assert "it was dismissed as decided" in result.feedback
    assert env.dialog is None
    assert await result_text(env) == "cancelled"


async def test_expectations_while_a_dialog_blocks_the_page(env, site):
    from owrl_sdk.types import Expectation

    await env.reset(task(f"{site}/dialogs.html"))
    await act(env, "click", selector="#alert")
    verdict = await env.verify(Expectation(url_contains="dialogs", text_visible="after alert"))
    assert not verdict.ok
    checks = {c.key: c for c in verdict.checks}
    assert checks["url_contains"].ok
    assert "dialog blocks the page" in checks["text_visible"].detail
    await act(env, "handle_dialog", accept=True)
    assert (await env.verify(Expectation(text_visible="after alert"))).ok


async def test_an_alert_while_the_start_page_loads_does_not_stall_reset(env, site):
    import time

    started = time.monotonic()
    await env.reset(task(f"{site}/welcome_alert.html"))
    assert time.monotonic() - started < 5
    obs = await env.observe()
    assert obs.extras["dialog"]["message"] == "Welcome aboard"
    result = await act(env, "handle_dialog", accept=True)
    assert result.ok
    assert (await env.observe()).extras == {}
    assert await env.page.locator("#greeting").inner_text() == "After the alert"


async def test_leaving_a_page_with_unsaved_changes(env, site):
    await env.reset(task(f"{site}/leave.html"))
    await act(env, "click", selector="#draft")  # a user gesture arms beforeunload
    result = await act(env, "goto_url", url=f"{site}/second.html")
    assert result.ok
    assert "beforeunload dialog is open" in result.feedback
    result = await act(env, "handle_dialog", accept=False)
    assert "dismissed the beforeunload dialog" in result.feedback
    assert env.page.url.endswith("/leave.html")

    result = await act(env, "goto_url", url=f"{site}/second.html")
    assert "beforeunload dialog is open" in result.feedback
    result = await act(env, "handle_dialog", accept=True)
    assert "accepted the beforeunload dialog" in result.feedback
    assert "navigated" in result.feedback
    assert env.page.url.endswith("/second.html")
