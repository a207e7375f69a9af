"""The OpenAI-compatible client against a strict stand-in of a hosted API: unknown request
arguments are refused with a 400 (as hosted APIs do), tools are answered with ``tool_calls``,
429s carry ``Retry-After``. An episode runs through it with ``--policy openai`` in native and in
text mode, in a real Chromium on a page served on 127.0.0.1, and its judge call goes through it too."""

from __future__ import annotations

import json
import time

import pytest

from json_server import JsonServer
from owrl_cli import owrl
from owrl_openwebrl.backend import Sampling
from owrl_openwebrl.openai_backend import OpenAIBackend, retry_after
from owrl_openwebrl.prompt import Prompt
from owrl_sdk.formats.documents import load_trajectory
from owrl_sdk.errors import InfraError

#: What a hosted chat-completions API takes; anything else is refused.
KNOWN = {"model", "messages", "temperature", "top_p", "max_tokens", "max_completion_tokens", "seed", "tools",
         "tool_choice", "n", "stop", "stream", "user", "presence_penalty", "frequency_penalty", "response_format"}


def refused(message: str) -> tuple[int, dict]:
    return 400, {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}


def completion(content: str = "", tool_calls: list | None = None) -> dict:
    message = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [{"id": f"call_{i}", "type": "function",
                                  "function": {"name": name, "arguments": json.dumps(args)}}
                                 for i, (name, args) in enumerate(tool_calls)]
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 9, "total_tokens": 59}}


class StrictAPI(JsonServer):
    """A hosted API's manners: unknown arguments refused; ``replies`` answers the rest in turn
    (a callable given the body). ``reasoning``: refuses ``max_tokens`` as reasoning models do."""

    def __init__(self, replies, reasoning: bool = False):
        pending = list(replies)

        def answer(path, headers, body):
            unknown = sorted(set(body) - KNOWN)
            if unknown:
                return refused(f"Unrecognized request argument supplied: {', '.join(unknown)}")
            if reasoning and "max_tokens" in body:
                return refused("Unsupported parameter: 'max_tokens' is not supported with this model. "
                               "Use 'max_completion_tokens' instead.")
            reply = pending.pop(0)
            return reply(body) if callable(reply) else reply

        super().__init__(answer)


def prompt(text: str = "hi", tools: list | None = None) -> Prompt:
    return Prompt(messages=[{"role": "user", "content": [{"type": "text", "text": text}]}], tools=tools or [])


def test_sampling_is_sent_only_when_set_and_a_hosted_api_accepts_the_request():
    server = StrictAPI([(200, completion("fine"))] * 2)
    try:
        backend = OpenAIBackend(base_url=server.url, model="m", retries=0)
        assert backend.generate([prompt()], Sampling.from_options({}))[0].text == "fine"
        assert set(server.requests[0][2]) == {"model", "messages", "max_tokens"}
        # a local model's Sampling (every value chosen) is sent whole: top_k travels in vLLM's extra body
        with pytest.raises(InfraError, match="HTTP 400.*top_k"):
            backend.generate([prompt()], Sampling())
        assert backend.generate([prompt()], Sampling.from_options({"temperature": 0.3}))[0].text == "fine"
        assert server.requests[-1][2]["temperature"] == 0.3
    finally:
        server.close()


def test_a_reasoning_model_gets_max_completion_tokens_after_refusing_max_tokens():
    server = StrictAPI([(200, completion("a")), (200, completion("b"))], reasoning=True)
    try:
        backend = OpenAIBackend(base_url=server.url, model="m", retries=0, concurrency=1)
        assert [g.text for g in backend.generate([prompt(), prompt()], Sampling.from_options({"max_new_tokens": 64}))] == ["a", "b"]
    finally:
        server.close()
    bodies = [body for _, _, body in server.requests]
    assert "max_tokens" in bodies[0] and bodies[1]["max_completion_tokens"] == 64
    assert backend.token_param == "max_completion_tokens"  # remembered: no second refusal
    assert sum("max_tokens" in b for b in bodies) == 1


def test_a_429_with_retry_after_is_waited_out_instead_of_the_backoff():
    busy = (429, {"error": {"message": "rate limited"}}, {"Retry-After": "1"})
    server = StrictAPI([busy, (200, completion("done"))])
    try:
        backend = OpenAIBackend(base_url=server.url, model="m", retries=2, backoff=30.0)
        started = time.monotonic()
        assert backend.generate([prompt()], Sampling.from_options({}))[0].text == "done"
        waited = time.monotonic() - started
    finally:
        server.close()
    assert 1.0 <= waited < 10, waited  # the server's second, not 15-45 s of backoff
    assert retry_after({"retry-after-ms": "250"}) == 0.25 and retry_after({}) is None
    # a server asking for longer than owrl waits is reported at once
    server = StrictAPI([(503, {}, {"Retry-After": "3600"})])
    try:
        with pytest.raises(InfraError, match="asked to wait 3600 s"):
            OpenAIBackend(base_url=server.url, model="m", retries=3).generate([prompt()], Sampling.from_options({}))
    finally:
        server.close()


def test_a_batch_is_sent_concurrently_in_order_with_headers_and_an_azure_style_version():
    def slow(body):
        time.sleep(0.6)
        return 200, completion(body["messages"][0]["content"])

    server = StrictAPI([slow] * 4)
    try:
        backend = OpenAIBackend(base_url=server.url, model="m", api_key="sk-1", headers={"X-Team": "ops"},
                                api_version="2024-10-21", concurrency=4)
        started = time.monotonic()
        out = backend.generate([prompt(str(i)) for i in range(4)], Sampling.from_options({}))
        elapsed = time.monotonic() - started
    finally:
        server.close()
    assert [g.text for g in out] == ["0", "1", "2", "3"]
    assert elapsed < 4 * 0.6, elapsed  # one at a time would take 2.4 s
    path, headers, _ = server.requests[0]
    assert path.endswith("/chat/completions?api-version=2024-10-21")
    assert headers["X-Team"] == "ops" and headers["api-key"] == "sk-1"


def test_native_calls_become_the_calls_the_profile_reads_expectations_included():
    tools = [{"type": "function", "function": {"name": "click", "description": "Click",
                                               "parameters": {"type": "object", "properties": {"selector": {"type": "string"}}}}}]
    server = StrictAPI([(200, completion("The button is there.", [("click", {"selector": "#go", "expect": {"text_visible": "Clicked"}})])),
                        (200, {**completion(), "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                            "role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function",
                                                                                   "function": {"name": "click", "arguments": "{bad"}}]}}]})])
    try:
        backend = OpenAIBackend(base_url=server.url, model="m", tool_calls="native")
        first, second = (backend.generate([prompt(tools=tools)], Sampling.from_options({}))[0] for _ in range(2))
    finally:
        server.close()
    sent = server.requests[0][2]["tools"][0]["function"]
    assert sent["name"] == "click" and "expect" in sent["parameters"]["properties"]
    from owrl_openwebrl.parser import parse_turn

    turn = parse_turn(first.text)
    assert turn.thought == "The button is there."
    assert [(c.name, c.arguments, c.expect.text_visible) for c in turn.calls] == [("click", {"selector": "#go"}, "Clicked")]
    assert parse_turn(second.text).parse_error  # arguments that are not JSON: an unreadable answer, as in text


PAGE = """<!doctype html><title>Go</title><button id="go" onclick="document.getElementById('out').textContent='Clicked'">Go</button>
<p id="out"></p>"""


@pytest.mark.parametrize("mode", ["native", "text"])
def test_an_episode_and_its_judgement_through_the_strict_stand_in(mode, owrl_page_server, tmp_path):
    page_url = owrl_page_server({"/go": PAGE}) + "go"
    def policy_turn(body):
        assert ("tools" in body) == (mode == "native")
        seen = json.dumps(body["messages"])
        if "Clicked" not in seen:  # the first turn: press Go, expecting its result
            call = ("click", {"selector": "#go", "expect": {"text_visible": "Clicked"}})
        else:
            call = ("done", {"response": "pressed"})
        if mode == "native":
            return 200, completion("", [call])
        name, args = call
        return 200, completion(f'<tool_call>{{"name": "{name}", "arguments": {json.dumps(args)}}}</tool_call>')

    server = StrictAPI([policy_turn, policy_turn, (200, completion("Go was pressed.\n\nSUCCESS"))])
    (tmp_path / "owrl.toml").write_text(f'[plugins.openai]\nbase_url = "{server.url}"\nmodel = "hosted"\n'
                                        f'tool_calls = "{mode}"\n'
                                        f'[plugins.openwebrl-judge]\nbackend = "openai"\nbase_url = "{server.url}"\n')
    env = {"OWRL_CACHE_DIR": str(tmp_path / "cache"), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    try:
        out = owrl("run", "--policy", "openai", "--profile", "owrl", "--task", "Press Go", "--url", page_url,
                   "--json", "--out", "runs", "--max-steps", "4", cwd=tmp_path, env=env, timeout=300)
        assert out.returncode == 0, out.stdout + out.stderr
        result = json.loads(out.stdout)
        judged = owrl("judge", result["run_dir"], "--json", "--judge", "openwebrl-judge", cwd=tmp_path, env=env, timeout=300)
    finally:
        server.close()
    assert result["outcome"]["status"] == "success" and result["outcome"]["answer"] == "pressed"
    traj = load_trajectory(result["run_dir"])
    first = traj.steps[0].calls[0]
    assert first.call.name == "click" and first.verdict is not None and first.verdict.ok
    assert judged.returncode == 0, judged.stderr
    assert json.loads(judged.stdout)["success"] is True
    judge_body = server.requests[-1][2]
    assert "tools" not in judge_body and judge_body["temperature"] == 0.0
