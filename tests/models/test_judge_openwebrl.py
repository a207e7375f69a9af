"""The openwebrl-judge's interface profiles: the released judge's contract (verdict reading,
input layouts, prompt texts from a file, no call without an answer) and owrl's own."""

from __future__ import annotations

import json
from typing import Any
from pathlib import Path

import pytest

from json_server import JsonServer
from owrl_cli import owrl
from owrl_openwebrl import judge as judge_module
from owrl_openwebrl.backend import Generation
from owrl_openwebrl.judge import (DEFAULT_JUDGE_MODEL, OWRL_JUDGE_TEXTS, OpenWebRLJudge, action_history,
                                  build_official_judge_prompt, format_call, judge_texts, load_judge_prompts,
                                  parse_official_verdict)
from owrl_sdk.config import Settings
from owrl_sdk.formats.documents import load_trajectory, save_trajectory
from owrl_sdk.errors import UsageError
from owrl_sdk.types import (CallRecord, Observation, Outcome, PolicyInfo, Step, Task, ToolCall, ToolResult,
                            Trajectory, Turn)

# ------------------------------------------------------------------------ verdicts

LONG_REASONING = """The task asks for the cheapest red hat and its price.

1. The agent searched for "red hat": the results page is visible in screenshot 2.
2. It sorted by price, ascending: the sort control shows "Price: low to high".
3. The first result is a red hat at $19.99, and the answer reports $19.99.

Every requirement is met by the evidence on the screen.

SUCCESS"""

LONG_FAILURE = """Requirements: a blue scarf, size M, added to the cart.

The last screenshot shows a blue scarf in the cart, but the size selector reads "L".
The size requirement is therefore not met, even though the agent claims SUCCESS in its answer.

Verdict: NOT SUCCESS."""


@pytest.mark.parametrize("text, expected", [
    ("SUCCESS", True),
    ("NOT SUCCESS", False),
    # both labels, in either order: the failure label is tested first, so it wins
    ("The agent reached the page (a partial SUCCESS) but the final verdict is NOT SUCCESS", False),
    ("NOT SUCCESS would be wrong here; everything checks out. SUCCESS", False),
    ("I cannot tell what happened from these screenshots.", None),
    ("", None),
    (LONG_REASONING, True),
    (LONG_FAILURE, False),
    ("All constraints hold.\n\n**SUCCESS**", True),
    ("The cart is empty.\n\n## Verdict\n**NOT SUCCESS**", False),
    # the official test is case-sensitive: lowercase labels are not read
    ("The task was a success.", None),
    ("not success", None),
    # "UNSUCCESSFUL" contains the substring "SUCCESS" (UN-SUCCESS-FUL) and not "NOT SUCCESS": the official
    # substring rule reads it as a success, and owrl reads it the same way on purpose
    ("UNSUCCESSFUL", True),
    ("Verdict: NOT SUCCESS.", False),
    ("Verdict: SUCCESS.", True),
    # the failure label split by extra spacing is no longer the failure label; "SUCCESS" remains
    ("NOT  SUCCESS", True),
])
def test_official_verdict_rule(text, expected):
    assert parse_official_verdict(text) is expected


# ------------------------------------------------------------------------ a fixed trajectory

BASE = "http://127.0.0.1:1"
CLICK_RAW = ('<think>The search button is in the middle.</think>\n'
             '<tool_call>{"name": "click", "arguments": {"point_2d": [500, 300]}}</tool_call>')
UNREADABLE_RAW = "<think>Where is the box?</think>\nI will   type\n\n 'red hat'   now"
LAST_RAW = ('<think>Type the query, submit, answer.</think>\n'
            '<tool_call>{"name": "write", "arguments": {"message": "red hat"}}</tool_call>\n'
            '<tool_call>{"name": "press_keys", "arguments": {"keys": ["Enter"]}}</tool_call>\n'
            '<tool_call>{"name": "done", "arguments": {"response": "Red hat: $19.99"}}</tool_call>')
ANSWER = "Red hat: $19.99"
TASK = "Find the price of the red hat"

STEP1 = ('Step 1: action=[click({"point_2d": [500, 300]})] environment feedback=click: '
         'Succeed: `click` at (640, 300) on <button> "Search". The page navigated to http://127.0.0.1:1/results.')
STEP2 = "Step 2: action=I will type 'red hat' now"
STEP3 = ('Step 3: action=[write({"message": "red hat"}); press_keys({"keys": ["Enter"]}); '
         'done({"response": "Red hat: $19.99"})] environment feedback='
         'write: Succeed: `write` typed "red hat" into <input> type=text "Query". | '
         'press_keys: Succeed: `press_keys` ["Enter"]. The page navigated to http://127.0.0.1:1/results?q=red+hat. | '
         'done: Succeed: the task is finished. Response: Red hat: $19.99')


def element(tag, text="", label="", type_=""):
    return {"tag": tag, "type": type_, "role": "", "checked": None, "label": label, "text": text}


#: trajectory()'s default outcome: a success with ANSWER (``outcome=None`` means no outcome at all).
_SUCCESS: Any = object()


def trajectory(shots=(b"shot-1", b"shot-2", b"shot-3"), outcome: Any = _SUCCESS) -> Trajectory:
    """Three steps: a click, an unreadable answer, then write + press_keys + done. The ToolCalls
    of the records are the builtin calls the openwebrl profile converted them to."""
    traj = Trajectory(task=Task(intent=TASK, start_url=f"{BASE}/"), policy=PolicyInfo(name="openwebrl"))
    click = ToolCall(name="click", arguments={"point_2d": [500, 300]})
    traj.steps.append(Step(
        index=0, observation=Observation(url=f"{BASE}/", screenshot=shots[0]),
        turn=Turn(thought="The search button is in the middle.", raw=CLICK_RAW, calls=[click]),
        calls=[CallRecord(call=click, result=ToolResult(
            feedback="clicked", data={"point": [640, 300], "element": element("button", text="Search")},
            page={"navigated_to": f"{BASE}/results", "tabs_opened": []}))]))
    traj.steps.append(Step(
        index=1, observation=Observation(url=f"{BASE}/results", screenshot=shots[1]),
        turn=Turn(raw=UNREADABLE_RAW, parse_error="no <tool_call> block found")))
    write = ToolCall(name="write", arguments={"message": "red hat", "clear": True})
    keys = ToolCall(name="press_keys", arguments={"keys": ["Enter"], "is_hotkey": False})
    done = ToolCall(name="done", arguments={"response": ANSWER})
    traj.steps.append(Step(
        index=2, observation=Observation(url=f"{BASE}/results", screenshot=shots[2]),
        turn=Turn(thought="Type the query, submit, answer.", raw=LAST_RAW, calls=[write, keys, done]),
        calls=[CallRecord(call=write, result=ToolResult(data={
                   "element": element("input", label="Query", type_="text"), "value": "red hat"})),
               CallRecord(call=keys, result=ToolResult(
                   page={"navigated_to": f"{BASE}/results?q=red+hat", "tabs_opened": []})),
               CallRecord(call=done, result=ToolResult(answer=ANSWER, ends_episode=True))]))
    traj.outcome = Outcome(status="success", answer=ANSWER) if outcome is _SUCCESS else outcome
    return traj


FAKE_TEXTS = {
    "system_result_only": "SYS-RO",
    "system_action_history": "SYS-AH",
    "user_result_only": "T={task} A={answer} N={num}",
    "user_action_history": "T={task} H={action_history} A={answer} N={num}",
    "verdict_cue": "CUE",
    "screenshot_label": "SHOT i={index} s={step}",
}


@pytest.fixture
def prompt_file(tmp_path) -> Path:
    path = tmp_path / "judge_prompts.json"
    path.write_text(json.dumps(FAKE_TEXTS), encoding="utf-8")
    return path


class Backend:
    """Records what it was asked and answers with ``text``."""

    def __init__(self, text="SUCCESS"):
        self.text = text
        self.calls = []

    def generate(self, prompts, sampling):
        self.calls.append((prompts, sampling))
        return [Generation(text=self.text, prompt_tokens=11, completion_tokens=3, seconds=0.0)]


class NoBackend:
    def generate(self, prompts, sampling):
        raise AssertionError("the judge must not be called")


def openwebrl_judge(backend=None, **options):
    return OpenWebRLJudge(Settings(), backend=backend or Backend(), **options)


def text_parts(parts):
    return [p["text"] if p["type"] == "text" else ("IMAGE", p["image"]) for p in parts]


# ------------------------------------------------------------------------ layouts (golden)


def test_action_history_lines():
    assert action_history(trajectory(), (1280, 1000)) == "\n".join([STEP1, STEP2, STEP3])
    assert format_call(ToolCall(name="go_back")) == "go_back()"
    assert format_call(ToolCall(name="write", arguments={"message": "héllo", "b": 1})) == 'write({"b": 1, "message": "héllo"})'


def test_action_history_bounds_feedback_and_quotes_unreadable_answers_as_the_official_history():
    """Feedback is cut at ``feedback_chars``. An answer with no usable call is quoted as the
    official history quotes it: the calls it can still read there (a block that is not JSON
    leaves the calls written out in the text), else its whole text without reasoning blocks,
    tags and written-out calls."""
    traj = trajectory()
    traj.steps[1].turn.raw = "reasoning the template opened</think> " + "x" * 400
    lines = action_history(traj, (1280, 1000), feedback_chars=20).split("\n")
    assert lines[0] == 'Step 1: action=[click({"point_2d": [500, 300]})] environment feedback=click: Succeed: `click` at '
    assert lines[1] == "Step 2: action=reasoning the template opened " + "x" * 400  # a lone closing tag keeps its text
    assert lines[2].endswith(" environment feedback=write: Succeed: `write` typ | press_keys: Succeed: `press_keys"
                             " | done: Succeed: the task is")
    traj.steps[1].turn.raw = '<think>plan</think> Again. <tool_call> {"name": "click", "arguments": {"a": 1}} oops </tool_call>'
    assert action_history(traj, (1280, 1000)).split("\n")[1] == 'Step 2: action=[click({"a": 1})]'
    traj.steps[1].turn.raw = 'Again. <tool_call> {"name": "click", "arguments": {"a": 1} </tool_call>'  # never closed
    assert action_history(traj, (1280, 1000)).split("\n")[1] == 'Step 2: action=Again. {"name": "click", "arguments": {"a": 1}'
    traj.steps[1].turn.raw = "<think>plan</think> I give up. <tool_call> not json </tool_call><|im_end|>"
    assert action_history(traj, (1280, 1000)).split("\n")[1] == "Step 2: action=I give up. not json"


def test_action_history_quotes_the_official_lines_the_policy_was_told():
    """With the policy's fetched templates the history quotes the lines the policy read, cut by
    the official rule (head, marker, tail) at ``feedback_chars``."""
    import json as _json

    from openwebrl_fake_sources import FAKE_FEEDBACK, FAKE_LOOP, FAKE_WEB_ENV
    from owrl_openwebrl import official

    templates = _json.loads(_json.dumps(official.extract_templates(FAKE_WEB_ENV, FAKE_LOOP, FAKE_FEEDBACK)[0]))
    lines = action_history(trajectory(), (1280, 1000), feedback_chars=40, templates=templates).split("\n")
    assert lines[0].startswith('Step 1: action=[click({"point_2d": [500, 300]})] environment feedback=click: FAKE-OK click')
    assert all("Succeed:" not in line for line in lines)  # owrl's own words are not what the policy read
    assert any("<<cut " in line for line in lines)  # a long line, cut by the fetched rule


def test_action_history_without_readable_steps():
    traj = trajectory()
    traj.steps = [Step(index=0, observation=Observation(), turn=Turn(end="gave up"))]
    text = action_history(traj, (1280, 1000))
    assert "Step" not in text and "no action" in text.lower()


async def test_action_history_layout_golden(prompt_file):
    backend = Backend("Everything holds.\nSUCCESS")
    judge = openwebrl_judge(backend, judge_prompt_file=str(prompt_file))
    j = await judge.judge(trajectory())
    (prompt,), sampling = backend.calls[0]
    assert [m["role"] for m in prompt.messages] == ["system", "user"]
    assert prompt.messages[0]["content"] == [{"type": "text", "text": "SYS-AH"}]
    assert text_parts(prompt.messages[1]["content"]) == [
        f"T={TASK} H={STEP1}\n{STEP2}\n{STEP3} A={ANSWER} N=3",
        "SHOT i=1 s=1", ("IMAGE", b"shot-1"),
        "SHOT i=2 s=2", ("IMAGE", b"shot-2"),
        "SHOT i=3 s=3", ("IMAGE", b"shot-3"),
        "CUE"]
    assert prompt.tools == []
    assert (j.success, j.score) == (True, 1.0)
    assert j.details["profile"] == "openwebrl" and j.details["layout"] == "action_history"
    assert j.details["warnings"] == [] and j.details["raw"] == "Everything holds.\nSUCCESS"


async def test_result_only_layout_golden(prompt_file):
    backend = Backend("The cart is empty. NOT SUCCESS")
    judge = openwebrl_judge(backend, judge_prompt_file=str(prompt_file), layout="result_only", screenshots=2)
    j = await judge.judge(trajectory())
    (prompt,), _ = backend.calls[0]
    assert [m["role"] for m in prompt.messages] == ["system", "user"]
    assert prompt.messages[0]["content"] == [{"type": "text", "text": "SYS-RO"}]
    assert text_parts(prompt.messages[1]["content"]) == [
        f"T={TASK} A={ANSWER} N=2", ("IMAGE", b"shot-2"), ("IMAGE", b"shot-3"), "CUE"]
    assert (j.success, j.score) == (False, 0.0) and j.details["layout"] == "result_only"


def test_labels_carry_the_step_of_each_screenshot(tmp_path):
    traj = trajectory(shots=(b"shot-1", None, None))
    (tmp_path / "screenshots").mkdir()
    (tmp_path / "screenshots" / "0002.jpg").write_bytes(b"file-3")
    traj.steps[2].observation.screenshot_file = "screenshots/0002.jpg"
    prompt = build_official_judge_prompt(traj, FAKE_TEXTS, run_dir=tmp_path, screenshots=3)
    parts = text_parts(prompt.messages[1]["content"])
    assert parts[0].endswith(" N=2")
    assert parts[1:] == ["SHOT i=1 s=1", ("IMAGE", b"shot-1"), "SHOT i=2 s=3", ("IMAGE", b"file-3"), "CUE"]
    none = build_official_judge_prompt(traj, FAKE_TEXTS, run_dir=tmp_path, screenshots=0)
    assert text_parts(none.messages[1]["content"])[1:] == ["CUE"] and not none.images()


# ------------------------------------------------------------------------ prompt texts


async def test_without_a_prompt_file_owrl_wording_stands_in(tmp_path, monkeypatch):
    monkeypatch.setenv("OWRL_CACHE_DIR", str(tmp_path / "empty-cache"))
    backend = Backend("SUCCESS")
    j = await openwebrl_judge(backend).judge(trajectory())
    (prompt,), _ = backend.calls[0]
    system = prompt.messages[0]["content"][0]["text"]
    parts = prompt.messages[1]["content"]
    assert system == OWRL_JUDGE_TEXTS["system_action_history"]
    assert "SUCCESS" in system and "NOT SUCCESS" in system
    assert parts[0]["text"].startswith(f"Task: {TASK}\n") and STEP3 in parts[0]["text"] and ANSWER in parts[0]["text"]
    assert parts[1]["text"] == "Screenshot 1, taken at step 1:" and parts[-1]["text"] == OWRL_JUDGE_TEXTS["verdict_cue"]
    assert j.details["warnings"] and "approximate" in j.details["warnings"][0]
    assert "owrl model fetch openwebrl-judge" in j.details["warnings"][0] and "judge_prompt_file" in j.details["warnings"][0]
    assert j.details["prompt_file"] is None


def test_the_fetched_prompt_file_is_found_in_the_cache(tmp_path, monkeypatch, prompt_file):
    folder = tmp_path / "cache" / "models" / "openwebrl-judge" / "interface"
    folder.mkdir(parents=True)
    (folder / "judge_prompts.json").write_text(prompt_file.read_text())
    monkeypatch.setenv("OWRL_CACHE_DIR", str(tmp_path / "cache"))
    judge = openwebrl_judge()
    assert judge.warnings == [] and judge.texts["system_action_history"] == "SYS-AH"
    # the option wins over the cache
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**FAKE_TEXTS, "verdict_cue": "OTHER"}))
    assert openwebrl_judge(judge_prompt_file=str(other)).texts["verdict_cue"] == "OTHER"


def test_missing_keys_fall_back_one_by_one(tmp_path):
    path = tmp_path / "partial.json"
    path.write_text(json.dumps({"system_action_history": "SYS-AH", "user_action_history": "H={action_history}"}))
    texts, warnings = judge_texts(path, "action_history")
    assert texts["system_action_history"] == "SYS-AH" and texts["user_action_history"] == "H={action_history}"
    assert texts["verdict_cue"] == OWRL_JUDGE_TEXTS["verdict_cue"]
    assert texts["screenshot_label"] == OWRL_JUDGE_TEXTS["screenshot_label"]
    assert len(warnings) == 1 and "verdict_cue" in warnings[0] and "screenshot_label" in warnings[0]
    assert "system_action_history" not in warnings[0]
    # a complete file for the layout in use needs nothing more
    assert judge_texts(path, "action_history")[1] and not judge_texts(
        _write(tmp_path / "full.json", FAKE_TEXTS), "result_only")[1]


def _write(path: Path, data) -> Path:
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


@pytest.mark.parametrize("content, match", [
    ("{not json", "cannot read the judge prompt file"),
    ('["a", "b"]', "not a JSON object"),
    ('{"verdict_cue": 3}', "verdict_cue must be text"),
])
def test_a_bad_prompt_file_is_a_usage_error(tmp_path, content, match):
    path = _write(tmp_path / "bad.json", content)
    with pytest.raises(UsageError, match=match):
        load_judge_prompts(path)
    with pytest.raises(UsageError, match=match):
        openwebrl_judge(judge_prompt_file=str(path))
    with pytest.raises(UsageError, match="cannot read"):
        openwebrl_judge(judge_prompt_file=str(tmp_path / "absent.json"))


def test_a_bad_format_field_is_a_usage_error():
    with pytest.raises(UsageError, match="user_result_only"):
        build_official_judge_prompt(trajectory(), {**FAKE_TEXTS, "user_result_only": "{question}"}, layout="result_only")


def test_unknown_layout_is_a_usage_error():
    with pytest.raises(UsageError, match="layout"):
        openwebrl_judge(layout="everything")


# ------------------------------------------------------------------------ no answer, no call


@pytest.mark.parametrize("outcome", [
    None,
    Outcome(status="fail", answer=ANSWER),
    Outcome(status="aborted"),
    Outcome(status="success", answer=None),
    Outcome(status="success", answer="  \n "),
])
async def test_no_final_answer_is_a_failure_without_a_call(prompt_file, outcome):
    j = await openwebrl_judge(NoBackend(), judge_prompt_file=str(prompt_file)).judge(trajectory(outcome=outcome))
    assert (j.success, j.score) == (False, 0.0)
    assert "no final answer" in j.reason and "not called" in j.reason
    assert j.details["called"] is False and j.details["profile"] == "openwebrl"


async def test_an_output_with_neither_label_is_unreadable(prompt_file):
    j = await openwebrl_judge(Backend("The agent seems to have done well."),
                              judge_prompt_file=str(prompt_file)).judge(trajectory())
    assert j.success is None and j.score == 0.0
    assert "neither" in j.reason and "SUCCESS" in j.reason


# ------------------------------------------------------------------------ profiles and sampling


def test_profile_choice(prompt_file):
    conf = {"judge_prompt_file": str(prompt_file)}
    assert OpenWebRLJudge(Settings(plugins={"openwebrl-judge": conf}), backend=Backend()).profile == "openwebrl"
    assert OpenWebRLJudge(Settings(), backend=Backend(), model="some/other-judge").profile == "owrl"
    # the global setting beats the model's name; the judge's own option beats both
    assert OpenWebRLJudge(Settings(profile="owrl"), backend=Backend()).profile == "owrl"
    both = Settings(profile="owrl", plugins={"openwebrl-judge": {**conf, "profile": "openwebrl"}})
    assert OpenWebRLJudge(both, backend=Backend(), model="some/other-judge").profile == "openwebrl"
    with pytest.raises(UsageError, match="unknown interface profile"):
        OpenWebRLJudge(Settings(), backend=Backend(), profile="qwen")


def test_sampling_defaults_by_profile(prompt_file):
    official = openwebrl_judge(judge_prompt_file=str(prompt_file))
    assert (official.sampling.temperature, official.sampling.max_new_tokens) == (0.0, 2048)
    owrl_profile = OpenWebRLJudge(Settings(), backend=Backend(), profile="owrl")
    assert (owrl_profile.sampling.temperature, owrl_profile.sampling.max_new_tokens) == (0.0, 1024)
    tuned = openwebrl_judge(judge_prompt_file=str(prompt_file), temperature=0.3, max_new_tokens=64)
    assert (tuned.sampling.temperature, tuned.sampling.max_new_tokens) == (0.3, 64)


async def test_sampling_reaches_the_backend(prompt_file):
    backend = Backend("SUCCESS")
    await openwebrl_judge(backend, judge_prompt_file=str(prompt_file)).judge(trajectory())
    _, sampling = backend.calls[0]
    assert (sampling.temperature, sampling.max_new_tokens) == (0.0, 2048)


async def test_owrl_profile_keeps_its_verdict_block():
    backend = Backend('Constraints hold. SUCCESS\n<verdict>{"success": false, "score": 0.3, "reason": "wrong size"}</verdict>')
    judge = OpenWebRLJudge(Settings(), backend=backend, profile="owrl")
    j = await judge.judge(trajectory(outcome=None))  # the owrl judge reads trajectories without an answer too
    (prompt,), sampling = backend.calls[0]
    assert "<verdict>" in prompt.messages[0]["content"][0]["text"]
    assert prompt.messages[1]["content"][0]["text"].startswith(f"Task: {TASK}\nStart: {BASE}/")
    assert (j.success, j.score, j.reason) == (False, 0.3, "wrong size")
    assert j.details["profile"] == "owrl" and "warnings" not in j.details


def test_fetched_weights_are_preferred_for_the_default_model(prompt_file, monkeypatch, tmp_path):
    from owrl_openwebrl import fetch, policy

    loaded = []
    monkeypatch.setattr(policy, "shared_backend", lambda model_id, quantize="auto": loaded.append(model_id) or "B")
    monkeypatch.setattr(fetch, "fetched_weights", lambda key: tmp_path / key if key == "openwebrl-judge" else None,
                        raising=False)
    assert OpenWebRLJudge(Settings(), judge_prompt_file=str(prompt_file)).backend == "B"
    assert OpenWebRLJudge(Settings(), model="my/judge").backend == "B"
    assert loaded == [str(tmp_path / "openwebrl-judge"), "my/judge"]
    monkeypatch.setattr(fetch, "fetched_weights", lambda key: None, raising=False)
    judge = OpenWebRLJudge(Settings(), judge_prompt_file=str(prompt_file))
    _ = judge.backend
    assert loaded[-1] == DEFAULT_JUDGE_MODEL


def test_module_keeps_no_official_text():
    # owrl's wording only: the fallback texts are the ones written in this module
    assert set(OWRL_JUDGE_TEXTS) == set(judge_module.PROMPT_KEYS)


# ------------------------------------------------------------------------ the CLI, end to end


def completion(text):
    return {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 900, "completion_tokens": 40}}


def test_owrl_judge_cli_against_a_local_endpoint(tmp_path):
    run = tmp_path / "runs" / "r1"
    (run / "screenshots").mkdir(parents=True)
    traj = trajectory()
    for step in traj.steps:  # on disk a screenshot is a file of the run folder
        name = f"screenshots/{step.index:04d}.jpg"
        (run / name).write_bytes(step.observation.screenshot)
        step.observation.screenshot_file = name
    save_trajectory(traj, run / "trajectory.json")

    replies = [(200, completion("The price on the page is $24.99, not $19.99.\n\nNOT SUCCESS")),
               (200, completion("The answer matches the results page.\n\nSUCCESS"))]
    server = JsonServer(lambda path, headers, body: replies.pop(0))
    work = tmp_path / "work"
    work.mkdir()
    (work / "owrl.toml").write_text(f'[plugins.openwebrl-judge]\nbackend = "openai"\nbase_url = "{server.url}"\n')
    env = {"OWRL_CACHE_DIR": str(tmp_path / "cache"), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    try:
        first = owrl("judge", str(run), "--json", cwd=work, env=env, timeout=120)
        # then with the official texts in the cache, where `owrl model fetch openwebrl-judge` puts them
        interface = tmp_path / "cache" / "models" / "openwebrl-judge" / "interface"
        interface.mkdir(parents=True)
        (interface / "judge_prompts.json").write_text(json.dumps(FAKE_TEXTS))
        second = owrl("judge", str(run), "--json", cwd=work, env=env, timeout=120)
    finally:
        server.close()
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    a, b = json.loads(first.stdout), json.loads(second.stdout)
    assert (a["judge"], a["success"], a["score"]) == ("openwebrl-judge", False, 0.0)
    assert a["details"]["profile"] == "openwebrl" and a["details"]["warnings"] and "raw" not in a["details"]
    assert (b["success"], b["score"]) == (True, 1.0) and b["details"]["warnings"] == []

    assert len(server.requests) == 2
    path, _, body = server.requests[1]
    assert path == "/v1/chat/completions"
    assert body["model"] == DEFAULT_JUDGE_MODEL and body["temperature"] == 0.0 and body["max_tokens"] == 2048
    system, user = body["messages"]
    assert system == {"role": "system", "content": "SYS-AH"}
    kinds = [p["type"] for p in user["content"]]
    assert kinds == ["text", "text", "image_url", "text", "image_url", "text", "image_url", "text"]
    assert user["content"][0]["text"] == f"T={TASK} H={STEP1}\n{STEP2}\n{STEP3} A={ANSWER} N=3"
    assert [user["content"][i]["text"] for i in (1, 3, 5, 7)] == ["SHOT i=1 s=1", "SHOT i=2 s=2", "SHOT i=3 s=3", "CUE"]
    assert user["content"][6]["image_url"]["url"] == "data:image/jpeg;base64,c2hvdC0z"  # b"shot-3"

    saved = load_trajectory(run)
    assert [(j.judge, j.success) for j in saved.judgements] == [("openwebrl-judge", False), ("openwebrl-judge", True)]
