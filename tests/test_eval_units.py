"""Task files, answer matching, judges and the summary arithmetic (no browser needed)."""

from __future__ import annotations

import json

import pytest

from builtin_judges.rules import BenchmarkJudge, CompositeJudge, RuleJudge
from owrl_sdk.support.answers import match_answer
from owrl_sdk.scheduling.evaluation import EpisodeRecord, summarise, wilson
from owrl_sdk.formats.taskfiles import load_tasks
from owrl_sdk.types import Observation, Outcome, PolicyInfo, Step, Task, Trajectory, Turn


def test_task_file_formats_and_bad_lines(tmp_path):
    lines = [
        json.dumps({"id": "a", "intent": "buy", "start_url": "http://127.0.0.1/", "answer": "3", "answer_match": "number"}),
        "{broken",
        json.dumps({"task_id": "m1", "confirmed_task": "Find a flight", "website": "https://www.united.com/", "level": "hard",
                    "reference_length": 9}),
        json.dumps({"web_name": "Allrecipes", "id": "Allrecipes--0", "ques": "Find a recipe", "web": "https://www.allrecipes.com/"}),
        json.dumps({"id": "ds-1", "ques": "Find a laptop under $500", "web": "https://www.amazon.com", "attribute": "price"}),
        json.dumps({"intent": "no url"}),
        json.dumps({"id": "a", "intent": "dup", "start_url": "http://x/"}),
        json.dumps([1, 2]),
    ]
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(lines) + "\n")
    tasks, bad = load_tasks(path)
    assert [t.id for t in tasks] == ["a", "m1", "Allrecipes--0", "ds-1"]
    mind2web = tasks[1]
    assert (mind2web.intent, mind2web.difficulty, mind2web.allowed_domains) == ("Find a flight", 5, ["united.com"])
    assert tasks[2].metadata["format"] == "webvoyager" and tasks[3].metadata["format"] == "deepshop"
    assert [(b.where, b.error.split(":")[0]) for b in bad] == [
        ("line 2", "not valid JSON"), ("line 6", "start_url"), ("line 7", "duplicate task id 'a'"),
        ("line 8", "not a JSON object")]


def test_a_task_line_holding_a_line_separator_is_one_task(tmp_path):
    """U+2028 and U+0085 are raw text inside a JSON string, not line ends of a .jsonl file."""
    path = tmp_path / "tasks.jsonl"
    intents = ["Find the\u2028first flight", "Book\x85it"]
    path.write_text("".join(json.dumps({"id": f"t{i}", "intent": x, "start_url": "http://x/"}, ensure_ascii=False)
                            + "\r\n" for i, x in enumerate(intents)), encoding="utf-8")
    tasks, bad = load_tasks(path)
    assert [t.intent for t in tasks] == intents and bad == []


def test_json_array_records_are_numbered(tmp_path):
    path = tmp_path / "Online_Mind2Web.json"
    path.write_text(json.dumps([{"task_id": "1", "confirmed_task": "x", "website": "a.com"}, {"nope": 1}]))
    tasks, bad = load_tasks(path)
    assert tasks[0].start_url == "https://a.com" and bad[0].where == "record 2"


@pytest.mark.parametrize("expected, given, mode, ok", [
    ("Blue Shirt", "the blue  shirt.", "contains", True),
    ("Blue Shirt", "blue shirts", "exact", False),
    ("blue shirt", "Blue Shirt!", "exact", True),
    ("1299", "It costs $1,299.00", "number", True),
    ("12.5", "12.50 or 13", "number", True),
    ("12", "120", "number", False),
    (r"order #\d+", "Order #1042 placed", "regex", True),
    ("x", None, "contains", False),
])
def test_answer_matching(expected, given, mode, ok):
    assert match_answer(expected, given, mode) is ok


def test_wilson_interval():
    low, high = wilson(20, 20)
    assert high == 1.0 and 0.83 < low < 0.84
    assert wilson(0, 0) == (0.0, 0.0)
    low, high = wilson(5, 10)
    assert low < 0.5 < high


def test_summary_counts_infra_apart():
    def rec(tid, n, status, success):
        return EpisodeRecord(key=f"{tid}#{n}", task_id=tid, episode=n, status=status, success=success,
                             score=float(bool(success)), steps=2, seconds=1.0, failure=None, answer=None, run_dir=None)

    s = summarise([rec("a", 0, "success", True), rec("a", 1, "fail", False), rec("b", 0, "infra_error", None),
                   rec("b", 1, "success", True)])
    assert s["episodes"] == 4 and s["infra_errors"] == 1
    assert s["success_rate"] == pytest.approx(2 / 3)
    assert s["per_task"]["b"]["success_rate"] == 1.0 and s["per_task"]["b"]["infra_errors"] == 1


def traj(answer=None, status="success", parse_error=None, title="Shop", expected=None, check=None):
    t = Trajectory(task=Task(intent="x", start_url="http://127.0.0.1/", answer=expected, answer_match="number"),
                   policy=PolicyInfo(name="p"))
    t.steps.append(Step(index=0, observation=Observation(title=title), turn=Turn(parse_error=parse_error)))
    t.outcome = Outcome(status=status, answer=answer)
    if check is not None:
        t.metadata["suite_check"] = check
    return t


async def test_rule_judge(settings):
    j = RuleJudge(settings)
    assert (await j.judge(traj(answer="5", expected="5"))).success
    bad = await j.judge(traj(answer=None, expected="5"))
    assert not bad.success and "no answer given" in bad.reason
    site = await j.judge(traj(title="Access Denied"))
    assert site.success is None and site.details["site_problem"] == "blocked"
    captcha = await j.judge(traj(title="Just a moment... verify you are human"))
    assert captcha.details["site_problem"] == "captcha"


async def test_benchmark_and_composite(settings):
    b = BenchmarkJudge(settings)
    assert (await b.judge(traj(answer="It is 5 dollars", expected="5"))).success
    assert not (await b.judge(traj(answer="6", expected="5"))).success
    checked = await b.judge(traj(check={"score": 0.8, "success": True, "reason": "solved"}))
    assert checked.score == 0.8 and checked.success
    c = CompositeJudge(settings, penalty=-1.0)
    gated = await c.judge(traj(answer="5", expected="5", parse_error="bad json"))
    assert gated.score == -1.0 and gated.reason == "format failure"
    passed = await c.judge(traj(answer="5", expected="5"))
    assert passed.score == 1.0 and passed.success


def test_the_result_log_an_evaluation_and_a_batch_resume_from(tmp_path, monkeypatch):
    """One file of results by key: a torn or foreign line is skipped (its item runs again), the
    last line of a key stands, secrets never reach the disk, a durable line is fsynced."""
    import os

    from owrl_sdk.safety import secrets
    from owrl_sdk.formats.records import ResultLog, episode_log

    log = episode_log(tmp_path / "episodes.jsonl")
    assert log.records() == [] and log.pending(["a#0"]) == ["a#0"]  # no file yet
    record = EpisodeRecord(key="a#0", task_id="a", episode=0, status="fail", success=False, score=0.0, steps=1,
                           seconds=1.0, failure="policy.gave_up", answer=None, run_dir=None)
    log.append(record.__dict__)
    with log.path.open("a", encoding="utf-8") as fh:
        fh.write('[1, 2]\n{"key": "c#0"}\n"text"\n')  # a list, a record missing its fields, a string
    secret = "hunter2-correct-horse"
    monkeypatch.setattr(secrets, "_known", dict(secrets._known))  # the secret is forgotten after the test
    secrets.register(secret, "PW")
    again = log.append({**record.__dict__, "status": "success", "success": True, "answer": f"pw {secret}"})
    with log.path.open("a", encoding="utf-8") as fh:
        fh.write('{"key": "b#0", "task_id": "b", "epis')  # cut short by a crash
    assert [r.key for r in log.records()] == ["a#0", "a#0"]
    assert log.latest()["a#0"].success is True and log.pending(["a#0", "b#0", "c#0"]) == ["b#0", "c#0"]
    assert secret not in log.path.read_text(encoding="utf-8") and again.answer == log.latest()["a#0"].answer != f"pw {secret}"
    synced = []
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd))
    durable = ResultLog(tmp_path / "commits.jsonl", lambda data: data, lambda entry: str(entry["key"]), durable=True)
    durable.append({"key": 3, "call": "click"})
    assert len(synced) == 1 and durable.latest() == {"3": {"key": 3, "call": "click"}}
    log.append(record.__dict__)
    assert len(synced) == 1  # an episode's line is not fsynced
