"""The failure classifier without a browser: every mapping of the kinds table, the start-page
reading, the labels on failed calls, and the loop's repeated-call rule (on the fake env)."""

from __future__ import annotations

import socket
import ssl
import urllib.error

import pytest
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeout
from pydantic import BaseModel, ConfigDict

from fakes import FakeEnv, FakePage, Go, ListPolicy, call
from owrl_sdk.browser.errors import describe, explain
from owrl_sdk.errors import InfraError
from owrl_sdk.failures import (
    KINDS,
    SiteFault,
    classify,
    classify_call,
    is_site_fault,
    start_page_problem,
)
from owrl_sdk.episode.loop import Episode, EpisodeLimits
from owrl_sdk.contract.plugins import DEFAULT_PLUGINS
from owrl_sdk.contract.tools import Tool
from owrl_sdk.types import Failure, Task, ToolResult, Turn


def start_page_error(code: str) -> InfraError:
    """The InfraError BrowserEnv.reset raises when the start page cannot be opened."""
    err = PlaywrightError(f"Page.goto: net::{code} at http://site.test/\nCall log:\n  - navigating to ...")
    return InfraError(explain(err, "opening the start page http://site.test/"), code="start_page_unreachable")


@pytest.mark.parametrize("code,kind", [
    ("ERR_NAME_NOT_RESOLVED", "network.dns"),
    ("ERR_CONNECTION_REFUSED", "network.refused"),
    ("ERR_CONNECTION_RESET", "network.reset"),
    ("ERR_EMPTY_RESPONSE", "network.reset"),
    ("ERR_CONNECTION_TIMED_OUT", "network.timeout"),
    ("ERR_TIMED_OUT", "network.timeout"),
    ("ERR_CERT_AUTHORITY_INVALID", "network.tls"),
    ("ERR_SSL_PROTOCOL_ERROR", "network.tls"),
    ("ERR_ADDRESS_UNREACHABLE", "network.unreachable"),
    ("ERR_INTERNET_DISCONNECTED", "network.offline"),
    ("ERR_ABORTED", "network.aborted"),
    ("ERR_BLOCKED_BY_CLIENT", "network.blocked"),
    ("ERR_TOO_MANY_REDIRECTS", "page.redirect_loop"),
    ("ERR_FAILED", "network.failed"),
    ("ERR_SOMETHING_NEW", "network.failed"),
])
def test_start_page_errors_map_to_network_kinds(code, kind):
    failure = classify(start_page_error(code), "reset")
    assert failure.kind == kind
    assert failure.detail.startswith("reset: opening the start page")
    assert failure.kind in KINDS


def test_start_page_timeout_is_a_network_timeout():
    err = PlaywrightTimeout('Page.goto: Timeout 4000ms exceeded.\nCall log:\n  - navigating to "http://x/", waiting until "load"\n')
    infra = InfraError(explain(err, "opening the start page http://x/"), code="start_page_unreachable")
    assert "did not finish loading" in str(infra)
    assert classify(infra, "reset").kind == "network.timeout"
    invalid = InfraError("opening the start page x failed: that is not a valid URL; give a full address",
                         code="start_page_unreachable", kind="action.invalid_url")
    assert classify(invalid, "reset").kind == "task.invalid_start_url"
    # the kind decides, not owrl's sentence: the same words without it are a plain network failure
    assert classify(InfraError(str(invalid), code="start_page_unreachable"), "reset").kind == "network.failed"
    refused = InfraError("the start page http://x/ was refused: ...", code="start_page_unreachable", kind="network.blocked")
    assert classify(refused, "reset").kind == "network.blocked"


@pytest.mark.parametrize("message,code,kind", [
    ("the page's renderer process crashed", "renderer_crash", "page.renderer_crash"),
    ("the page's renderer crashed: Page.click: Target crashed", "renderer_crash", "page.renderer_crash"),
    # the code decides, never owrl's own sentence: the words of one kind under the other's code
    ("the page's renderer process crashed", "browser_crash", "infra.browser_crash"),
    ("the browser process died", "renderer_crash", "page.renderer_crash"),
    ("the browser process died: Target closed", "browser_crash", "infra.browser_crash"),
    ("the browser process died", "browser_crash", "infra.browser_crash"),
    ("the connection to the browser was lost", "browser_disconnected", "infra.browser_disconnected"),
    ("could not observe the page: Page.screenshot: Timeout 4000ms exceeded.", "observe_failed", "infra.observe_failed"),
    ("Chromium failed to start (boom)", "browser_launch_failed", "infra.browser_launch_failed"),
    ("endpoint http://m failed after 3 tries (URLError: refused)", "endpoint_unreachable", "infra.endpoint_unreachable"),
])
def test_infra_error_codes(message, code, kind):
    assert classify(InfraError(message, code=code), "observe").kind == kind


@pytest.mark.parametrize("error,code", [
    (socket.gaierror(-2, "Name or service not known"), "dns"),
    (ConnectionRefusedError(111, "Connection refused"), "refused"),
    (ConnectionResetError(104, "Connection reset by peer"), "reset"),
    (BrokenPipeError(32, "Broken pipe"), "reset"),
    (socket.timeout("timed out"), "timeout"),
    (ssl.SSLCertVerificationError(1, "certificate verify failed"), "tls"),
    (urllib.error.URLError(ConnectionRefusedError(111, "Connection refused")), "refused"),
    (urllib.error.URLError("[Errno -3] Temporary failure in name resolution"), "dns"),
    (OSError(101, "Network is unreachable"), "unreachable"),
])
def test_python_socket_errors_by_stage(error, code):
    # where Python talks to the site itself (a site adapter's log-in, an API tool): the network
    assert classify(error, "hook").kind == f"network.{code}"
    assert classify(error, "tool").kind == f"network.{code}"
    # in the environment's own stages, a socket error is its link to the browser
    assert classify(error, "reset").kind == "infra.browser_disconnected"
    assert classify(error, "observe").kind == "infra.browser_disconnected"
    # in the policy's, the link to its model server
    assert classify(error, "policy").kind == "infra.policy_unreachable"


def test_a_wrapped_socket_error_is_found_through_the_chain():
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except ConnectionRefusedError as inner:
            raise RuntimeError("login failed") from inner
    except RuntimeError as outer:
        assert classify(outer, "hook").kind == "network.refused"


@pytest.mark.parametrize("error,kind", [
    (PlaywrightError("Page.goto: net::ERR_NAME_NOT_RESOLVED at http://x/"), "network.dns"),
    (PlaywrightError("Page.evaluate: Target crashed "), "page.renderer_crash"),
    (PlaywrightError("Page.click: Target page, context or browser has been closed"), "infra.browser_disconnected"),
    (PlaywrightError("Browser.new_context: Browser has been closed"), "infra.browser_disconnected"),
    (PlaywrightTimeout('Page.goto: Timeout 30000ms exceeded.\n  - navigating to "http://x/"'), "network.timeout"),
    (PlaywrightTimeout("Locator.click: Timeout 5000ms exceeded."), "infra.timeout"),
    (MemoryError(), "infra.out_of_memory"),
    (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), "infra.out_of_memory"),
    (OSError(12, "Cannot allocate memory"), "infra.out_of_memory"),
    (RuntimeError("Target page, context or browser has been closed"), "infra.browser_disconnected"),
    (KeyError("oops"), "infra.KeyError"),
    (InfraError("something", code="custom_code"), "infra.custom_code"),
])
def test_other_exceptions(error, kind):
    assert classify(error, "hook").kind == kind


def test_site_fault_carries_its_own_kind_and_site_faults_are_never_the_policys():
    failure = Failure(category="page", code="captcha", detail="a captcha")
    assert classify(SiteFault(failure), "hook") == failure
    assert is_site_fault(failure)
    assert is_site_fault(classify(start_page_error("ERR_CONNECTION_REFUSED"), "reset"))
    for kind in KINDS:
        category, code = kind.split(".")
        assert is_site_fault(Failure(category=category, code=code)) == (category in ("network", "page")), kind
    assert not is_site_fault(None)


@pytest.mark.parametrize("error,kind", [
    ("unknown tool 'teleport'. Available tools: click, done.", "policy.unknown_tool"),
    ("click on point (5, 5) failed: another element covers the target (<div> intercepts the pointer)", "action.covered"),
    ("goto_url failed: ERR_NAME_NOT_RESOLVED: the host name does not resolve.", "network.dns"),
    ("there is no tab 3; open tabs are 0..1", "action.no_tab"),
    ("something else entirely", None),
    ("a kind outside the categories", "shop.odd"),
])
def test_failed_calls_get_labels_from_the_kind_they_carry(error, kind):
    failure = classify_call(ToolResult.failure(error, kind=kind))
    expected = kind if kind in KINDS else "action.failed"
    assert failure.kind == expected and failure.kind in KINDS
    assert failure.detail == error


@pytest.mark.parametrize("message,kind", [
    ("Locator.click: Timeout 2000ms exceeded.\nCall log:\n  - waiting for locator('#x')\n", "action.no_element"),
    ("Locator.click: Error: strict mode violation: locator('a') resolved to 3 elements", "action.ambiguous_target"),
    ("Locator.click: Timeout 2000ms exceeded.\nCall log:\n  - locator resolved to <button>\n"
     "  - <div class=\"shade\"></div> intercepts pointer events\n", "action.covered"),
    ("Page.goto: net::ERR_NAME_NOT_RESOLVED at http://x/", "network.dns"),
    ("Page.goto: net::ERR_INVALID_URL at x", "action.invalid_url"),
    ("Page.goto: net::ERR_TOO_MANY_REDIRECTS at http://x/", "page.redirect_loop"),
    ('Page.goto: Timeout 4000ms exceeded.\nCall log:\n  - navigating to "http://x/", waiting until "load"\n',
     "network.timeout"),
    ("Locator.fill: Error: Element is not an <input>, <textarea> or [contenteditable] element", "action.not_editable"),
    ("Locator.click: something new", "action.failed"),
])
def test_playwright_errors_are_described_with_their_kind(message, kind):
    text, found = describe(PlaywrightError(message), "click on selector #x")
    assert found == kind and found in KINDS
    assert text == explain(PlaywrightError(message), "click on selector #x")  # the same sentence


TASK = Task(intent="x", start_url="https://shop.test/account")


def seen(**kw):
    base = dict(status=200, ready="complete", url="https://shop.test/account", title="Account", text="Your orders",
                length=11, drawn=3, password=False, widget=False)
    base.update(kw)
    return base


@pytest.mark.parametrize("read,kind", [
    (seen(), None),
    (seen(status=404, title="Not found"), "page.http_error"),
    (seen(status=503), "page.http_error"),
    (seen(ready="loading"), "page.incomplete"),
    (seen(text="", length=0, drawn=0), "page.blank_page"),
    (seen(text="", length=0, drawn=1), None),  # an image or a form is something
    (seen(widget=True), "page.captcha"),
    (seen(title="Just a moment..."), "page.captcha"),
    (seen(text="Please verify you are a human", length=30), "page.captcha"),
    (seen(text="An essay on captcha design " * 40, length=1080), None),  # a long page that mentions one
    (seen(url="https://shop.test/login?next=/account", title="Sign in", password=True), "page.login_wall"),
    (seen(url="https://auth.shop.test/signin", title="Welcome", text="Sign in with your email"), "page.login_wall"),
    (seen(url="https://shop.test/account/", title="Sign in", password=True), None),  # not redirected
])
def test_start_page_problems(read, kind):
    problem = start_page_problem(read, TASK)
    assert (problem.kind if problem else None) == kind


def test_a_log_in_page_the_task_starts_on_is_no_wall():
    task = Task(intent="log in", start_url="https://shop.test/login")
    read = seen(url="https://shop.test/login?next=/", title="Sign in", password=True)
    assert start_page_problem(read, task) is None


def test_every_code_in_the_kinds_table_is_well_formed():
    for kind, line in KINDS.items():
        category, code = kind.split(".")
        Failure(category=category, code=code)  # the category is one the type allows
        assert line


# ---------------------------------------------------------------------------- through the loop


PAGES = {"fake://home": FakePage("fake://home", "Home", {"Welcome"})}


class PokeArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    at: str = "x"


class Poke(Tool):
    """A call that changes nothing: answered as the browser env answers one."""

    name = "poke"
    description = "poke"
    Args = PokeArgs

    async def run(self, env, args):
        return ToolResult(feedback="no visible change", changed=False)


def episode(plugins, settings, turns, env=None, limits=None):
    task = Task(id="t1", intent="x", start_url="fake://home")
    tools = list(plugins.catalogue.items["tools"].values()) + [Go(), Poke()]
    return Episode(task=task, env=env or FakeEnv(PAGES), policy=ListPolicy(settings, turns=turns),
                   memory=plugins.catalogue.get("memories", "default")(settings), tools=tools,
                   hooks=plugins.for_task(task), limits=limits or EpisodeLimits(max_steps=10))


def test_the_classifier_is_a_default_plugin(plugins):
    assert "owrl_sdk.failures" in DEFAULT_PLUGINS
    assert plugins.pm.has_plugin("owrl_sdk.failures")


@pytest.mark.exercises("classify_failure")
async def test_the_loop_gets_network_kinds_from_the_default_classifier(plugins, settings):
    class Unreachable(FakeEnv):
        async def reset(self, task):
            raise start_page_error("ERR_NAME_NOT_RESOLVED")

    traj = await episode(plugins, settings, [Turn()], env=Unreachable(PAGES)).run()
    assert traj.outcome.status == "infra_error"
    assert traj.outcome.failure.kind == "network.dns"


async def test_same_call_three_times_without_change_ends_the_episode(plugins, settings):
    turns = [Turn(calls=[call("poke", at="a")]), Turn(calls=[call("poke", at="a"), call("poke", at="a"), call("wait", seconds=0)])]
    traj = await episode(plugins, settings, turns).run()
    assert traj.outcome.status == "fail"
    assert traj.outcome.failure.kind == "policy.repeated_without_change"
    assert "3 times in a row" in traj.outcome.failure.detail
    second = traj.steps[1].calls
    assert [r.skipped for r in second] == [False, False, True]  # the rest of the turn is not run
    assert len(traj.steps) == 2


async def test_repeats_reset_on_other_calls_arguments_or_errors(plugins, settings):
    turns = [
        Turn(calls=[call("poke", at="a"), call("poke", at="a"), call("poke", at="b")]),  # other arguments
        Turn(calls=[call("poke", at="b"), call("go", to="fake://nowhere")]),  # an error breaks the row
        Turn(calls=[call("poke", at="b"), call("poke", at="b"), call("done", response="ok")]),
    ]
    traj = await episode(plugins, settings, turns).run()
    assert traj.outcome.status == "success"


async def test_the_repeat_limit_is_a_setting(plugins, settings):
    turns = [Turn(calls=[call("poke")])]
    off = await episode(plugins, settings, turns, limits=EpisodeLimits(max_steps=6, max_unchanged_repeats=0)).run()
    assert off.outcome.failure.kind == "task.max_steps"
    five = await episode(plugins, settings, turns, limits=EpisodeLimits(max_steps=9, max_unchanged_repeats=5)).run()
    assert five.outcome.failure.kind == "policy.repeated_without_change" and len(five.steps) == 5


async def test_failed_calls_carry_their_kind_in_the_trajectory(plugins, settings):
    turns = [Turn(calls=[call("teleport"), call("go", where="x"), call("go", to="fake://nowhere")]),
             Turn(calls=[call("done", response="")])]
    traj = await episode(plugins, settings, turns).run()
    labels = [r.result.data["failure"] for r in traj.steps[0].calls]
    assert [f"{label['category']}.{label['code']}" for label in labels] == ["policy.unknown_tool", "policy.bad_arguments", "action.failed"]
    assert traj.steps[0].calls[0].result.error.startswith("unknown tool")  # still feedback for the model
    assert traj.outcome.status == "success"
