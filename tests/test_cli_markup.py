"""Text that came from a page, a model, a user's file or an exception reaches the terminal as it
is: rich must not read "[red]" in an answer or 'role=link[name="Bag"]' in an error as markup."""

from __future__ import annotations

import json

from click.testing import CliRunner

from owrl_cli import owrl

ANSWER = "items [red] and [/] end"
SELECTOR = 'role=link[name="Cross-body Bag"]'


def write_flow(path, task: str, turns: list) -> str:
    path.write_text(json.dumps({"schema": "owrl.flow/1", "task": task, "start_url": "demo:shop/", "turns": turns}))
    return str(path)


def line_starting(text: str, head: str) -> str:
    lines = [line for line in text.splitlines() if line.startswith(head)]
    assert lines, f"no line starts with {head!r} in:\n{text}"
    return lines[-1]


def test_run_prints_the_answer_and_the_task_intact(tmp_path):
    flow = write_flow(tmp_path / "answer.json", "Say [b]hello[/b] to the shop.",
                      [{"calls": [{"name": "done", "arguments": {"response": ANSWER}}]}])
    out = owrl("run", "--flow", flow, "--out", "runs", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    # the closing line, not the step panel (which escaped already): "success · answer: ..."
    assert line_starting(out.stdout, "success") == f"success · answer: {ANSWER}"
    assert line_starting(out.stdout, "task") == "task Say [b]hello[/b] to the shop."


def test_run_prints_a_failed_calls_selector_intact(tmp_path):
    flow = write_flow(tmp_path / "fails.json", "Open the bag.",
                      [{"calls": [{"name": "click", "arguments": {"selector": SELECTOR}}]},
                       {"calls": [{"name": "done", "arguments": {"response": "never reached"}}]}])
    out = owrl("run", "--flow", flow, "--out", "runs [x]", cwd=tmp_path, env={"OWRL_ACTION_TIMEOUT": "1"})
    assert out.returncode == 1, out.stderr[-2000:]
    closing = line_starting(out.stdout, "fail")
    assert f"click on selector {SELECTOR} failed" in closing  # one line, the selector whole
    assert "run folder: " in out.stdout and "runs [x]" in line_starting(out.stdout, "run folder:")


def test_eval_prints_bracketed_names_and_errors_intact(tmp_path):
    tasks = tmp_path / "shop[b]set.jsonl"
    oracle = [{"calls": [{"name": "done", "arguments": {"response": "hi [red]"}}]}]
    tasks.write_text(json.dumps({"id": "bag[b]1", "intent": "Say [red]hi[/].", "start_url": "about:blank",
                                 "answer": "hi", "answer_match": "contains",
                                 "metadata": {"oracle_turns": oracle}}) + "\n"
                     + json.dumps({"id": "broken[i]"}) + "\n")
    out = owrl("eval", "--suite", tasks.name, "--policy", "oracle", "--out", "ev[dim]", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    # stderr: the skipped line and the progress bar's description
    assert "skipped shop[b]set.jsonl line 2" in out.stderr
    assert "shop[b]set · oracle" in out.stderr
    assert "report: ev[dim]/report.html" in out.stderr
    # stdout: the table's title and task column, and the closing line
    assert "shop[b]set · policy oracle · judge composite" in out.stdout
    assert "│ bag[b]1 " in out.stdout
    assert "results: ev[dim]/summary.json · episodes: ev[dim]/episodes.jsonl" in out.stdout


def test_doctor_prints_states_and_remedies_intact(monkeypatch):
    from owrl_sdk.commands import doctor

    monkeypatch.setattr(doctor, "CHECKS", (
        lambda: doctor.Check("settings", "fail", "no such file: /tmp/[red]x[/]", "fix [bold]it[/bold]"),
        lambda: doctor.Check("plugin [b]p", "warn", "ok"),
    ))
    result = CliRunner().invoke(doctor.doctor_command, [])
    assert result.exit_code == 3
    assert "no such file: /tmp/[red]x[/]" in result.output
    assert "→ fix [bold]it[/bold]" in result.output
    assert "plugin [b]p" in result.output


def test_plugins_prints_load_errors_intact(monkeypatch):
    from owrl_sdk.contract import plugins as plugins_module
    from owrl_sdk.commands import plugins as command

    class Failure:
        name, source, error = "bad[i]", "pkg [dim]1.0", "ImportError: no module 'x[red]'"

    real = plugins_module.Plugins

    class WithFailure(real):
        # the failure is this facade's only: the process's plugin manager, which every later
        # test on this worker shares, is left as it was
        @property
        def failures(self):
            return [*super().failures, Failure()]

    monkeypatch.setattr(plugins_module, "Plugins", WithFailure)
    result = CliRunner().invoke(command.plugins_command, [])
    assert result.exit_code == 0, result.output
    assert "✗ plugin 'bad[i]' (pkg [dim]1.0) failed to load: ImportError: no module 'x[red]'" in result.output
