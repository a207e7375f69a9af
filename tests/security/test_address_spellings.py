"""Addresses are judged by the address they reach, not by how they are spelled.

One table of spellings of internal addresses gets the same answer from the browser's domain
policy (a real Chromium, nothing reaching the server behind the address) and from every
client the server runs for a job: a job's OpenAI-compatible endpoint, its callback and its
own allowlist. Each server here listens on 127.0.0.1 only.
"""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest
from security_support import CountingServer, attack

from owrl_sdk.safety.addresses import NotAHost, internal, parse_ip, reached
from owrl_sdk.config import Settings
from owrl_sdk.safety.domains import DomainPolicy, normalize_domain

#: Spellings of 127.0.0.1 (and of this machine) that a browser or a client connects with.
LOOPBACK = ["127.0.0.1", "127.1", "2130706433", "0x7f000001", "0x7f.0.0.1", "0177.0.0.1", "017700000001",
            "127.0.0.1.", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[::127.0.0.1]", "[::ffff:0:127.0.0.1]",
            "[64:ff9b::7f00:1]", "[64:ff9b::127.0.0.1]", "[2002:7f00:1::]", "[::1]", "127.0.0.2",
            "0.0.0.0", "0", "[::]", "localhost", "app.localhost", "LOCALHOST."]
#: Spellings of other internal addresses, with the class each is.
INTERNAL = {"10.0.0.1": "private", "167772161": "private", "[::ffff:a00:1]": "private", "[64:ff9b::a00:1]": "private",
            "[2002:a00:1::]": "private", "169.254.169.254": "link-local", "2852039166": "link-local",
            "0xa9.0xfe.0xa9.0xfe": "link-local", "[fe80::1]": "link-local", "192.168.1.1": "private",
            "0300.0250.1.1": "private", "172.16.0.1": "private", "[fd00::1]": "private", "100.64.0.1": "shared",
            "[64:ff9b:1::a00:1]": "translated", "[2001:0:4136:e378:8000:63bf:3fff:fdd2]": "translated",
            "224.0.0.1": "multicast"}
PUBLIC = ["8.8.8.8", "0x08080808", "134744072", "[2606:4700::1111]", "example.com"]


@pytest.mark.parametrize("host", LOOPBACK)
def test_every_spelling_of_this_machine_is_blocked_by_a_blocklist_of_127_0_0_1(host):
    with attack("addresses", f"blocklist 127.0.0.1, host spelled {host}", "hosts read as the address they reach"):
        assert DomainPolicy(blocked=["127.0.0.1"]).refusal(f"http://{host}:8080/x")
        assert DomainPolicy(blocked=["localhost"]).refusal(f"http://{host}:8080/x")
        assert DomainPolicy(blocked=["[::1]"]).refusal(f"http://{host}:8080/x")


@pytest.mark.parametrize("host, kind", INTERNAL.items())
def test_every_spelling_of_an_internal_address_is_read_as_that_address(host, kind):
    ip = parse_ip(host)
    assert ip is not None and kind in (internal(ip) or "")
    canonical = str(reached(ip))
    if kind in ("private", "link-local"):
        assert DomainPolicy(blocked=[canonical]).refusal(f"http://{host}/")
        assert DomainPolicy(blocked=["10.0.0.0/8", "169.254.0.0/16", "192.168.0.0/16", "172.16.0.0/12",
                                     "fc00::/7", "fe80::/10"]).refusal(f"http://{host}/")


@pytest.mark.parametrize("host", PUBLIC)
def test_public_addresses_are_not_internal_in_any_spelling(host):
    ip = parse_ip(host)
    assert ip is None or internal(ip) is None
    assert DomainPolicy(blocked=["127.0.0.1", "10.0.0.0/8"]).refusal(f"http://{host}/") is None


def test_an_allowlist_admits_its_address_in_any_spelling_and_nothing_else_of_this_machine():
    policy = DomainPolicy(allowed=["127.0.0.1"])
    for host in ("127.0.0.1", "127.1", "2130706433", "0x7f000001", "[::ffff:127.0.0.1]", "[64:ff9b::7f00:1]"):
        assert policy.refusal(f"http://{host}:9/") is None, host
    for host in ("localhost", "0.0.0.0", "0", "[::]", "[::1]", "127.0.0.2", "10.0.0.1"):
        assert policy.refusal(f"http://{host}:9/"), host


def test_entries_are_normalised_to_the_address_they_name_and_bad_numbers_refused():
    assert normalize_domain("127.1") == "127.0.0.1"
    assert normalize_domain("[::ffff:10.0.0.1]") == "10.0.0.1"
    assert normalize_domain("10.0.0.0/8") == "10.0.0.0/8"
    for bad in ("256.1.1.1", "1.2.3.4.5", "0x100000000", "09.1.1.1"):
        with pytest.raises(ValueError):
            normalize_domain(bad)
        with pytest.raises(NotAHost):
            parse_ip(bad)
        # a host no client connects to is covered by any blocklist, admitted by no allowlist
        assert DomainPolicy(blocked=["example.com"]).refusal(f"http://{bad}/")
        assert DomainPolicy(allowed=["example.com"]).refusal(f"http://{bad}/")


def test_the_ipv4_parser_reads_numbers_as_a_browser_does():
    expected = {"1.2.3": "1.2.0.3", "1.65536": "1.1.0.0", "0x1.0x2.3": "1.2.0.3", "0.0.0.010": "0.0.0.8",
                "4294967295": "255.255.255.255", "0x": "0.0.0.0"}
    for text, address in expected.items():
        assert parse_ip(text) == ipaddress.ip_address(address), text
    assert parse_ip("example.com") is None and parse_ip("1.example") is None and parse_ip("0xg") is None


# ---------------------------------------------------------------------------- the server's clients


def runner(tmp_path, **settings: Any):
    from owrl_sdk.contract.plugins import Plugins
    from owrl_sdk.server.runner import JobRunner

    return JobRunner(store=None, data_dir=tmp_path, settings=Settings(runs_dir=str(tmp_path), **settings),
                     plugins=Plugins())


@pytest.mark.parametrize("host", LOOPBACK + [h for h, k in INTERNAL.items() if k != "multicast"])
def test_a_jobs_endpoint_at_an_internal_address_is_refused_in_every_spelling(host, tmp_path):
    from owrl_sdk.server.runner import SpecError

    with attack("addresses", f"a job's policy_options.base_url at {host}", "internal addresses refused by address"):
        for settings in ({}, {"blocked_domains": ["127.0.0.1", "10.0.0.0/8"]}):
            with pytest.raises(SpecError):
                runner(tmp_path, **settings).check_policy_options(
                    "openai", {"base_url": f"http://{host}:8000/v1"}, None, ("body", "policy_options"))
        with pytest.raises(SpecError):  # an allowlist admits only what it names
            runner(tmp_path, allowed_domains=["example.com"]).check_policy_options(
                "openai", {"base_url": f"http://{host}:8000/v1"}, None, ("body", "policy_options"))


def test_a_jobs_endpoint_named_by_a_name_that_resolves_inside_is_refused(tmp_path):
    """The machine's own name (in /etc/hosts) resolves to a loopback address: a job naming it
    reaches this machine as surely as 127.0.0.1 does."""
    import socket

    from owrl_sdk.server.runner import SpecError

    name = socket.gethostname()
    try:
        address = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)[0][4][0]
    except OSError:
        pytest.skip(f"this machine's name {name!r} does not resolve")
    if internal(parse_ip(address)) is None:
        pytest.skip(f"this machine's name resolves to a public address ({address})")
    with attack("addresses", "a job's policy_options.base_url named by the machine's own host name",
                "the name's addresses judged at submission"):
        with pytest.raises(SpecError, match=f"resolves to {address}"):
            runner(tmp_path).check_policy_options("openai", {"base_url": f"http://{name}:8000/v1"}, None, ("body",))


def test_an_operator_allows_an_internal_endpoint_by_address_or_network(tmp_path):
    for allowed in (["10.0.0.0/8"], ["10.1.2.3"]):
        options = {"base_url": "http://167838211:8000/v1"}  # 10.1.2.3 spelled as one number
        runner(tmp_path, allowed_domains=allowed).check_policy_options("openai", options, None, ("body",))
    options = {"base_url": "https://api.example.com/v1"}  # a public name without any list: as before
    runner(tmp_path).check_policy_options("openai", options, None, ("body",))


def test_a_name_that_changes_its_answer_after_submission_reaches_nothing_inside(tmp_path, monkeypatch):
    """DNS rebinding: a job's endpoint named by a host name that resolved outside when the job was
    submitted and resolves inside when the server connects. No DNS server of ours runs here, so
    the submission's lookup is made to answer "outside" (monkeypatched, the one fake); the
    connection is real: the server's gate resolves ``localhost`` itself, as any client would."""
    import asyncio
    import contextlib

    from owrl_openwebrl.openai_backend import OpenAIBackend

    from owrl_sdk.errors import InfraError
    from owrl_openwebrl.backend import Sampling
    from owrl_openwebrl.prompt import Prompt
    from owrl_sdk.server.jobs import JobStore
    from owrl_sdk.server.runner import SpecError

    service = CountingServer()  # an internal service on 127.0.0.1
    url = f"http://localhost:{service.port}/v1"
    prompt = Prompt(messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}], tools=[])

    async def go() -> None:
        from owrl_sdk.contract.plugins import Plugins
        from owrl_sdk.server.runner import JobRunner

        jobs = JobRunner(store=JobStore(tmp_path / "jobs.db"), data_dir=tmp_path,
                         settings=Settings(runs_dir=str(tmp_path)), plugins=Plugins())
        await jobs.start()
        try:
            with pytest.raises(SpecError):  # the name as it resolves now: refused at submission
                jobs.check_policy_options("openai", {"base_url": url}, None, ("body",))
            monkeypatch.setattr("owrl_sdk.server.runner.internal_host", lambda *a, **k: None)
            options: dict[str, Any] = {"base_url": url}
            jobs.check_policy_options("openai", options, None, ("body",))  # "outside" at submission
            with pytest.raises(SpecError, match="proxy"):  # a job cannot name its own proxy
                jobs.check_policy_options("openai", {"base_url": url, "proxy": "http://x"}, None, ("body",))
            jobs._through_gate("openai", options)
            assert options["proxy"] == jobs.gate_url
            backend = OpenAIBackend(model="m", base_url=url, api_key=options["api_key"], retries=0, proxy=options["proxy"])
            with pytest.raises(InfraError, match="resolves to 127.0.0.1, this machine"):
                await asyncio.to_thread(backend.generate, [prompt], Sampling())
            assert service.hits == [] and service.connections == 0
            # the control: the same client without the gate reaches the service
            bare = OpenAIBackend(model="m", base_url=url, api_key="none", retries=0)
            with contextlib.suppress(Exception):  # its answer is a web page, not a completion: whatever it raises
                await asyncio.to_thread(bare.generate, [prompt], Sampling())
            assert service.hits == ["POST /v1/chat/completions"]
        finally:
            await jobs.stop()
            service.close()

    with attack("addresses", "a job's endpoint name resolves outside at submission and to 127.0.0.1 when the server connects",
                "the server's clients go through its egress gate, which judges the address it connects to"):
        asyncio.run(go())


def test_a_callback_goes_through_the_gate_and_is_refused_by_the_address_it_reaches(tmp_path, monkeypatch):
    """A callback to an allowed name (this machine's own, from /etc/hosts) that resolves to a
    blocked address when it is sent: refused by the address, not by the name."""
    import asyncio
    import socket

    from owrl_sdk.browser.egress import EgressGate
    from owrl_sdk.server.webhooks import deliver

    name = socket.gethostname()
    try:
        address = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)[0][4][0]
    except OSError:
        pytest.skip(f"this machine's name {name!r} does not resolve")
    monkeypatch.setenv("OWRL_SERVE_WEBHOOK_KEY", "k")
    service = CountingServer(bind="0.0.0.0")

    async def go() -> None:
        policy = DomainPolicy(allowed=[name], blocked=[address])
        assert policy.refusal(f"http://{name}:{service.port}/hook") is None  # the name alone passes
        gate = EgressGate(policy)
        proxy = await gate.start()
        try:
            taken = await asyncio.to_thread(deliver, f"http://{name}:{service.port}/hook", {"event": "x"}, "job1",
                                            lambda _s: None, proxy)
            assert taken is False and service.connections == 0
            assert gate.refused and f"resolves to {address}" in gate.refused[0][1]
            # the control: without the gate the callback reaches the service behind that address
            assert await asyncio.to_thread(deliver, f"http://{name}:{service.port}/hook", {"event": "x"}, "job1",
                                           lambda _s: None)
            assert service.hits == ["POST /hook"]
        finally:
            await gate.close()
            service.close()

    with attack("addresses", "callback to an allowed name that resolves to a blocked address when sent",
                "the callback goes through the server's egress gate"):
        asyncio.run(go())


@pytest.mark.parametrize("host", ["127.1", "2130706433", "0x7f000001", "[::ffff:127.0.0.1]", "0.0.0.0", "[::]",
                                  "[64:ff9b::7f00:1]", "localhost"])
def test_a_callback_at_a_spelling_of_this_machine_is_refused(host, tmp_path, monkeypatch):
    from owrl_sdk.server.runner import SpecError

    monkeypatch.setenv("OWRL_SERVE_WEBHOOK_KEY", "k")
    with attack("addresses", f"callback_url at {host} (allowlist example.com, blocklist 127.0.0.1)",
                "the same address rule as the browser"):
        with pytest.raises(SpecError):
            runner(tmp_path, allowed_domains=["example.com"], blocked_domains=["127.0.0.1"]).check_callback(
                f"http://{host}:9/hook", ("body", "callback_url"))


# ---------------------------------------------------------------------------- the browser


async def test_the_browser_reaches_nothing_behind_a_blocked_address_in_any_spelling(tmp_path):
    from owrl_sdk.browser import BrowserHost
    from owrl_sdk.types import Task

    service = CountingServer(body=b"<title>Internal</title><h1>Internal service</h1>")
    spellings = ["0.0.0.0", "0", "[::]", "127.1", "2130706433", "0x7f000001", "[::ffff:127.0.0.1]", "localhost"]
    urls = [f"http://{h}:{service.port}/" for h in spellings]
    page = tmp_path / "start.html"
    page.write_text("<title>Start</title><h1>Start</h1><ul id='log'></ul><script>"
                    + "".join(f"fetch('{u}f{i}', {{mode: 'no-cors'}}).catch(() => 0);"
                              f"new Image().src = '{u}i{i}';" for i, u in enumerate(urls))
                    + "</script>")
    try:
        with attack("addresses", "browser: navigation, fetch and <img> to 127.0.0.1 spelled 8 ways, "
                    "blocklist 127.0.0.1", "one address rule on the browser path"):
            settings = Settings(runs_dir=str(tmp_path / "runs"), blocked_domains=["127.0.0.1"])
            async with BrowserHost(settings) as host:
                env = await host.new_env()
                await env.reset(Task(intent="t", start_url=page.as_uri()))
                await env.page.wait_for_timeout(500)
                for url in urls:
                    try:
                        await env.page.goto(url, timeout=5000)
                    except Exception:  # noqa: BLE001 - refused navigations raise; what matters is the server
                        pass
                    assert "Internal service" not in await env.page.content(), url
                await env.close()
            assert service.hits == [], service.hits
    finally:
        service.close()
