"""Conformance of the openwebrl interface profile: the released OpenWebRL-4B's contract.

Each fact asserted here is read from the official code (docs/openwebrl-compat.md says
which file); the fixture transcript was written from those facts, not copied from it.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from openwebrl_case import RAW, context
from owrl_openwebrl.backend import Generation, restore_assistant_text
from owrl_openwebrl.parser import parse_turn
from owrl_openwebrl.profiles import (
    OPENWEBRL_TOOLS,
    OpenWebRLProfile,
    default_profile,
    restore_think,
    status_line,
    to_builtin,
)
from owrl_sdk.config import Settings
from owrl_sdk.errors import UsageError
from owrl_sdk.types import CallRecord, ToolCall, ToolResult

FIXTURE = Path(__file__).parent / "fixtures" / "openwebrl_transcript.json"


def test_three_step_transcript_matches_the_golden_fixture():
    prompt = OpenWebRLProfile(screen=(1280, 1000)).render(context(), tools_in_system=False)
    golden = json.loads(FIXTURE.read_text())
    assert prompt.text_only() == golden["messages"]
    assert [t["function"]["name"] for t in prompt.tools] == golden["tools"]
    assert prompt.keep_assistant_text


def test_transcript_layout_facts():
    """The facts behind the fixture, one by one (so a wrong fixture cannot pass unnoticed)."""
    prompt = OpenWebRLProfile(screen=(1280, 1000)).render(context(), tools_in_system=False)
    msgs = prompt.text_only()
    # system, then the request, then one assistant turn and one user turn per step; no tool role
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant", "user", "assistant", "user"]
    first = msgs[1]["content"][0]["text"]
    assert first.startswith("<user_request>\nFind a red hat under 20 dollars and open it.\n</user_request>\n\n<observation>\n")
    assert "screen size: 1280 x 1000\nCurrent tab: 0\nAvailable tabs:\n- Tab 0 (active): http://127.0.0.1:1/ - Shop" in first
    # older observations keep their text and lose the screenshot line and image
    assert "screenshot:" not in first and first.endswith("\n\n</observation>")
    # each step answers as one user turn: every call's status line, a blank line, the next observation
    step1 = msgs[3]["content"][0]["text"]
    assert step1.startswith("<tool_response>\nSucceed: `click` at (640, 120) on <input> type=search \"Search\".")
    assert step1.count("\n", 0, step1.index("\n\n<observation>")) == 2  # two calls, two lines
    assert step1.endswith("</observation>\n</tool_response>")
    # only the latest screenshot is sent, inside the last observation
    assert prompt.images() == [b"shot-3"]
    assert [p["text"] for p in msgs[-1]["content"]][1] == "<image>"
    assert msgs[-1]["content"][0]["text"].endswith("\nscreenshot:\n")
    # tab titles are cut at 50 characters
    assert "Help centre and frequently asked questions about s\n" in msgs[-1]["content"][0]["text"]
    # past reasoning is kept, and an answer that began inside <think> gets its tag back
    assert msgs[2]["content"][0]["text"].startswith("<think>\nThe search box is at the top.\n</think>")
    assert msgs[4]["content"][0]["text"] == RAW[1]


def test_declared_tools_are_the_official_names_arguments_and_defaults_in_order():
    names = [t["function"]["name"] for t in OPENWEBRL_TOOLS]
    # the official tool_list.json's order; it declares no call_user
    assert names == ["click", "write", "press_keys", "scroll", "wait", "done", "goto_url", "go_back", "drag",
                     "hover", "new_tab", "switch_tab", "close_tab"]
    params = {t["function"]["name"]: t["function"]["parameters"]["properties"] for t in OPENWEBRL_TOOLS}
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in OPENWEBRL_TOOLS}
    # a required key only where the official list has one
    assert {n for n, p in schemas.items() if "required" not in p} == {"scroll", "wait", "go_back", "new_tab",
                                                                        "close_tab"}
    assert schemas["drag"]["required"] == ["start_point_2d", "end_point_2d"]
    # hover's point is integers, the other points numbers
    assert params["hover"]["point_2d"]["items"] == {"type": "integer"}
    for name, key in (("click", "point_2d"), ("scroll", "point_2d"), ("drag", "start_point_2d")):
        assert params[name][key]["items"] == {"type": "number"}
    assert list(params["click"]) == ["point_2d", "clicks", "button"]
    assert params["click"]["clicks"]["default"] == 1 and params["click"]["button"]["default"] == "left"
    assert list(params["scroll"]) == ["direction", "amount", "point_2d"]
    assert params["scroll"]["amount"]["default"] == 0.5 and params["scroll"]["direction"]["default"] == "down"
    assert params["scroll"]["amount"]["maximum"] == 1
    assert list(params["press_keys"]) == ["keys", "is_hotkey", "presses"]
    assert params["wait"]["seconds"]["default"] == 3
    assert params["drag"]["steps"]["default"] == 10
    assert list(params["write"]) == ["message"] and list(params["switch_tab"]) == ["tab_index"]
    for name in ("go_back", "new_tab", "close_tab"):
        assert params[name] == {}
    # none of owrl's own additions leak into the released model's tool list
    declared = json.dumps(OPENWEBRL_TOOLS)
    for extra in ("expect", '"ref"', "selector", "select_option", "handle_dialog"):
        assert extra not in declared


@pytest.mark.parametrize("call, builtin", [
    ({"name": "scroll", "arguments": {"direction": "down", "amount": 0.5}},
     {"name": "scroll", "arguments": {"direction": "down", "amount": 5.0, "by": "script"}}),
    ({"name": "scroll", "arguments": {}},
     {"name": "scroll", "arguments": {"direction": "down", "amount": 5.0, "by": "script"}}),
    ({"name": "scroll", "arguments": {"direction": "right", "amount": 0.25}},
     {"name": "scroll", "arguments": {"direction": "right", "amount": 3.2, "by": "script"}}),
    ({"name": "scroll", "arguments": {"direction": "up", "amount": 7, "point_2d": [500, 500]}},
     {"name": "scroll", "arguments": {"direction": "up", "amount": 10.0, "point_2d": [500, 500], "by": "script"}}),
    ({"name": "wait", "arguments": {}}, {"name": "wait", "arguments": {"seconds": 3}}),
    ({"name": "drag", "arguments": {"start_point_2d": [1, 2], "end_point_2d": [3, 4]}},
     {"name": "drag", "arguments": {"start_point_2d": [1, 2], "end_point_2d": [3, 4], "steps": 10}}),
    ({"name": "press_keys", "arguments": {"keys": ["Tab", "Enter"], "presses": 2}},
     {"name": "press_keys", "arguments": {"keys": ["Tab", "Tab", "Enter", "Enter"], "unknown": "skip",
                                          "gap_ms": 100}}),
    ({"name": "press_keys", "arguments": {"keys": ["Control", "a"], "is_hotkey": True}},
     {"name": "press_keys", "arguments": {"keys": ["Control", "a"], "is_hotkey": True, "unknown": "skip",
                                          "gap_ms": 100}}),
    ({"name": "write", "arguments": {"message": "hi"}}, {"name": "write", "arguments": {"message": "hi", "clear": True}}),
    ({"name": "click", "arguments": {"point_2d": [10, 20], "clicks": 2}},
     {"name": "click", "arguments": {"point_2d": [10, 20], "clicks": 2}}),
    ({"name": "new_tab", "arguments": {}}, {"name": "new_tab", "arguments": {}}),
])
def test_calls_map_onto_the_builtin_tools_in_owrl_units(call, builtin):
    assert to_builtin(ToolCall(**call), (1280, 1000)).model_dump(exclude_none=True) == builtin


def test_mapped_calls_validate_against_the_builtin_tools():
    from builtin_tools import TOOLS

    tools = {cls.name: cls() for cls in TOOLS}
    for raw in RAW:
        for call in parse_turn(raw).calls:
            mapped = to_builtin(call, (1280, 1000))
            tools[mapped.name].parse_args(mapped.arguments)  # raises when the mapping is wrong


def test_status_lines_carry_the_official_facts():
    ok = lambda **data: ToolResult(data=data)  # noqa: E731
    scroll = ToolCall(name="scroll", arguments={"direction": "down"})
    edge = CallRecord(call=to_builtin(scroll, (1280, 1000)), result=ok(scroll={"moved": 0, "page": True}))
    assert status_line(edge, raw=scroll) == "Succeed: `scroll` down by 50%. The page did not move: it may be at its edge."
    done = CallRecord(call=ToolCall(name="done", arguments={"response": "12 dollars"}),
                      result=ToolResult(answer="12 dollars", ends_episode=True))
    assert status_line(done) == "Succeed: the task is finished. Response: 12 dollars"
    failed = CallRecord(call=ToolCall(name="switch_tab", arguments={"tab_index": 4}),
                        result=ToolResult.failure("there is no tab 4; open tabs are 0..1"))
    assert status_line(failed) == "Failed: `switch_tab`: there is no tab 4; open tabs are 0..1"
    wait = CallRecord(call=ToolCall(name="wait", arguments={"seconds": 3}), result=ok())
    assert status_line(wait, raw=ToolCall(name="wait")) == "Succeed: waited 3 seconds."
    typed = CallRecord(call=ToolCall(name="write", arguments={"message": "abc"}), result=ok(value="abc"))
    assert "holds" not in status_line(typed)  # the field holds what was typed: nothing to say


def test_unreadable_answers_and_unattended_questions_come_back_as_failed_lines():
    from owrl_sdk.types import Observation, Step, Turn

    unreadable = Step(index=0, observation=Observation(url="u"), turn=Turn(raw="I think I should click", parse_error="no <tool_call> block found"))
    assert OpenWebRLProfile().feedback(unreadable) == ["Failed: the answer could not be read: no <tool_call> block found"]
    # runs are unattended: call_user reaches no one, and the model is told so as a failure
    asked = ToolCall(name="call_user", arguments={"question": "Which size?"})
    assert to_builtin(asked, (1280, 1000)) == asked
    record = CallRecord(call=asked, result=ToolResult.failure("unknown tool 'call_user'. Available tools: click, done."))
    assert status_line(record).startswith("Failed: `call_user`: unknown tool")


def test_restore_think_only_when_the_template_opened_the_block():
    assert restore_think("a\n</think>\n<tool_call>x</tool_call>").startswith("<think>\na\n</think>")
    assert restore_think("<think>a</think>") == "<think>a</think>"
    assert restore_think("no reasoning at all") == "no reasoning at all"


# A chat template that drops the reasoning of earlier assistant turns, as Qwen3's does.
STRIPPING_TEMPLATE = (
    "{% for m in messages %}"
    "{% if m.content is string %}{% set text = m.content %}{% else %}"
    "{% set text = m.content | map(attribute='text') | join('') %}{% endif %}"
    "<|im_start|>{{ m.role }}\n"
    "{% if m.role == 'assistant' and '</think>' in text %}{{ text.split('</think>')[-1].lstrip('\n') }}"
    "{% else %}{{ text }}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}"
)


def test_past_reasoning_survives_a_template_that_strips_it():
    from jinja2 import Template

    from owrl_openwebrl.backend import VLBackend

    prompt = OpenWebRLProfile(screen=(1280, 1000)).render(context(screens=()), tools_in_system=False)
    template = Template(STRIPPING_TEMPLATE)
    tokenizer = SimpleNamespace(chat_template=STRIPPING_TEMPLATE,
                                apply_chat_template=lambda messages, tools, tokenize, add_generation_prompt:
                                template.render(messages=messages, add_generation_prompt=add_generation_prompt))
    plain = template.render(messages=prompt.messages, add_generation_prompt=True)
    assert "The search box is at the top." not in plain  # the template alone loses it
    rendered = VLBackend.render(SimpleNamespace(tokenizer=tokenizer, kind="vl"), prompt)
    for text in ("The search box is at the top.", "Results are below the fold.", "The hat costs 12 dollars"):
        assert text in rendered
    assert rendered.count("<|im_start|>assistant\n<think>\n") == 4  # three past answers and the generation prompt
    assert rendered.endswith("<|im_start|>assistant\n<think>\n")
    # a prompt that does not ask for it is left as the template made it
    assert restore_assistant_text(plain, []) == plain


def test_profile_by_checkpoint_and_by_setting(tmp_path):
    assert default_profile("OpenWebRL/OpenWebRL-4B") == "openwebrl"
    assert default_profile("OpenWebRL/OpenWebRL-Judge-8B") == "openwebrl"
    assert default_profile("Qwen/Qwen3-VL-4B-Instruct") == "owrl"
    assert default_profile(None) == "owrl"
    ckpt = tmp_path / "my-finetune"
    ckpt.mkdir()
    assert default_profile(str(ckpt)) == "owrl"
    (ckpt / "owrl_profile.txt").write_text("openwebrl\n")
    assert default_profile(str(ckpt)) == "openwebrl"
    fetched = tmp_path / "cache" / "models" / "openwebrl"
    (fetched / "weights").mkdir(parents=True)
    (fetched / "interface").mkdir()
    assert default_profile(str(fetched / "weights")) == "owrl"
    (fetched / "interface" / "manifest.json").write_text("{}")
    assert default_profile(str(fetched / "weights")) == "openwebrl"  # what `owrl model fetch openwebrl` wrote


class Scripted:
    """A backend that answers with fixed texts and keeps the prompts it was given."""

    model_id = "OpenWebRL/OpenWebRL-4B"

    def __init__(self, answers, finish="stop"):
        self.answers = list(answers)
        self.prompts = []
        self.sampling = []
        self.finish = finish

    def generate(self, prompts, sampling):
        self.prompts.extend(prompts)
        self.sampling.append(sampling)
        return [Generation(text=self.answers.pop(0), prompt_tokens=10, completion_tokens=5, seconds=0.01,
                           finish_reason=self.finish) for _ in prompts]


def _policy(backend, tmp_path, **options):
    from owrl_openwebrl.policy import OpenWebRLPolicy

    settings = Settings()
    return OpenWebRLPolicy(settings, backend=backend, **options)


async def test_policy_in_the_openwebrl_profile(tmp_path, monkeypatch):
    monkeypatch.setenv("OWRL_CACHE_DIR", str(tmp_path / "cache"))  # nothing fetched: owrl's wording
    backend = Scripted([RAW[1]])
    policy = _policy(backend, tmp_path)
    assert policy.profile.name == "openwebrl" and policy.info().profile == "openwebrl"
    # greedy, with up to 2048 new tokens, as the official evaluation decodes
    assert policy.sampling.temperature == 0.0 and policy.sampling.max_new_tokens == 2048
    env = policy.environment()
    assert env["dialogs"] == "accept" and env["screenshot"] == "png"
    assert env["settle"] == {"network_idle_ms": 5000, "after_ms": 1000}
    # the official pauses: hover 2 s, drag and the tab tools 0.5 s, goto_url 1 s, wait only its own sleep
    assert env["waits"]["hover"] == {"after_ms": 2000} and env["waits"]["drag"] == {"after_ms": 500}
    assert {env["waits"][t]["after_ms"] for t in ("new_tab", "switch_tab", "close_tab")} == {500}
    assert env["waits"]["goto_url"] == {"after_ms": 1000} and env["waits"]["wait"] == {"after_ms": 0}
    # the official loop's rules: every call of a turn runs, no limit on repeats
    assert policy.done_ends_turn is False and policy.repeat_limit == 0
    quick = _policy(backend, tmp_path, settle="quiescence").environment()
    assert "settle" not in quick and "waits" not in quick and quick["screenshot"] == "png"
    assert any("approximate" in w and "owrl model fetch openwebrl" in w for w in policy.warnings)
    turn = await policy.act(context())
    # the model's scroll of half a screen is run as 5 units of 100 px on a 1000 px viewport, by script
    assert [c.model_dump(exclude_none=True) for c in turn.calls] == [
        {"name": "scroll", "arguments": {"direction": "down", "amount": 5.0, "by": "script"}}]
    assert turn.raw == RAW[1]


async def test_a_length_limited_answer_is_its_own_failure(tmp_path, monkeypatch, plugins):
    monkeypatch.setenv("OWRL_CACHE_DIR", str(tmp_path / "cache"))
    policy = _policy(Scripted(['<think>\nI will keep thinking and thinking'], finish="length"), tmp_path)
    turn = await policy.act(context())
    assert turn.truncated and not turn.calls and not turn.parse_error

    from fakes import FakeEnv, FakePage
    from owrl_sdk.episode.loop import Episode
    from owrl_sdk.types import Task

    task = Task(intent="find it", start_url="fake://home")
    env = FakeEnv({"fake://home": FakePage("fake://home", "Home")})
    # the answer is cut although it holds a call: the call must not run
    policy = _policy(Scripted(['<think>\nx</think><tool_call>{"name": "wait", "arguments": {}}</tool_call>'],
                              finish="length"), tmp_path)
    episode = Episode(task=task, env=env, policy=policy, memory=plugins.catalogue.get("memories", "default")(Settings()),
                      tools=list(plugins.catalogue.items["tools"].values()), hooks=plugins.for_task(task))
    traj = await episode.run()
    assert traj.outcome.status == "fail"
    assert (traj.outcome.failure.category, traj.outcome.failure.code) == ("policy", "length_limit")
    assert len(traj.steps) == 1 and traj.steps[0].turn.truncated and env.executed == []
    assert traj.policy.profile == "openwebrl"
    assert any("approximate" in w for w in traj.warnings)


async def test_the_owrl_profile_reads_what_a_cut_answer_holds(tmp_path):
    backend = Scripted(['<think>x</think><tool_call>{"name": "wait", "arguments": {}}</tool_call> and then'],
                       finish="length")
    backend.model_id = str(tmp_path / "my-model")
    turn = await _policy(backend, tmp_path).act(context())
    assert not turn.truncated and [c.name for c in turn.calls] == ["wait"]


def test_official_files_replace_owrl_wording(tmp_path, monkeypatch):
    monkeypatch.setenv("OWRL_CACHE_DIR", str(tmp_path / "cache"))
    system = tmp_path / "system.md"
    system.write_text("OFFICIAL-SYSTEM-PLACEHOLDER")
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([OPENWEBRL_TOOLS[0], OPENWEBRL_TOOLS[5]]))
    partial = _policy(Scripted([]), tmp_path, system_prompt_file=str(system), tool_list_file=str(tools))
    assert len(partial.warnings) == 1 and "status lines" in partial.warnings[0]  # the third file is missing
    from openwebrl_fake_sources import FAKE_FEEDBACK, FAKE_LOOP, FAKE_WEB_ENV
    from owrl_openwebrl.official import extract_templates

    lines = tmp_path / "status_templates.json"
    lines.write_text(json.dumps(extract_templates(FAKE_WEB_ENV, FAKE_LOOP, FAKE_FEEDBACK)[0]))
    policy = _policy(Scripted([]), tmp_path, system_prompt_file=str(system), tool_list_file=str(tools),
                     status_templates_file=str(lines))
    assert policy.warnings == []
    assert policy.profile.templates["parse_failure"] == "FAKE-COULD-NOT-READ-YOUR-CALLS."
    prompt = policy.prompt(context())
    assert prompt.messages[0]["content"][0]["text"].startswith("OFFICIAL-SYSTEM-PLACEHOLDER")
    assert [t["function"]["name"] for t in prompt.tools] == ["click", "done"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"type": "function", "function": {"name": "teleport"}}]))
    with pytest.raises(UsageError, match="teleport"):
        _policy(Scripted([]), tmp_path, tool_list_file=str(bad))


def test_the_owrl_profile_is_unchanged_for_other_checkpoints(tmp_path):
    backend = Scripted([])
    backend.model_id = str(tmp_path / "tiny-qwen3-vl")
    policy = _policy(backend, tmp_path)
    assert policy.profile.name == "owrl" and policy.environment() == {} and policy.warnings == []
    assert policy.sampling.temperature == 0.6 and policy.sampling.max_new_tokens == 512
    forced = _policy(backend, tmp_path, profile="openwebrl")
    assert forced.profile.name == "openwebrl"
    with pytest.raises(UsageError, match="unknown interface profile"):
        _policy(backend, tmp_path, profile="nonsense")


def test_an_unreadable_answer_gets_back_the_observation_it_had_been_sent():
    """The official loop answers an answer with no readable call with the observation it had
    already sent, text and screenshot; owrl's look after it (same page, nothing ran) is not used."""
    from owrl_sdk.contract.memory import Context
    from owrl_sdk.types import Observation, Step, Task, Turn

    before = Observation(url="http://s/1", screenshot=b"shot-before")
    unreadable = Step(index=0, observation=before, turn=Turn(raw="I will click", parse_error="no <tool_call> block found"))
    after = Observation(url="http://s/1", screenshot=b"shot-after")
    ctx = Context(task=Task(intent="t", start_url="http://s/1"), observation=after, tools=[], history=[unreadable],
                  screenshots=[b"shot-before", b"shot-after"])
    prompt = OpenWebRLProfile(screen=(1280, 1000), screenshots=2).render(ctx, tools_in_system=False)
    assert prompt.images() == [b"shot-before", b"shot-before"]  # the request's look, then the same again
    reply = prompt.messages[3]["content"]
    assert [p["image"] for p in reply if p.get("type") == "image"] == [b"shot-before"]
    # with one screenshot kept, that one is still the look resent
    one = OpenWebRLProfile(screen=(1280, 1000), screenshots=1).render(
        Context(task=ctx.task, observation=after, tools=[], history=[unreadable], screenshots=[b"shot-after"]),
        tools_in_system=False)
    assert one.images() == [b"shot-before"]
    # a step that no longer holds its screenshot (a history read back without images): the latest look
    bare = unreadable.model_copy(update={"observation": Observation(url="http://s/1")})
    none = OpenWebRLProfile(screen=(1280, 1000), screenshots=1).render(
        Context(task=ctx.task, observation=after, tools=[], history=[bare], screenshots=[b"shot-after"]),
        tools_in_system=False)
    assert none.images() == [b"shot-after"]
