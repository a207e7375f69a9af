"""Prompt rendering (golden), the judge's verdict parsing, and the OpenAI-compatible backend."""

from __future__ import annotations


import pytest

from builtin_tools.control import Done, Wait
from owrl_openwebrl.backend import Sampling
from owrl_openwebrl.judge import build_judge_prompt, parse_verdict
from owrl_openwebrl.openai_backend import OpenAIBackend
from owrl_openwebrl.prompt import build_prompt, openai_messages
from owrl_sdk.errors import InfraError
from owrl_sdk.contract.memory import Context
from json_server import JsonServer
from owrl_sdk.types import CallRecord, Observation, Outcome, PolicyInfo, Step, Tab, Task, ToolCall, ToolResult, Trajectory, Turn, Verdict, Check


def context(screens=(b"img0",)):
    task = Task(intent="Buy a red hat", start_url="http://127.0.0.1:1/")
    step = Step(index=0, observation=Observation(url="http://127.0.0.1:1/", title="Shop"),
                turn=Turn(thought="search", raw='<think>search</think><tool_call>{"name": "wait", "arguments": {}}</tool_call>',
                          calls=[ToolCall(name="wait"), ToolCall(name="done")]),
                calls=[CallRecord(call=ToolCall(name="wait"), result=ToolResult(feedback="waited 1 s"),
                                  verdict=Verdict(ok=False, checks=[Check(key="text_visible", ok=False, detail="'Hat' not on the page")])),
                       CallRecord(call=ToolCall(name="done"), skipped=True, skip_reason="skipped: the expectation of wait failed")])
    obs = Observation(url="http://127.0.0.1:1/search", title="Results", aria='- button "Add" [ref=e3]',
                      tabs=[Tab(index=0, url="http://127.0.0.1:1/search", title="Results", active=True),
                            Tab(index=1, url="http://127.0.0.1:1/help", title="Help")])
    return Context(task=task, observation=obs, tools=[Done(), Wait()], history=[step], screenshots=list(screens))


def test_prompt_golden():
    p = build_prompt(context())
    msgs = p.text_only()
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "tool", "user"]
    system = msgs[0]["content"][0]["text"]
    assert "point_2d [x, y] on a 0-1000 grid" in system and "<tools>" in system and '"name": "done"' in system
    assert msgs[1]["content"][0]["text"] == "Task: Buy a red hat"
    assert msgs[2]["content"][0]["text"].startswith("<think>search</think><tool_call>")  # the raw output, verbatim
    assert msgs[3]["content"][0]["text"] == "wait: waited 1 s\nexpectation failed: text_visible: 'Hat' not on the page"
    assert msgs[4]["content"][0]["text"] == "done: not run (skipped: the expectation of wait failed)"
    assert msgs[5]["content"] == [
        {"type": "text", "text": "Page: http://127.0.0.1:1/search\nTitle: Results\nTabs: [0]* Results; [1] Help"},
        {"type": "text", "text": "<image>"}]
    assert p.images() == [b"img0"]


def test_text_mode_marks_page_content_untrusted():
    p = build_prompt(context(), text_mode=True, tools_in_system=False)
    last = p.messages[-1]["content"]
    assert not p.images()
    assert '<page_content untrusted="true">\n- button "Add" [ref=e3]\n</page_content>' == last[1]["text"]
    assert "<tools>" not in p.messages[0]["content"][0]["text"]
    assert [t["function"]["name"] for t in p.tools] == ["done", "wait"]


def test_openai_messages_use_data_urls():
    msgs = openai_messages(build_prompt(context(screens=(b"\xff\xd8jpeg",))))
    assert msgs[3] == {"role": "user", "content": "<tool_response>\nwait: waited 1 s\nexpectation failed: text_visible: 'Hat' not on the page\n</tool_response>"}
    image = msgs[-1]["content"][1]
    assert image["type"] == "image_url" and image["image_url"]["url"].startswith("data:image/jpeg;base64,/9hq")


@pytest.mark.parametrize("text, expected", [
    ('Constraints: red, hat. I might say <verdict>{"success": true}</verdict> is tempting but no.\n'
     '<verdict>{"success": false, "score": 0.2, "reason": "wrong colour"}</verdict>', (False, 0.2, "wrong colour")),
    ('The answer says "success". <verdict>{"success": true, "score": 1.5}</verdict>', (True, 1.0, "")),
    ("success: true", None),
    ('<verdict>{"success": "yes"}</verdict>', None),
    ("<verdict>{oops</verdict>", None),
])
def test_verdict_parsing(text, expected):
    verdict, why = parse_verdict(text)
    if expected is None:
        assert verdict is None and why
    else:
        assert (verdict["success"], verdict["score"], verdict["reason"]) == expected


def test_judge_prompt_bounds_feedback_and_keeps_three_screenshots():
    traj = Trajectory(task=Task(intent="Find the price", start_url="http://x/"), policy=PolicyInfo(name="p"))
    for i in range(5):
        traj.steps.append(Step(index=i, observation=Observation(screenshot=f"shot{i}".encode()),
                               turn=Turn(calls=[ToolCall(name="click")]),
                               calls=[CallRecord(call=ToolCall(name="click"), result=ToolResult(feedback="x" * 1000))]))
    traj.outcome = Outcome(status="success", answer="19.99")
    p = build_judge_prompt(traj)
    text = p.messages[1]["content"][0]["text"]
    assert "Final answer: 19.99" in text and "x" * 300 in text and "x" * 301 not in text
    assert p.images() == [b"shot2", b"shot3", b"shot4"]


class ChatServer(JsonServer):
    """A stand-in for a real OpenAI-compatible server: it speaks chat completions on 127.0.0.1,
    answering each request with the next of ``replies`` (status, body)."""

    def __init__(self, replies):
        pending = list(replies)
        super().__init__(lambda path, headers, body: pending.pop(0))

    @property
    def requests_seen(self):
        return [(path, headers.get("Authorization"), body) for path, headers, body in self.requests]


def completion(text):
    return {"choices": [{"message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 120, "completion_tokens": 7}}


async def test_openai_policy_against_a_local_server(settings):
    from owrl_openwebrl.policy import OpenAIPolicy

    server = ChatServer([(503, {"error": "busy"}),
                         (200, completion('<think>ok</think><tool_call>{"name": "done", "arguments": {"response": "7"}}</tool_call>'))])
    try:
        policy = OpenAIPolicy(settings, base_url=server.url, api_key="k", model="m", backoff=0.01)
        turn = await policy.act(context())
    finally:
        server.close()
    assert [c.name for c in turn.calls] == ["done"]
    assert turn.usage["prompt_tokens"] == 120 and turn.usage["completion_tokens"] == 7
    path, auth, body = server.requests_seen[-1]
    assert len(server.requests) == 2  # the 503 was retried
    assert path == "/v1/chat/completions" and auth == "Bearer k"
    # nothing was set: only the token cap is sent, and the tools as the API's own (owrl profile: native)
    assert body["model"] == "m" and body["max_tokens"] == 512
    assert not {"temperature", "top_p", "top_k", "seed"} & set(body)
    assert [t["function"]["name"] for t in body["tools"]] == ["done", "wait"]
    assert "expect" in body["tools"][0]["function"]["parameters"]["properties"]
    assert "<tools>" not in body["messages"][0]["content"]
    assert body["messages"][-1]["content"][1]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    # what is set is sent; top_k, which hosted APIs refuse, only when set, in the body vLLM reads
    server = ChatServer([(200, completion('<tool_call>{"name": "done", "arguments": {}}</tool_call>'))])
    try:
        policy = OpenAIPolicy(settings, base_url=server.url, model="m", temperature=0.2, top_k=5, seed=3,
                              tool_calls="text")
        await policy.act(context())
    finally:
        server.close()
    body = server.requests_seen[-1][2]
    assert (body["temperature"], body["top_k"], body["seed"]) == (0.2, 5, 3) and "top_p" not in body
    assert "tools" not in body and "<tools>" in body["messages"][0]["content"]


def test_openai_backend_gives_up_with_an_infra_error():
    server = ChatServer([(500, {})] * 3)
    try:
        backend = OpenAIBackend(base_url=server.url, retries=2, backoff=0.01)
        with pytest.raises(InfraError, match="failed after 3 tries"):
            backend.generate([build_prompt(context())], Sampling())
    finally:
        server.close()
    with pytest.raises(InfraError, match="HTTP 401"):
        s = ChatServer([(401, {"error": "bad key"})])
        try:
            OpenAIBackend(base_url=s.url, retries=2, backoff=0.01).generate([build_prompt(context())], Sampling())
        finally:
            s.close()
