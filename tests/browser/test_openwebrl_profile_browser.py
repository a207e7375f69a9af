"""The openwebrl profile's units and environment in a real Chromium: scroll fractions,
drag steps, the default wait, dialogs answered by the environment, the settle wait, and
the facts its status lines report."""

from __future__ import annotations

import time

import pytest

from browser_support import act, grid, task
from owrl_openwebrl.backend import Generation
from owrl_openwebrl.profiles import status_line, to_builtin
from owrl_sdk.types import CallRecord, ToolCall


async def official(env, name, **arguments):
    """Run a call as the released model writes it: mapped onto the builtin tool, then told back."""
    raw = ToolCall(name=name, arguments=arguments)
    mapped = to_builtin(raw, env.viewport)
    result = await act(env, mapped.name, **mapped.arguments)
    return result, status_line(CallRecord(call=mapped, result=result), env.viewport, raw)


async def centre(env, selector):
    box = await env.page.locator(selector).bounding_box()
    return grid(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)


async def scroll_y(env):
    return await env.page.evaluate("() => window.scrollY")


async def test_a_scroll_of_half_moves_half_the_viewport(env, site):
    await env.reset(task(f"{site}/scroll.html"))
    assert env.viewport[1] == 1000
    result, line = await official(env, "scroll", direction="down", amount=0.5)
    assert result.ok and await scroll_y(env) == 500
    assert line == "Succeed: `scroll` down by 50%."
    result, _ = await official(env, "scroll")  # the defaults: down, half the viewport
    assert await scroll_y(env) == 1000
    result, _ = await official(env, "scroll", direction="up", amount=0.25)
    assert await scroll_y(env) == 750
    result, _ = await official(env, "scroll", direction="up", amount=3)  # clamped to one viewport
    assert await scroll_y(env) == 0
    result, line = await official(env, "scroll", direction="up")
    assert await scroll_y(env) == 0 and line.endswith("The page did not move: it may be at its edge.")


async def test_a_scroll_is_a_script_scroll_of_the_window_or_the_panel_under_the_point(env, site):
    """As the official environment scrolls: without a point the window moves by amount x the
    viewport, even with a scrollable panel under the viewport's centre; with a point, the
    nearest scrollable ancestor of what is there; no wheel event reaches the page either way."""
    await env.reset(task(f"{site}/panel.html"))
    state = "() => [window.scrollY, document.querySelector('#panel').scrollTop, window.wheels]"
    result, _ = await official(env, "scroll", direction="down", amount=0.5)
    assert result.ok and await env.page.evaluate(state) == [500, 0, 0]
    result, _ = await official(env, "scroll", direction="down", amount=0.25, point_2d=[500, 500])  # on the panel
    assert result.ok and await env.page.evaluate(state) == [500, 250, 0]
    assert result.data["scroll"] == {"moved": 250, "page": False}
    result, _ = await official(env, "scroll", direction="up", amount=1, point_2d=[50, 50])  # beside it: the window
    assert await env.page.evaluate(state) == [0, 250, 0]
    # owrl's own scroll turns the wheel at the centre: the panel there moves, and the page sees it
    await act(env, "scroll", direction="down", amount=1)
    window_y, panel_top, wheels = await env.page.evaluate(state)
    assert window_y == 0 and panel_top > 250 and wheels >= 1


async def test_drag_moves_the_mouse_in_the_given_number_of_steps(env, site):
    await env.reset(task(f"{site}/moves.html"))
    result, line = await official(env, "drag", start_point_2d=[100, 100], end_point_2d=[600, 500], steps=7)
    assert result.ok and line == "Succeed: `drag`."
    assert await env.page.inner_text("#count") == "7"
    await official(env, "drag", start_point_2d=[100, 100], end_point_2d=[600, 500])
    assert await env.page.inner_text("#count") == "10"  # the official default


async def test_wait_defaults_to_three_seconds(env, site):
    await env.reset(task(f"{site}/basic.html"))
    started = time.monotonic()
    result, line = await official(env, "wait")
    assert result.ok and time.monotonic() - started >= 2.9
    assert line == "Succeed: waited 3 seconds."


async def test_dialogs_are_accepted_by_the_environment_and_shown_in_the_page(env, site):
    env.configure(dialogs="accept")
    await env.reset(task(f"{site}/dialogs.html"))
    result, line = await official(env, "click", point_2d=await centre(env, "#confirm"))
    assert result.ok and line.startswith('Succeed: `click` at (') and 'on <button> "Confirm"' in line
    assert "accepted automatically" in result.feedback
    assert await env.page.inner_text("#result") == "confirmed"
    # the page shows what the dialog said, in a box the model can close
    await env.page.wait_for_selector("#owrl-dialog-box")
    assert "Delete everything?" in await env.page.inner_text("#owrl-dialog-box")
    obs = await env.observe()
    assert obs.screenshot and "Delete everything?" in obs.aria
    result, _ = await official(env, "click", point_2d=await centre(env, "#owrl-dialog-box button"))
    assert result.ok and await env.page.locator("#owrl-dialog-box").count() == 0
    # a prompt is accepted with its default text
    await official(env, "click", point_2d=await centre(env, "#prompt"))
    assert await env.page.inner_text("#result") == "name: anon"
    await official(env, "press_keys", keys=["Escape"])
    assert await env.page.locator("#owrl-dialog-box").count() == 0


async def test_settle_waits_for_a_change_that_comes_late(env, site):
    env.configure(settle={"network_idle_ms": 1000, "after_ms": 1000})
    await env.reset(task(f"{site}/delayed.html"))
    started = time.monotonic()
    result, _ = await official(env, "click", point_2d=await centre(env, "#load"))
    assert result.ok and time.monotonic() - started >= 1.0
    # the paragraph appears 700 ms after the click: the call's own feedback and the next look see it
    assert "Results are ready" in result.feedback
    assert "Results are ready" in (await env.observe()).aria


async def test_each_tool_waits_its_own_pause_and_screenshots_are_png(env, site):
    """configure(waits=...) puts a tool's own pause in place of the common settle wait (the
    official hover 2 s, drag and tabs 0.5 s); screenshot="png" makes every look a PNG."""
    env.configure(settle={"network_idle_ms": 0, "after_ms": 0}, waits={"hover": {"after_ms": 800}},
                  screenshot="png")
    await env.reset(task(f"{site}/basic.html"))
    assert (await env.observe()).screenshot.startswith(b"\x89PNG\r\n\x1a\n")
    started = time.monotonic()
    await official(env, "hover", point_2d=await centre(env, "#noop"))
    assert time.monotonic() - started >= 0.8
    env.configure()  # back to owrl's ways: JPEG
    await env.reset(task(f"{site}/basic.html"))
    assert (await env.observe()).screenshot.startswith(b"\xff\xd8")


async def test_press_keys_skips_names_it_does_not_know_and_pauses_between_keys(env, site):
    """As the official keyboard rule: unknown names are dropped and the call fails only when
    none is left; keys pressed one after another are 100 ms apart."""
    await env.reset(task(f"{site}/basic.html"))
    await official(env, "click", point_2d=await centre(env, "#name"))
    started = time.monotonic()
    result, line = await official(env, "press_keys", keys=["a", "submit", "b", "c"])
    assert result.ok and await env.page.input_value("#name") == "abc"
    assert "submit" in result.feedback
    assert line.startswith('Succeed: `press_keys` ["a", "b", "c"]')  # the line lists what was pressed
    # names are listed after their corrections, each key once however many times it is pressed
    result, line = await official(env, "press_keys", keys=["backspace", "LEFT", "bogus"], presses=2)
    assert result.ok and line.startswith('Succeed: `press_keys` ["Backspace", "ArrowLeft"]')
    assert await env.page.input_value("#name") == "a"
    assert time.monotonic() - started >= 0.2  # three keys, two pauses
    result, line = await official(env, "press_keys", keys=["submit", "go"])
    assert not result.ok and line.startswith("Failed: `press_keys`")
    assert not (await act(env, "press_keys", keys=["a", "submit"])).ok  # owrl's rule: an unknown key fails


async def test_go_back_and_goto_url_follow_the_official_environment(env, site):
    """go_back with nothing to go back to succeeds having done nothing, and goto_url opens the
    address as written (a bare host is not completed with https://, so the browser refuses
    it); owrl's own rules fail the first and complete the second."""
    await env.reset(task(f"{site}/basic.html"))
    result, line = await official(env, "go_back")
    assert result.ok and line.startswith("Succeed: `go_back`") and env.page.url == f"{site}/basic.html"
    assert not (await act(env, "go_back")).ok
    result, line = await official(env, "goto_url", url="example.invalid")
    assert not result.ok and line.startswith("Failed: `goto_url`")
    assert (await act(env, "goto_url", url="example.invalid", as_given=False)).error != result.error


async def test_click_and_write_report_navigation_tabs_and_held_values(env, site):
    await env.reset(task(f"{site}/basic.html"))
    result, line = await official(env, "click", point_2d=await centre(env, "#noop"))
    assert line.endswith('on <button> "Does nothing". No navigation and no new tab followed.')
    await official(env, "click", point_2d=await centre(env, "#zip"))
    result, line = await official(env, "write", message="1234567")
    assert result.ok and line == ('Succeed: `write` typed "1234567" into <input> "Zip code". '
                                  'The field holds "12345", which is not the text typed.')
    result, line = await official(env, "click", point_2d=await centre(env, "#popup"))
    assert "A new tab opened (tab 1)." in line
    await official(env, "switch_tab", tab_index=0)
    result, line = await official(env, "click", point_2d=await centre(env, "#next"))
    assert f"The page navigated to {site}/second.html." in line


class Scripted:
    model_id = "OpenWebRL/OpenWebRL-4B"

    def __init__(self, answers):
        self.answers, self.prompts = list(answers), []

    def generate(self, prompts, sampling):
        self.prompts.extend(prompts)
        return [Generation(text=self.answers.pop(0), prompt_tokens=1, completion_tokens=1, seconds=0.0) for _ in prompts]


async def test_an_episode_in_the_openwebrl_profile(env, site, plugins, tmp_path, monkeypatch):
    from owrl_openwebrl.policy import OpenWebRLPolicy
    from owrl_sdk.config import Settings
    from owrl_sdk.episode.loop import Episode

    monkeypatch.setenv("OWRL_CACHE_DIR", str(tmp_path / "cache"))
    backend = Scripted([
        '<think>\nThe list goes on below.\n</think>\n<tool_call>\n{"name": "scroll", "arguments": {"amount": 0.5}}\n</tool_call>',
        '<think>\nBlock 2 is in view.\n</think>\n<tool_call>\n{"name": "done", "arguments": {"response": "Block 2"}}\n</tool_call>',
    ])
    settings = Settings()
    policy = OpenWebRLPolicy(settings, backend=backend, settle={"network_idle_ms": 200, "after_ms": 100})
    the_task = task(f"{site}/scroll.html")
    episode = Episode(task=the_task, env=env, policy=policy, memory=plugins.catalogue.get("memories", "default")(settings),
                      tools=list(plugins.catalogue.items["tools"].values()), hooks=plugins.for_task(the_task))
    traj = await episode.run()
    assert traj.outcome.status == "success" and traj.outcome.answer == "Block 2"
    assert traj.policy.profile == "openwebrl" and env._dialogs.auto_accept
    # the trajectory keeps owrl's call (100-px units, by script) and the model's own words
    assert traj.steps[0].calls[0].call.arguments == {"direction": "down", "amount": 5.0, "by": "script"}
    assert '"amount": 0.5' in traj.steps[0].turn.raw
    assert await scroll_y(env) == 500
    second = backend.prompts[1].messages
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    reply = second[-1]["content"]
    assert reply[0]["text"].startswith("<tool_response>\nSucceed: `scroll` down by 50%.\n\n<observation>\nscreen size: 1280 x 1000\n")
    assert reply[1]["type"] == "image" and reply[-1]["text"] == "\n</observation>\n</tool_response>"
    assert [p["type"] for p in second[1]["content"]] == ["text"]  # the first screenshot is no longer sent


@pytest.mark.exercises("reads_changes")
async def test_change_feedback_is_computed_only_where_something_reads_it(env, site, plugins, monkeypatch, tmp_path):
    """The openwebrl profile's status lines come from each call's facts, not a page diff: with
    the default memory and no reader, its episodes take no snapshot after a call. The owrl
    profile shows changes to its model, so its calls are described; so are they where a plugin
    of the episode asks (the live view does) or the change_feedback setting says always."""
    from owrl_openwebrl.policy import OpenWebRLPolicy
    from owrl_sdk.config import Settings
    from owrl_sdk.episode.loop import Episode
    from owrl_sdk.episode.runner import ChangeReader, episode_limits

    monkeypatch.setenv("OWRL_CACHE_DIR", str(tmp_path / "cache"))
    go = grid(200, 130)
    official_answers = [f'<tool_call>\n{{"name": "click", "arguments": {{"point_2d": [{go[0]:.0f}, {go[1]:.0f}]}}}}\n'
                        '</tool_call>\n<tool_call>\n{"name": "click", "arguments": {"point_2d": '
                        f'[{go[0]:.0f}, {go[1]:.0f}]}}}}\n</tool_call>',
                        '<tool_call>\n{"name": "done", "arguments": {"response": "ok"}}\n</tool_call>']
    owrl_answers = ['<tool_call>\n{"name": "click", "arguments": {"selector": "#go"}}\n</tool_call>\n'
                    '<tool_call>\n{"name": "click", "arguments": {"selector": "#go"}}\n</tool_call>',
                    '<tool_call>\n{"name": "done", "arguments": {"response": "ok"}}\n</tool_call>']
    snapshots = []
    original = env._aria

    async def counted(page):
        snapshots.append(page.url)
        return await original(page)

    monkeypatch.setattr(env, "_aria", counted)

    async def episode(settings, answers, hooks=()):
        snapshots.clear()
        policy = OpenWebRLPolicy(settings, backend=Scripted(answers), settle="quiescence")
        the_task = task(f"{site}/basic.html")
        run = Episode(task=the_task, env=env, policy=policy,
                      memory=plugins.catalogue.get("memories", "default")(settings),
                      tools=list(plugins.catalogue.items["tools"].values()),
                      hooks=plugins.for_task(the_task, extra=list(hooks)), limits=episode_limits(settings))
        traj = await run.run()
        assert traj.outcome.status == "success", traj.outcome
        assert await env.page.inner_text("#out") == "Clicked 2"
        return traj, len(snapshots)

    traj, taken = await episode(Settings(), official_answers)
    assert traj.policy.profile == "openwebrl"
    assert taken == 0 and traj.metadata["change_feedback"] is False
    results = [record.result for record in traj.steps[0].calls]
    assert [r.ok for r in results] == [True, True] and [r.changed for r in results] == [None, None]
    assert all(r.page and r.page.get("url") for r in results)  # the facts its status lines read are there

    traj, taken = await episode(Settings(profile="owrl"), owrl_answers)
    assert traj.policy.profile == "owrl" and traj.metadata["change_feedback"] is True
    assert taken >= 2, taken  # at least one after-snapshot per call
    assert "Clicked 2" in traj.steps[0].calls[1].result.feedback

    traj, taken = await episode(Settings(), official_answers, hooks=[ChangeReader()])
    assert traj.metadata["change_feedback"] is True and taken >= 2
    traj, taken = await episode(Settings(change_feedback="always"), official_answers)
    assert traj.metadata["change_feedback"] is True and taken >= 2


async def test_the_facts_official_lines_quote_are_kept_as_the_page_gave_them(env, site):
    """What the OpenWebRL environment's lines quote, recorded beside owrl's own words: an element's
    text as the page holds it, cut at 30 characters before its whitespace is collapsed; with no
    field focused, what the page's body holds after a write; the browser's own error words."""
    await env.reset(task(f"{site}/quoted.html"))
    result = await act(env, "click", point_2d=await centre(env, "#indented"))
    element = result.data["element"]
    assert element["text"] == "Products Services and more thi..."  # owrl's words: collapsed, then cut
    held = await env.page.evaluate("() => document.querySelector('#indented').textContent.trim()")
    assert element["raw_text"] == held[:30] + "..." and element["raw_text"].startswith("Products\n      Serv")
    await env.page.evaluate("() => document.activeElement && document.activeElement.blur()")
    written = await act(env, "write", message="hello")
    assert written.ok and written.data["focused"] is False
    assert written.data["value"].startswith("Products Services and more things here Nothing here takes the focus.")
    import socket

    with socket.socket() as s:  # a port nothing answers on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    refused = await act(env, "goto_url", url=f"http://127.0.0.1:{port}/")
    assert not refused.ok and "ERR_CONNECTION_REFUSED" in refused.error
    assert refused.data["exception"].startswith("Page.goto: net::ERR_CONNECTION_REFUSED")
