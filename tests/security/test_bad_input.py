"""Hostile or broken input handed to the CLI: every case ends in one ``Error:`` line and exit 2.

Files that are not UTF-8, JSON nested deep enough to exhaust Python's recursion, flows that
name tools owrl does not have, start addresses that are not addresses, and folders given
where a file belongs. None of them may reach a traceback, and none may start a browser.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from owrl_cli import owrl
from security_support import attack

#: Bytes that cannot be UTF-8: a Latin-1 "é" and a lone continuation byte.
NOT_UTF8 = b'{"task": "caf\xe9 \x80"}\n'
#: 100000 nested lists: json, YAML and TOML parsers all recurse once per level.
DEEP = "[" * 100_000 + "]" * 100_000


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def assert_one_error(result, starts: str, contains: str = "") -> str:
    """Exit 2, no traceback, and stderr's one non-empty line is the ``Error:`` line expected."""
    out = lines(result.stderr)
    assert result.returncode == 2, (result.returncode, result.stderr[-3000:])
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert len(out) == 1, result.stderr
    assert out[0].startswith(starts), out[0]
    assert contains in out[0], out[0]
    return out[0]


def good_trajectory() -> dict:
    return {"schema": "owrl.trajectory/1",
            "task": {"id": "t1", "intent": "Say hi.", "start_url": "https://example.com/"},
            "policy": {"name": "scripted"}, "steps": []}


# ------------------------------------------------------------------ 10: non-UTF-8 and deep documents


@pytest.mark.parametrize("name", ["flow.json", "flow.yaml"])
def test_run_flow_not_utf8(tmp_path, name):
    (tmp_path / name).write_bytes(NOT_UTF8)
    with attack("bad input", f"non-UTF-8 flow file ({name})", "one-line error, exit 2"):
        result = owrl("run", "--flow", name, cwd=tmp_path)
        assert_one_error(result, f"Error: {name}: ", "UTF-8")


@pytest.mark.parametrize("name", ["flow.json", "flow.yaml"])
def test_run_flow_nested_too_deep(tmp_path, name):
    (tmp_path / name).write_text(DEEP)
    with attack("bad input", f"flow nested 100000 levels deep ({name})", "one-line error, exit 2"):
        result = owrl("run", "--flow", name, cwd=tmp_path)
        assert_one_error(result, f"Error: {name}: ", "nested too deeply")


def test_run_replay_not_utf8_and_deep(tmp_path):
    (tmp_path / "bad.json").write_bytes(NOT_UTF8)
    (tmp_path / "deep.json").write_text(DEEP)
    with attack("bad input", "non-UTF-8 trajectory to owrl run --replay", "one-line error, exit 2"):
        assert_one_error(owrl("run", "--replay", "bad.json", cwd=tmp_path), "Error: bad.json: ", "UTF-8")
    with attack("bad input", "deeply nested trajectory to owrl run --replay", "one-line error, exit 2"):
        assert_one_error(owrl("run", "--replay", "deep.json", cwd=tmp_path), "Error: deep.json: ",
                         "nested too deeply")


def test_judge_not_utf8_and_deep(tmp_path):
    (tmp_path / "bad.json").write_bytes(NOT_UTF8)
    (tmp_path / "deep.json").write_text(DEEP)
    with attack("bad input", "non-UTF-8 trajectory to owrl judge", "one-line error, exit 2"):
        assert_one_error(owrl("judge", "bad.json", "--judge", "rule", cwd=tmp_path), "Error: bad.json: ", "UTF-8")
    with attack("bad input", "deeply nested trajectory to owrl judge", "one-line error, exit 2"):
        assert_one_error(owrl("judge", "deep.json", "--judge", "rule", cwd=tmp_path), "Error: deep.json: ",
                         "nested too deeply")


def test_report_run_folder_not_utf8_and_deep(tmp_path):
    bad, deep = tmp_path / "bad-run", tmp_path / "deep-run"
    bad.mkdir()
    deep.mkdir()
    (bad / "trajectory.json").write_bytes(NOT_UTF8)
    (deep / "trajectory.json").write_text(DEEP)
    with attack("bad input", "non-UTF-8 trajectory.json to owrl report", "one-line error, exit 2"):
        assert_one_error(owrl("report", "bad-run", cwd=tmp_path), "Error: bad-run/trajectory.json: ", "UTF-8")
    with attack("bad input", "deeply nested trajectory.json to owrl report", "one-line error, exit 2"):
        assert_one_error(owrl("report", "deep-run", cwd=tmp_path), "Error: deep-run/trajectory.json: ",
                         "nested too deeply")


def test_report_eval_folder_not_utf8_and_deep(tmp_path):
    bad, deep = tmp_path / "bad-eval", tmp_path / "deep-eval"
    bad.mkdir()
    deep.mkdir()
    (bad / "episodes.jsonl").write_bytes(NOT_UTF8)
    (deep / "episodes.jsonl").write_text("")
    (deep / "summary.json").write_text(DEEP)
    with attack("bad input", "non-UTF-8 episodes.jsonl to owrl report", "one-line error, exit 2"):
        assert_one_error(owrl("report", "bad-eval", cwd=tmp_path), "Error: bad-eval/episodes.jsonl: ", "UTF-8")
    with attack("bad input", "deeply nested summary.json to owrl report", "one-line error, exit 2"):
        assert_one_error(owrl("report", "deep-eval", cwd=tmp_path), "Error: deep-eval/summary.json: ",
                         "nested too deeply")


def test_eval_suite_not_utf8_and_deep(tmp_path):
    (tmp_path / "bad.jsonl").write_bytes(NOT_UTF8)
    (tmp_path / "deep.json").write_text(DEEP)
    (tmp_path / "deep.jsonl").write_text('{"intent": ' + DEEP + "}\n")
    with attack("bad input", "non-UTF-8 task file to owrl eval --suite", "one-line error, exit 2"):
        assert_one_error(owrl("eval", "--suite", "bad.jsonl", cwd=tmp_path), "Error: bad.jsonl: ", "UTF-8")
    with attack("bad input", "deeply nested JSON array to owrl eval --suite", "one-line error, exit 2"):
        assert_one_error(owrl("eval", "--suite", "deep.json", cwd=tmp_path), "Error: deep.json: ",
                         "nested too deeply")
    with attack("bad input", "deeply nested JSONL record to owrl eval --suite", "record skipped, then exit 2"):
        result = owrl("eval", "--suite", "deep.jsonl", cwd=tmp_path)
        assert result.returncode == 2, result.stderr[-3000:]
        assert "Traceback" not in result.stderr, result.stderr[-3000:]
        out = lines(result.stderr)
        assert out[-1] == "Error: deep.jsonl: no readable task", result.stderr
        assert "line 1" in result.stderr and "nested too deeply" in result.stderr, result.stderr


@pytest.mark.parametrize("content,what", [(b'max_steps = "caf\xe9"\n', "UTF-8"),
                                          (("a = " + DEEP + "\n").encode(), "nested too deeply")])
def test_owrl_toml_not_utf8_and_deep(tmp_path, content, what):
    (tmp_path / "owrl.toml").write_bytes(content)
    label = {"UTF-8": "not UTF-8"}.get(what, what)
    with attack("bad input", f"owrl.toml {label}", "one-line error, exit 2"):
        result = owrl("run", "--task", "Say hi.", "--url", "https://example.com/", cwd=tmp_path,
                      env={"XDG_CONFIG_HOME": str(tmp_path / "no-config")})
        assert_one_error(result, f"Error: {tmp_path / 'owrl.toml'}: ", what)


# ------------------------------------------------------------------ 11: flows checked against the tools


def write_flow(folder: Path, turns: list) -> None:
    (folder / "flow.json").write_text(json.dumps({"schema": "owrl.flow/1", "task": "Buy a shirt.",
                                                  "start_url": "https://example.com/", "turns": turns}))


def fails_fast(folder: Path, expected: str) -> None:
    started = time.perf_counter()
    result = owrl("run", "--flow", "flow.json", cwd=folder)
    elapsed = time.perf_counter() - started
    line = assert_one_error(result, "Error: flow.json: ")
    assert line == expected, line
    assert not (folder / "runs").exists(), "a run folder was written: the episode started"
    assert elapsed < 8, f"took {elapsed:.1f}s: a browser was started"


def test_flow_with_unknown_tool_fails_before_the_browser(tmp_path):
    write_flow(tmp_path, [{"calls": [{"name": "goto_url", "arguments": {"url": "https://example.com/"}}]},
                          {"calls": [{"name": "clik", "arguments": {"ref": "e1"}}]}])
    from owrl_sdk.contract.plugins import Plugins

    tools = ", ".join(sorted(Plugins().catalogue.items["tools"]))
    with attack("bad input", "flow naming an unknown tool", "checked before the browser starts, exit 2"):
        fails_fast(tmp_path, f"Error: flow.json: turn 2, call 1: unknown tool 'clik' (tools: {tools})")


def test_flow_with_wrong_argument_types_fails_before_the_browser(tmp_path):
    # the placeholders in the first calls pass: only the badly typed third call is reported
    write_flow(tmp_path, [{"calls": [
        {"name": "goto_url", "arguments": {"url": "{{input:start}}"}},
        {"name": "write", "arguments": {"message": "{{secret:PASSWORD}}", "ref": "e3"}},
        {"name": "click", "arguments": {"ref": "e4", "clicks": "twice"}},
    ]}])
    with attack("bad input", "flow giving a tool arguments of the wrong type", "checked before the browser starts, exit 2"):
        fails_fast(tmp_path, "Error: flow.json: turn 1, call 3: bad arguments for click: 'clicks' Input should be "
                             "a valid integer, unable to parse string as an integer. Arguments it takes: "
                             "point_2d, ref, selector, clicks, button.")


def test_flow_check_lets_placeholders_through():
    from owrl_sdk.formats.documents import Flow, check_flow_tools
    from owrl_sdk.errors import DocumentError
    from owrl_sdk.contract.plugins import Plugins

    tools = Plugins().catalogue.items["tools"]
    flow = Flow.model_validate({"turns": [
        {"calls": [{"name": "goto_url", "arguments": {"url": "{{input:start_url}}"}},
                   {"name": "write", "arguments": {"message": "{{secret:PASSWORD}}", "selector": "#pw"}}]},
        # a key name known only once the input is filled in: press_keys checks names, so it is let through
        {"calls": [{"name": "press_keys", "arguments": {"keys": ["ctrl", "{{input:key}}"]}}]},
        {"calls": [{"name": "done", "arguments": {"response": "{{input:answer}} done"}}]},
    ]})
    with attack("bad input", "placeholders in a flow's string arguments", "not taken for bad arguments"):
        check_flow_tools(flow, tools, "flow.json")  # raises nothing
    # a misspelt argument stays wrong whatever its value holds
    typo = Flow.model_validate({"turns": [{"calls": [
        {"name": "write", "arguments": {"mesage": "{{secret:PASSWORD}}", "selector": "#pw"}}]}]})
    with pytest.raises(DocumentError, match=r"^flow\.json: turn 1, call 1: bad arguments for write: .*'mesage' is not an argument"):
        check_flow_tools(typo, tools, "flow.json")


# ------------------------------------------------------------------ 12: --url


@pytest.mark.parametrize("url", ["ht!tp://[[", "http://[[", "http://", "https://exa mple.com/", "http://host:99999/"])
def test_malformed_url_is_a_user_error(tmp_path, url):
    write_flow(tmp_path, [{"calls": [{"name": "done", "arguments": {"response": "hi"}}]}])
    with attack("bad input", f"malformed --url {url!r}", "one-line user error, exit 2 (not infra 3)"):
        result = owrl("run", "--flow", "flow.json", "--url", url, cwd=tmp_path)
        assert_one_error(result, "Error: ", "--url")
        assert not (tmp_path / "runs").exists()


def test_url_without_scheme_says_https_was_added(tmp_path):
    # OWRL_MAX_STEPS=0 stops the run at the settings, right after the address is read: no browser
    result = owrl("run", "--task", "Say hi.", "--url", "example.com", cwd=tmp_path, env={"OWRL_MAX_STEPS": "0"})
    out = lines(result.stderr)
    assert result.returncode == 2, result.stderr
    assert out[0] == "note: no scheme given: using https://example.com", result.stderr
    assert out[1].startswith("Error: setting 'max_steps'"), result.stderr


# ------------------------------------------------------------------ 13: file arguments


def test_folder_as_flow_is_one_line(tmp_path):
    (tmp_path / "flows").mkdir()
    with attack("bad input", "a folder given as --flow", "one-line error, exit 2"):
        line = assert_one_error(owrl("run", "--flow", "flows/", cwd=tmp_path), "Error: ")
        assert line == "Error: flows/: is a folder, not a flow file"


def test_owrl_file_arguments_are_one_line(tmp_path):
    (tmp_path / "notes.txt").write_text("hi")
    (tmp_path / "folder").mkdir()
    with attack("bad input", "missing or wrong-kind paths to judge/report/run", "one-line error, exit 2"):
        assert assert_one_error(owrl("judge", "missing.json", cwd=tmp_path), "Error: ") == \
            "Error: missing.json: no such file or folder"
        assert assert_one_error(owrl("report", "missing", cwd=tmp_path), "Error: ") == \
            "Error: missing: no such folder"
        assert assert_one_error(owrl("report", "notes.txt", cwd=tmp_path), "Error: ") == \
            "Error: notes.txt: is a file, not a run, evaluation or batch folder"
        assert assert_one_error(owrl("report", "folder", "--out", "folder", cwd=tmp_path), "Error: ") == \
            "Error: folder: is a folder, not a report file"
        assert assert_one_error(owrl("run", "--task", "x", "--url", "https://example.com/", "--out", "notes.txt",
                                     cwd=tmp_path), "Error: ") == \
            "Error: notes.txt: is a file, not a folder for run folders"


def test_unknown_option_keeps_clicks_usage_block(tmp_path):
    result = owrl("run", "--no-such-option", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("Usage: owrl run [OPTIONS]"), result.stderr
    assert "No such option" in result.stderr and "--no-such-option" in result.stderr
