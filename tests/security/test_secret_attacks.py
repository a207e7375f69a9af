"""Secrets against the ways a value escapes redaction: failure details, the live view's title,
transformed copies (prefixes, JSON escapes, URL encoding) and Playwright traces.

Every test types a ``{{secret:NAME}}`` placeholder into a page served on 127.0.0.1 and then
looks for any form of the value (whole or a prefix of MIN_PREFIX characters; raw, JSON-escaped,
percent-encoded, HTML-escaped) wherever owrl writes or prints: run folders, ``owrl run``'s
output, ``owrl serve``'s API and job store.
"""

from __future__ import annotations

import asyncio
import html
import json
import re
import sys
import zipfile
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
from owrl_cli import owrl
from security_support import attack

from owrl_sdk import Agent

from owrl_sdk.safety import secrets
from owrl_sdk.config import Settings
from owrl_sdk.formats.documents import Flow
from owrl_sdk.types import Observation, Tab, Task

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serve"))
from serve_support import Served  # noqa: E402

#: The shortest prefix of a secret that is redacted (owrl_sdk.safety.secrets.MIN_PREFIX, documented).
MIN_PREFIX = 6
#: 12 characters: a space, a quote, a backslash and an ampersand.
SECRET = 'Kq7 "z\\&w9Lp'
#: Over 40 characters, so that feedback cuts it; double spaces, which text output may collapse.
LONG = 'Vx3 p"ass\\phrase &  more words  that keep going on 42'
#: Plain text with a space: the failure detail holds it as it is.
PLAIN = "Tangerine 4417 Osprey"

PAGES = {
    "/": """<html><head><title>Form</title></head><body>
<label>Long <input id="long"></label>
<label>Short <input id="short" maxlength="8"></label>
<label>Title <input id="t"></label>
<button onclick="document.title = document.getElementById('t').value">Set title</button>
<form action="/echo" method="get"><label>Query <input id="q" name="q"></label><button type="submit">Send</button></form>
</body></html>""",
    "/echo": """<html><head><title>Echo</title></head><body><h1>Echo</h1><p id="out"></p>
<script>document.getElementById('out').textContent = 'You sent: ' + new URLSearchParams(location.search).get('q')</script>
</body></html>""",
    "/says": """<html><head><title>Says</title></head><body>
<label>Code <input id="code"></label>
<button onclick="document.getElementById('said').textContent = 'Rejected code: ' + document.getElementById('code').value">Check</button>
<p role="alert" id="said"></p></body></html>""",
}


# ---------------------------------------------------------------------------- leak finder


def forms(value: str) -> set[str]:
    """The forms in which ``value`` (or its first MIN_PREFIX characters) could have leaked."""
    out: set[str] = set()
    for s in (value, value[:MIN_PREFIX]):
        once = json.dumps(s)[1:-1]
        for f in (s, once, json.dumps(once)[1:-1], json.dumps(s, ensure_ascii=True)[1:-1],
                  quote(s, safe=""), quote(s), quote_plus(s), quote_plus(s, safe=""),
                  html.escape(s), html.escape(s, quote=False), " ".join(s.split())):
            out.add(f)
            out.add(re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), f))
    return out


def leaks(text: str, *values: str) -> list[str]:
    return sorted({f for v in values for f in forms(v) if f in text})


def leaks_in_bytes(data: bytes, *values: str) -> list[str]:
    return sorted({f for v in values for f in forms(v) if f.encode("utf-8") in data})


def files_leaking(folder: Path, *values: str) -> dict[str, list[str]]:
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            hits = leaks_in_bytes(path.read_bytes(), *values)
            if hits:
                found[str(path.relative_to(folder))] = hits
    return found


@contextmanager
def tried(failures: list[str], what: str, defence: str):
    """``attack(...)`` whose failed check is collected rather than raised, so that one test tries
    every exit and the table shows each one that let the secret through; the test then fails."""
    try:
        with attack("secrets", what, defence):
            yield
    except AssertionError as err:
        failures.append(f"{what}: {str(err)[:800]}")


def _flow(url: str, *turns: list[dict]) -> dict:
    return {"schema": "owrl.flow/1", "task": "secret attack", "start_url": url,
            "turns": [{"calls": calls} for calls in turns]}


def write(selector: str, name: str, **extra) -> dict:
    return {"name": "write", "arguments": {"selector": selector, "message": "{{secret:%s}}" % name}, **extra}


def click(name: str) -> dict:
    return {"name": "click", "arguments": {"selector": f'role=button[name="{name}"]'}}


DONE = [{"name": "done", "arguments": {"response": "done"}}]


def value_equals_flow(url: str) -> dict:
    """A value_equals that fails after the secret was typed: its detail quotes the field's value."""
    return _flow(url, [write("#long", "ATTACK_PLAIN",
                             expect={"value_equals": {"selector": "#long", "value": "something else"}})], DONE)


def url_contains_flow(url: str) -> dict:
    """A GET form carries the secret into the URL; the next step's url_contains fails and quotes it."""
    return _flow(url, [write("#q", "ATTACK"), click("Send")],
                 [{"name": "scroll", "arguments": {"direction": "down"}, "expect": {"url_contains": "/nowhere"}}],
                 DONE)


def page_says_flow(url: str) -> dict:
    """A page whose alert repeats the secret typed; the failed expectation quotes what the page says."""
    return _flow(url.rstrip("/") + "/says", [write("#code", "ATTACK_PLAIN"),
                                             {**click("Check"), "expect": {"text_visible": "Accepted"}}], DONE)


SECRET_ENV = {"OWRL_SECRET_ATTACK": SECRET, "OWRL_SECRET_ATTACK_LONG": LONG, "OWRL_SECRET_ATTACK_PLAIN": PLAIN}


@pytest.fixture
def secret_env(monkeypatch):
    for key, value in SECRET_ENV.items():
        monkeypatch.setenv(key, value)


# ---------------------------------------------------------------------------- the redaction itself


def test_redact_catches_prefixes_escapes_and_encodings(secret_env):
    from owrl_sdk.safety.secrets import redact

    cases = {
        "a maxlength field holding the first 8 characters": SECRET[:8],
        f"a prefix of exactly {MIN_PREFIX} characters": SECRET[:MIN_PREFIX],
        "feedback cut at 40 characters": LONG[:39] + "…",
        "the JSON-escaped form": json.dumps(SECRET)[1:-1],
        "the JSON-escaped form of a JSON-escaped form": json.dumps(json.dumps(SECRET)[1:-1])[1:-1],
        "\\u escapes": json.dumps(SECRET, ensure_ascii=True)[1:-1],
        "HTML-safe JSON (\\u0026 for &, as web frameworks embed data)": json.dumps(SECRET)[1:-1].replace("&", "\\u0026"),
        "form encoding (+ for spaces)": quote_plus(SECRET),
        "percent-encoding in lower case": re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), quote(SECRET, safe="")),
        "HTML entities": html.escape(SECRET),
        "whitespace collapsed": " ".join(LONG.split()),
    }
    failures: list[str] = []
    for what, form in cases.items():
        with tried(failures, f"{what} of a secret", "redact() matches prefixes and escaped/encoded forms"):
            out = redact(f"seen: <{form}> end")
            assert re.fullmatch(r"seen: <\{\{secret:ATTACK(_LONG)?\}\}…?> end", out), (what, out)  # nothing left over
            assert not leaks(out, SECRET, LONG), (what, out)
    assert not failures, "\n".join(failures)
    # ordinary text is left alone: prefixes shorter than MIN_PREFIX are not secrets
    assert redact(f"x {SECRET[:MIN_PREFIX - 1]} y") == f"x {SECRET[:MIN_PREFIX - 1]} y"
    assert redact("Tange juice, Osprey 4417") == "Tange juice, Osprey 4417"  # not prefixes of MIN_PREFIX+
    # the documented cost: text that begins like a secret for MIN_PREFIX+ characters is redacted
    assert redact("Tangerine juice") == "{{secret:ATTACK_PLAIN}}juice"
    assert secrets.MIN_PREFIX == MIN_PREFIX


def test_a_quote_doubled_in_a_yaml_string_still_matches(monkeypatch):
    """Playwright's aria snapshot single-quotes a name holding ': ' or braces, doubling its quotes."""
    from owrl_sdk.safety.secrets import redact

    monkeypatch.setenv("OWRL_SECRET_QUOTED", "it's: a pass")
    assert redact("- textbox 'Code: it''s: a pass'") == "- textbox 'Code: {{secret:QUOTED}}'"


def test_scrub_walks_models_and_data_and_keeps_bytes(secret_env):
    obs = Observation(url="http://127.0.0.1/echo?q=" + quote_plus(SECRET), title=SECRET,
                      tabs=[Tab(index=0, url="http://h/?q=" + quote(SECRET), title=json.dumps(SECRET), active=True)],
                      aria=f'textbox "Short": {SECRET[:8]}', extras={"dialog": {"message": LONG}},
                      screenshot=b"\xff\xd8\xffjpeg")
    with attack("secrets", "a secret in tabs[].title/url and extras of an observation",
                "secrets.scrub() redacts every string of a model, nested ones included"):
        clean = secrets.scrub(obs)
        assert clean.screenshot == b"\xff\xd8\xffjpeg"  # not a string: kept as it is
        assert not leaks(clean.model_dump_json(), SECRET, LONG), clean
        data = secrets.scrub({"a": [obs.url, {"k": (obs.title, 3, None)}], obs.title: True})
        assert not leaks(json.dumps(data, ensure_ascii=False), SECRET), data
        assert data["a"][1]["k"][1:] == (3, None)


# ---------------------------------------------------------------------------- failure details (CLI)


@pytest.mark.parametrize("which", ["value_equals", "url_contains", "page_says"])
@pytest.mark.parametrize("mode", ["live", "json"])
def test_failure_details_are_redacted_in_the_cli_and_the_run_folder(which, mode, owrl_page_server, tmp_path):
    url = owrl_page_server(PAGES)
    flow = {"value_equals": value_equals_flow, "url_contains": url_contains_flow, "page_says": page_says_flow}[which](url)
    secret = SECRET if which == "url_contains" else PLAIN
    (tmp_path / "f.json").write_text(json.dumps(flow))
    args = ["run", "--flow", "f.json", "--allow-domain", "127.0.0.1", "--out", "runs"] + (["--json"] if mode == "json" else [])
    done = owrl(*args, cwd=tmp_path, env={**SECRET_ENV, "COLUMNS": "200"})
    assert done.returncode == 1, done.stdout + done.stderr  # the expectation failed: the flow stopped
    run_dir = next((tmp_path / "runs").iterdir())
    result = json.loads((run_dir / "result.json").read_text())
    assert result["failure"]["code"], result
    failures: list[str] = []
    with tried(failures, f"failed {which} after typing a secret: result.json and trajectory.json",
               "every string written is redacted at one choke point (secrets.scrub)"):
        assert not leaks((run_dir / "result.json").read_text(), secret), result
        assert "{{secret:" in result["failure"]["detail"], result
        assert not leaks((run_dir / "trajectory.json").read_text(), secret)
        assert not files_leaking(run_dir, secret)
    if mode == "json":
        with tried(failures, f"failed {which} after typing a secret: owrl run --json",
                   "the JSON result is scrubbed before it is printed"):
            out = json.loads(done.stdout)
            assert "{{secret:" in out["outcome"]["failure"]["detail"], out
            assert not leaks(done.stdout + done.stderr, secret)
    else:
        with tried(failures, f"failed {which} after typing a secret: the live view and closing line",
                   "each step and the outcome are scrubbed before they are printed"):
            assert "expect ✗" in done.stdout and "{{secret:" in done.stdout.split("expect ✗")[1], done.stdout
            assert not leaks(done.stdout + done.stderr, secret), done.stdout
        if which == "url_contains":
            with tried(failures, "the live view's step title shows a URL holding the secret",
                       "the step panel's title is scrubbed"):
                titles = [line for line in done.stdout.splitlines() if "step 2/" in line]
                assert titles and "/echo?q={{secret:ATTACK}}" in titles[0], done.stdout
                assert not leaks(titles[0], SECRET)
    assert not failures, "\n".join(failures)


# ---------------------------------------------------------------------------- failure details (serve)


@pytest.mark.slow
def test_failure_details_are_redacted_in_the_server_records(owrl_page_server, tmp_path):
    url = owrl_page_server(PAGES)
    failures: list[str] = []
    server = Served(tmp_path / "data", (), env=dict(SECRET_ENV)).start()
    try:
        ids = {}
        for which, make in (("value_equals", value_equals_flow), ("url_contains", url_contains_flow)):
            ids[which] = server.submit_flow(make(url), allowed_domains="127.0.0.1")["id"]
        jobs = {which: server.wait(job_id, timeout=90) for which, job_id in ids.items()}
        for job in jobs.values():
            assert job["status"] == "finished" and job["outcome"]["status"] == "fail", job
            assert job["outcome"]["failure"]["detail"], job
        with tried(failures, "failed expectation details in owrl serve's job record and job list",
                   "the job store scrubs the outcome and error it stores and reads"):
            for job_id in ids.values():
                record = server.request("GET", f"/v1/jobs/{job_id}")
                assert "{{secret:" in record.json()["outcome"]["failure"]["detail"], record.body
                assert not leaks_in_bytes(record.body, SECRET, PLAIN), record.body
            listed = server.request("GET", "/v1/jobs")
            assert listed.status == 200 and not leaks_in_bytes(listed.body, SECRET, PLAIN), listed.body
        with tried(failures, "failed expectation details in owrl serve's NDJSON end event and steps",
                   "stream lines are scrubbed before they are sent"):
            for job_id in ids.values():
                stream = server.request("GET", f"/v1/jobs/{job_id}/steps/stream")
                lines = [json.loads(line) for line in stream.body.splitlines()]
                assert lines[-1]["event"] == "end" and "{{secret:" in lines[-1]["job"]["outcome"]["failure"]["detail"]
                assert not leaks_in_bytes(stream.body, SECRET, PLAIN), stream.body
                steps = server.request("GET", f"/v1/jobs/{job_id}/steps")
                assert not leaks_in_bytes(steps.body, SECRET, PLAIN)
                traj = server.request("GET", f"/v1/jobs/{job_id}/trajectory")
                assert not leaks_in_bytes(traj.body, SECRET, PLAIN)
    finally:
        server.stop()
    with tried(failures, "failed expectation details in owrl serve's SQLite file",
               "the job store writes only scrubbed outcomes and errors"):
        stored = [p for p in (tmp_path / "data").glob("jobs.sqlite3*")]
        assert stored
        for path in stored:
            assert not leaks_in_bytes(path.read_bytes(), SECRET, PLAIN), path
        assert not files_leaking(tmp_path / "data", SECRET, PLAIN)
    assert not failures, "\n".join(failures)


# ---------------------------------------------------------------------------- transformed copies


async def test_transformed_copies_of_a_secret_are_redacted(secret_env, owrl_page_server, tmp_path):
    url = owrl_page_server(PAGES)
    flow = Flow.model_validate(_flow(
        url,
        [write("#short", "ATTACK")],                  # maxlength=8: the field keeps a prefix
        [write("#long", "ATTACK_LONG")],              # feedback cuts the echoed value at 40 characters
        [write("#t", "ATTACK"), click("Set title")],  # the tab's title becomes the secret
        [write("#q", "ATTACK"), click("Send")],       # the GET form percent-encodes it into the URL
        DONE,
    ))
    s = Settings(runs_dir=str(tmp_path / "runs"))
    async with Agent(policy="scripted", flow=flow, settings=s) as agent:
        traj = await agent.run(Task(intent="attack", start_url=url, allowed_domains=["127.0.0.1"]))
    assert traj.outcome.status == "success", traj.outcome
    steps = traj.steps
    run_dir = Path(traj.metadata["run_dir"])
    text = (run_dir / "trajectory.json").read_text()
    failures: list[str] = []

    with tried(failures, "a maxlength field holding the first 8 of 12 characters",
               f"prefixes of {MIN_PREFIX}+ characters are redacted"):
        assert "{{secret:ATTACK}}" in steps[1].observation.aria, steps[1].observation.aria
        assert not leaks(steps[1].observation.aria, SECRET)
    with tried(failures, "feedback that cuts a long echoed secret at 40 characters",
               "the cut prefix is redacted like the whole value"):
        feedback = steps[1].calls[0].result.feedback
        assert "{{secret:ATTACK_LONG}}" in feedback, feedback
        assert not leaks(feedback, LONG)
    with tried(failures, "a secret with a quote and a backslash in tabs[].title",
               "every observation field is scrubbed; JSON-escaped forms are redacted"):
        obs = steps[3].observation
        assert obs.tabs[0].title == "{{secret:ATTACK}}", obs.tabs
        assert not leaks(obs.model_dump_json(), SECRET)
    with tried(failures, "a GET form percent-encoding a secret into the URL",
               "URL-encoded forms (%XX and + for spaces) are redacted in urls, tabs and feedback"):
        obs = steps[4].observation
        assert obs.url.endswith("/echo?q={{secret:ATTACK}}"), obs.url
        assert not leaks(obs.model_dump_json(), SECRET)
        assert not leaks(steps[3].calls[1].result.feedback, SECRET), steps[3].calls[1].result.feedback
    with tried(failures, "any transformed copy in the run folder",
               "trajectory.json, result.json and report are written scrubbed"):
        for st in steps:
            assert not leaks(st.model_dump_json(), SECRET, LONG), st.index
        assert not leaks(text, SECRET, LONG)
        assert not files_leaking(run_dir, SECRET, LONG)
    assert not failures, "\n".join(failures)


# ---------------------------------------------------------------------------- traces


def trace_flow(url: str) -> dict:
    return _flow(url, [write("#long", "ATTACK")], DONE)


def test_trace_with_secrets_is_refused_unless_asked_for(owrl_page_server, tmp_path):
    url = owrl_page_server(PAGES)
    (tmp_path / "f.json").write_text(json.dumps(trace_flow(url)))
    failures: list[str] = []
    common = ["run", "--flow", "f.json", "--allow-domain", "127.0.0.1", "--out", "runs"]
    with tried(failures, "owrl run --trace with a flow that types a secret",
               "refused (exit 2) unless --trace-with-secrets is given"):
        refused = owrl(*common, "--trace", cwd=tmp_path, env=SECRET_ENV)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "--trace-with-secrets" in refused.stderr, refused.stderr
        assert not list(tmp_path.glob("runs/*/trace*.zip"))
    with tried(failures, "owrl run --trace-with-secrets keeps a trace that holds the secret",
               "the trajectory carries a warning that the trace holds secrets in clear"):
        kept = owrl(*common, "--trace-with-secrets", cwd=tmp_path, env=SECRET_ENV)
        assert kept.returncode == 0, kept.stdout + kept.stderr
        run_dir = next((tmp_path / "runs").iterdir())
        assert (run_dir / "trace.zip").exists()
        warnings = json.loads((run_dir / "trajectory.json").read_text())["warnings"]
        assert any("trace" in w and "secret" in w for w in warnings), warnings
        assert "trace" in kept.stdout and "secret" in kept.stdout  # the closing lines show the warning
    assert not failures, "\n".join(failures)


async def test_a_trace_recorded_through_the_api_is_not_kept_when_a_secret_was_typed(secret_env, owrl_page_server, tmp_path):
    url = owrl_page_server(PAGES)
    flow = Flow.model_validate(trace_flow(url))
    s = Settings(runs_dir=str(tmp_path / "runs"))
    with attack("secrets", "Agent.run(trace=True) with a flow that types a secret",
                "the run folder deletes the trace at the end of the episode and says so"):
        async with Agent(policy="scripted", flow=flow, settings=s) as agent:
            traj = await agent.run(Task(intent="trace", start_url=url, allowed_domains=["127.0.0.1"]), trace=True)
        assert traj.outcome.status == "success", traj.outcome
        run_dir = Path(traj.metadata["run_dir"])
        assert not list(run_dir.glob("trace*.zip")), list(run_dir.iterdir())
        warnings = json.loads((run_dir / "trajectory.json").read_text())["warnings"]
        assert any("trace" in w and "deleted" in w for w in warnings), warnings
        assert not files_leaking(run_dir, SECRET)


async def test_trace_with_secrets_keeps_that_episodes_trace_only(secret_env, owrl_page_server, tmp_path):
    """``Agent.run(trace_with_secrets=True)`` keeps its own episode's trace (with the warning);
    it is no switch of the process: the next episode's trace, in the same process, is deleted."""
    url = owrl_page_server(PAGES)
    flow = Flow.model_validate(trace_flow(url))
    s = Settings(runs_dir=str(tmp_path / "runs"))
    task = Task(intent="trace", start_url=url, allowed_domains=["127.0.0.1"])
    async with Agent(policy="scripted", flow=flow, settings=s) as agent:
        kept = await agent.run(task, trace_with_secrets=True)
        after = await agent.run(task, trace=True)
    kept_dir, after_dir = Path(kept.metadata["run_dir"]), Path(after.metadata["run_dir"])
    assert (kept_dir / "trace.zip").exists()
    assert any("holds the secrets" in w for w in kept.warnings), kept.warnings
    assert not list(after_dir.glob("trace*.zip")), list(after_dir.iterdir())
    assert any("deleted" in w for w in after.warnings), after.warnings


async def test_a_trace_without_secrets_is_kept(owrl_page_server, tmp_path, monkeypatch):
    for key in SECRET_ENV:
        monkeypatch.delenv(key, raising=False)
    url = owrl_page_server(PAGES)
    flow = Flow.model_validate(_flow(url, [click("Set title")], DONE))
    s = Settings(runs_dir=str(tmp_path / "runs"))
    async with Agent(policy="scripted", flow=flow, settings=s) as agent:
        traj = await agent.run(Task(intent="trace", start_url=url, allowed_domains=["127.0.0.1"]), trace=True)
    run_dir = Path(traj.metadata["run_dir"])
    assert (run_dir / "trace.zip").exists()
    with zipfile.ZipFile(run_dir / "trace.zip") as z:
        assert z.namelist()


def test_an_evaluation_record_is_scrubbed(tmp_path, monkeypatch):
    """An episode's answer and failure detail reach episodes.jsonl and the progress line scrubbed."""
    from owrl_sdk.scheduling.evaluation import EpisodeRecord, EvalPlan, Evaluation, TaskFileSuite
    from owrl_sdk.contract.plugins import Plugins

    value = "Tangerine-Owl-4471"
    monkeypatch.setenv("OWRL_SECRET_EVAL_CODE", value)
    settings = Settings()
    plan = EvalPlan(suite=TaskFileSuite(settings, []), tasks=[], out=tmp_path)
    seen = []
    evaluation = Evaluation(plan, settings, Plugins(), on_record=seen.append)
    with attack("secrets", "an evaluation episode whose answer and failure quote a secret",
                "episodes.jsonl and the progress callback get the scrubbed record"):
        evaluation.add_record(EpisodeRecord(key="t#0", task_id="t", episode=0, status="fail", success=False,
                                            score=0.0, steps=1, seconds=1.0, failure=f"value was {value[:9]}",
                                            answer=f"the code is {value}", run_dir=None))
        written = (tmp_path / "episodes.jsonl").read_text(encoding="utf-8")
        assert value[:6] not in written and "{{secret:EVAL_CODE}}" in written
        assert seen[0].answer == "the code is {{secret:EVAL_CODE}}"


# ---------------------------------------------------------------------------- the last line of defence


def test_save_trajectory_scrubs_what_no_environment_scrubbed(secret_env, tmp_path):
    """Values put straight into a trajectory, past the browser environment's redaction (a model's
    thought, a plugin's metadata, a judge's reason, the answer), never reach trajectory.json."""
    from owrl_sdk.formats.documents import save_trajectory
    from owrl_sdk.types import Judgement, Outcome, PolicyInfo, Step, ToolCall, Trajectory, Turn

    obs = Observation(url="http://127.0.0.1/", title="t", tabs=[], aria="")
    traj = Trajectory(
        task=Task(intent="log in", start_url="http://127.0.0.1/"),
        policy=PolicyInfo(name="openwebrl"),
        steps=[Step(index=0, observation=obs,
                    turn=Turn(thought=f"the password is {SECRET}", raw=json.dumps({"typed": SECRET}),
                              calls=[ToolCall(name="write", arguments={"message": quote_plus(SECRET)})]))],
        outcome=Outcome(status="success", answer=f"done with {LONG[:20]}", outputs={"code": SECRET[:MIN_PREFIX]}),
        judgements=[Judgement(judge="j", score=1.0, success=True, reason=html.escape(SECRET))],
        warnings=[PLAIN], metadata={"plugin": {"notes": [SECRET]}, SECRET: "as a key"},
    )
    path = tmp_path / "trajectory.json"
    with attack("secrets", "a secret written into a trajectory's thought, metadata, answer, reason and keys",
                "save_trajectory scrubs the whole document"):
        save_trajectory(traj, path)
        text = path.read_text(encoding="utf-8")
        assert not leaks(text, SECRET, LONG, PLAIN), leaks(text, SECRET, LONG, PLAIN)
        assert "{{secret:ATTACK}}" in text and "{{secret:ATTACK_PLAIN}}" in text
    assert traj.steps[0].turn.thought == f"the password is {SECRET}"  # the object in memory is left alone


def test_a_trace_file_is_searched_in_every_form_and_an_unreadable_one_counts_as_leaking(secret_env, tmp_path):
    with attack("secrets", "a trace whose network log holds the secret percent-encoded",
                "found_in_file reads every member of the zip and matches encoded forms"):
        trace = tmp_path / "trace.zip"
        with zipfile.ZipFile(trace, "w") as z:
            z.writestr("trace.trace", '{"type":"before"}\n')
            z.writestr("trace.network", json.dumps({"postData": "q=" + quote_plus(SECRET)}))
        assert secrets.found_in_file(trace)
    with attack("secrets", "a trace cut short (not a whole zip)", "an unreadable file is assumed to leak"):
        cut = tmp_path / "cut.zip"
        cut.write_bytes(trace.read_bytes()[:-30])
        assert secrets.found_in_file(cut)
        assert secrets.found_in_file(tmp_path / "missing.zip")
    clean = tmp_path / "clean.zip"
    with zipfile.ZipFile(clean, "w") as z:
        z.writestr("trace.network", json.dumps({"postData": "q=hello"}))
    assert not secrets.found_in_file(clean)


@pytest.mark.parametrize("given", ["a variable, no placeholder", "a placeholder, no variable"])
def test_trace_is_refused_on_either_sign_of_a_secret(given, tmp_path):
    """Each of the two signs alone stops `owrl run --trace` before a browser starts."""
    url = "http://127.0.0.1:9/"  # nothing listens: a browser that started would fail otherwise
    if given == "a variable, no placeholder":
        flow, env = _flow(url, [click("Set title")], DONE), {"OWRL_SECRET_ATTACK": SECRET}
    else:
        flow, env = trace_flow(url), {}
    (tmp_path / "f.json").write_text(json.dumps(flow))
    with attack("secrets", f"owrl run --trace with {given}", "refused with exit 2 before the browser starts"):
        out = owrl("run", "--flow", "f.json", "--allow-domain", "127.0.0.1", "--out", "runs", "--trace",
                   cwd=tmp_path, env=env)
        assert out.returncode == 2, out.stdout + out.stderr
        assert "--trace-with-secrets" in out.stderr, out.stderr
        assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


# ---------------------------------------------------------------------------- credentials given as options


API_KEY = "sk-owrl-test-4f9a7c21e8b3"
URL_PASSWORD = "pw-Heron-5521"


@contextmanager
def echoing_endpoint():
    """An OpenAI-style endpoint that refuses every request and, as some do, quotes the
    credentials it was sent in its error body."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Echo(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.dumps({"error": f"invalid credentials: {self.headers.get('Authorization')}"}).encode()
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_registered_credentials_skip_stand_in_keys_and_survive_a_malformed_url(monkeypatch):
    monkeypatch.setattr(secrets, "_known", {})  # this process's registry, restored after
    for stand_in in ("EMPTY", "none", "dummy"):
        secrets.register(stand_in, "OPENAI_API_KEY")
    secrets.credentials_in_url("http://user:pw@127.0.0.1:8000/v1", "E")  # too short to be told from text
    secrets.credentials_in_url("http://127.0.0.1:8000/v1", "E")
    assert secrets._known == {}
    assert secrets.redact("the field is empty, none of them") == "the field is empty, none of them"
    with attack("secrets", "a password in a URL whose port is not a number (urlsplit refuses it)",
                "the user part is read by hand and its password registered"):
        secrets.credentials_in_url(f"http://owrl:{URL_PASSWORD}@127.0.0.1:port/v1", "E")
        assert secrets.redact(f"cannot reach owrl:{URL_PASSWORD}@127.0.0.1") == \
            "cannot reach owrl:{{secret:E_PASSWORD}}@127.0.0.1"


def test_policy_options_never_show_even_when_the_endpoint_quotes_them(owrl_page_server, tmp_path):
    """serve.md: policy options (which may hold credentials) are kept in the store and never
    shown. An endpoint that echoes the key in its error, and a base URL that carries a password,
    must not bring either into a job, its steps, its stream, its trajectory or its run folder."""
    url = owrl_page_server(PAGES)
    failures: list[str] = []
    with echoing_endpoint() as endpoint:
        host = endpoint.split("//", 1)[1]
        options = {"key echoed by the endpoint": {"base_url": endpoint, "api_key": API_KEY, "retries": 0},
                   "password in the base URL": {"base_url": f"http://owrl:{URL_PASSWORD}@{host}", "retries": 0}}
        # the endpoint listens on loopback, an internal address: the operator's allowlist names it
        server = Served(tmp_path / "data", env={"OWRL_ALLOWED_DOMAINS": "127.0.0.1"}).start()
        try:
            ids = {}
            for what, opts in options.items():
                reply = server.request("POST", "/v1/jobs/task", {
                    "task": "read the page", "start_url": url, "policy": "openai", "policy_options": opts,
                    "allowed_domains": ["127.0.0.1"], "max_steps": 2})
                assert reply.status == 201, reply.body
                ids[what] = reply.json()["id"]
            for what, job_id in ids.items():
                job = server.wait(job_id, timeout=90)
                with tried(failures, f"a {what}, in owrl serve's job, list, steps, stream and trajectory",
                           "the backend registers the credentials it was given as secrets"):
                    assert job["status"] in ("finished", "failed"), job
                    views = [server.request("GET", f"/v1/jobs/{job_id}{tail}")
                             for tail in ("", "/steps", "/steps/stream", "/trajectory")]
                    views.append(server.request("GET", "/v1/jobs"))
                    for view in views:
                        assert not leaks_in_bytes(view.body, API_KEY, URL_PASSWORD), view.body[:2000]
        finally:
            server.stop()
    with tried(failures, "credentials given as options, in the server's run folders",
               "trajectory.json and result.json are written scrubbed"):
        runs = [p for p in (tmp_path / "data").rglob("*") if p.is_file() and not p.name.startswith("jobs.sqlite3")]
        assert any(p.name == "trajectory.json" for p in runs), runs
        leaking = {str(p): leaks_in_bytes(p.read_bytes(), API_KEY, URL_PASSWORD) for p in runs}
        assert not {k: v for k, v in leaking.items() if v}, leaking
    assert not failures, "\n".join(failures)


# ---------------------------------------------------------------------------- what owrl draws, names and lets hooks add

LEAKY_PAGES = {
    "/": """<html><head><title>Leaky</title></head><body>
<label>Code <input id="code"></label>
<button onclick="alert('Your code is ' + document.getElementById('code').value)">Show</button>
<button onclick="const a = document.createElement('a'); a.href = '/report';
  a.download = document.getElementById('code').value + '.txt'; document.body.appendChild(a); a.click()">Save</button>
</body></html>""",
    "/report": "<p>a report</p>",
}


async def test_a_dialog_picture_a_download_name_and_hook_additions_hold_no_secret(
        secret_env, owrl_page_server, tmp_path, monkeypatch):
    """The page shows the typed value in an alert (owrl draws it into the screenshot) and names a
    download after it; a site plugin copies page text into the observation's extras and a call's
    feedback. None of these went through the scrub the environment applies."""
    from owrl_sdk import hookimpl
    from owrl_sdk.browser import picture

    drawn: list[str] = []
    real_draw = picture.draw_dialog

    def spy(shot, kind, message, *rest, **options):  # the real drawing, with what it was given kept
        drawn.append(message)
        return real_draw(shot, kind, message, *rest, **options)

    monkeypatch.setattr(picture, "draw_dialog", spy)

    class CopiesPageText:
        @hookimpl
        def observation(self, observation, env):
            observation.extras["account"] = f"signed in with {PLAIN}"

        @hookimpl
        def after_tool_call(self, call, result, env):
            result.feedback += f" (the field now says {PLAIN})"

    url = owrl_page_server(LEAKY_PAGES)
    flow = Flow.model_validate(_flow(
        url, [write("#code", "ATTACK_PLAIN"), click("Show")],
        [{"name": "handle_dialog", "arguments": {"accept": True}}, click("Save"),
         {"name": "wait", "arguments": {"seconds": 1}}], DONE))
    s = Settings(runs_dir=str(tmp_path / "runs"))
    async with Agent(policy="scripted", flow=flow, settings=s) as agent:
        traj = await agent.run(Task(intent="attack", start_url=url, allowed_domains=["127.0.0.1"]),
                               hooks=[CopiesPageText()])
    assert traj.outcome.status == "success", traj.outcome
    run_dir = Path(traj.metadata["run_dir"])
    failures: list[str] = []
    with tried(failures, "alert(value) drawn into the observation's screenshot",
               "the dialog's message is redacted before it is drawn"):
        assert drawn and all("{{secret:ATTACK_PLAIN}}" in m for m in drawn), drawn
        assert not leaks(" ".join(drawn), PLAIN)
    with tried(failures, "a download named after the typed value", "the saved file's name is redacted"):
        names = [p.name for p in (run_dir / "downloads").iterdir()]
        assert names and not leaks(" ".join(names), PLAIN), names
        assert not leaks(json.dumps([c.result.feedback for st in traj.steps for c in st.calls if c.result]), PLAIN)
    with tried(failures, "an observation hook copying page text into extras",
               "what the hooks add is scrubbed before the policy reads it"):
        assert traj.steps[0].observation.extras["account"] == "signed in with {{secret:ATTACK_PLAIN}}"
        assert not leaks(json.dumps([st.observation.extras for st in traj.steps]), PLAIN)
    with tried(failures, "an after_tool_call hook adding page text to a call's feedback",
               "a call's result is scrubbed after the hooks"):
        feedback = traj.steps[0].calls[0].result.feedback
        assert "{{secret:ATTACK_PLAIN}}" in feedback and not leaks(feedback, PLAIN), feedback
    assert not failures, "\n".join(failures)


@pytest.mark.slow
async def test_a_trace_of_a_cancelled_episode_that_typed_a_secret_is_not_kept(secret_env, owrl_page_server, tmp_path):
    """The trace is written as the browser context closes, after the aborted trajectory was saved;
    a cancelled episode is checked again then (it was not: the trace stayed, the secret in it)."""
    url = owrl_page_server(PAGES)
    flow = Flow.model_validate(_flow(url, [write("#long", "ATTACK"), {"name": "wait", "arguments": {"seconds": 30}}],
                                     DONE))
    s = Settings(runs_dir=str(tmp_path / "runs"))
    with attack("secrets", "Agent.run(trace=True) cancelled (a time-out, Ctrl-C) after a secret was typed",
                "the run folder checks the trace again once the context closed"):
        async with Agent(policy="scripted", flow=flow, settings=s) as agent:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(agent.run(Task(intent="trace", start_url=url, allowed_domains=["127.0.0.1"]),
                                                 trace=True), 8)
        (run_dir,) = (tmp_path / "runs").iterdir()
        assert not list(run_dir.glob("trace*.zip")), list(run_dir.iterdir())
        saved = json.loads((run_dir / "trajectory.json").read_text())
        assert saved["outcome"]["status"] == "aborted"
        assert any("trace" in w and "deleted" in w for w in saved["warnings"]), saved["warnings"]
        assert not files_leaking(run_dir, SECRET)


# ---------------------------------------------------------------------------- secrets bound to hosts

BOUND_PAGES = {
    "/": """<html><head><title>Bank</title></head><body style="margin:0">
<label>Code <input id="code"></label>
<iframe id="ad" style="position:fixed; left:0; top:40px; width:1000px; height:500px; border:0"></iframe>
<script>document.getElementById('ad').src = location.origin.replace('127.0.0.1', 'localhost') + '/inner' + location.search</script>
</body></html>""",
    "/inner": """<html><body style="margin:0"><input id="grab" style="width:100%; height:400px">
<script>if (location.search.includes('lie')) {
  // the frame lies about where it is and whether it has the focus, to whoever asks from inside it
  const honest = location.href.replace('localhost', '127.0.0.1');
  Object.defineProperty(Node.prototype, 'ownerDocument', {get: () => ({location: {href: honest}})});
  Document.prototype.hasFocus = () => false;
}</script>
</body></html>""",
}


@pytest.mark.parametrize("how", ["selector", "point"])
@pytest.mark.parametrize("frame", ["honest", "lie"])
async def test_a_secret_bound_to_a_host_is_typed_nowhere_else_not_even_in_a_frame(
        secret_env, owrl_page_server, tmp_path, how, frame):
    """secrets_allowed_on: ATTACK_PLAIN may be typed on 127.0.0.1 only. The page embeds a frame
    from another host (localhost) with a field that covers the page: a prompt-injected model
    typing the placeholder there, by selector or by point, types nothing."""
    url = owrl_page_server(BOUND_PAGES) + ("?lie" if frame == "lie" else "")
    into_frame = ({"selector": "#ad >>> #grab"} if how == "selector" else {"point_2d": [300, 300]})
    flow = Flow.model_validate(_flow(
        url, [write("#code", "ATTACK_PLAIN")],
        [{"name": "write", "arguments": {**into_frame, "message": "{{secret:ATTACK_PLAIN}}"}}], DONE))
    s = Settings(runs_dir=str(tmp_path / "runs"), secrets_allowed_on={"ATTACK_PLAIN": ["127.0.0.1"]})
    with attack("secrets", f"a secret bound to its host, typed into another host's frame ({how}, {frame})",
                "the write tool checks the page and the document the keys reach before it resolves"):
        async with Agent(policy="scripted", flow=flow, settings=s) as agent:
            traj = await agent.run(Task(intent="bound", start_url=url))
        first, second = traj.steps[0].calls[0].result, traj.steps[1].calls[0].result
        assert first.ok, first  # on its own host it is typed
        assert not second.ok and "secret ATTACK_PLAIN may be typed only on 127.0.0.1; the field is " in second.error \
            and ("on localhost" in second.error or "in a frame that hides where it is" in second.error), second
        assert "localhost" not in str(traj.steps[0].observation.url)
    if frame == "lie":
        return
    # a binding that lists no host types it nowhere, not even on its own page
    s = Settings(runs_dir=str(tmp_path / "runs0"), secrets_allowed_on={"ATTACK_PLAIN": []})
    async with Agent(policy="scripted", flow=flow, settings=s) as agent:
        traj = await agent.run(Task(intent="bound", start_url=url))
    assert "may be typed on no page" in traj.steps[0].calls[0].result.error
    # with the frame's host bound too, the same call types it
    s = Settings(runs_dir=str(tmp_path / "runs2"), secrets_allowed_on={"ATTACK_PLAIN": ["127.0.0.1", "localhost"]})
    async with Agent(policy="scripted", flow=flow, settings=s) as agent:
        traj = await agent.run(Task(intent="bound", start_url=url))
    assert traj.steps[1].calls[0].result.ok, traj.steps[1].calls[0].result


def test_a_short_secret_is_redacted_on_its_own_and_not_inside_other_numbers(monkeypatch):
    """Matched inside any number, a PIN gave itself away: '© 2024 Acme, call 020241' became
    '© {{secret:PIN}} Acme, call 0{{secret:PIN}}1'. On its own (escapes and encodings around it
    included) it is still redacted."""
    from owrl_sdk.safety.secrets import redact

    monkeypatch.setenv("OWRL_SECRET_PIN", "2024")
    assert redact("© 2024 Acme, call 020241") == "© {{secret:PIN}} Acme, call 020241"
    for around in ("PIN: {}", '"{}"', "pin={}&x", "next=%2Fx%3Fpin%3D{}", "a\\n{}", "x\\u003d{}", "{}****"):
        assert redact(around.format("2024")) == around.format("{{secret:PIN}}"), around
    assert redact("%32%30%32%34") == "{{secret:PIN}}"


# ---------------------------------------------------------------------------- focus thieves

#: A page on 127.0.0.1 (where the secret may go) holding a frame of another host (localhost)
#: that tries to take the keyboard focus while owrl writes; the query names how. The frame
#: keeps whatever input it receives in ``window.got``.
THIEF_PAGES = {
    "/": """<html><head><title>Bank</title></head><body style="margin:0">
<label>Code <input id="code" style="width:300px; height:40px"></label>
<div id="host"></div>
<iframe id="ad" style="width:600px; height:200px; border:0"></iframe>
<script>
const how = location.search.slice(1);
const frame = document.getElementById('ad');
frame.src = location.origin.replace('127.0.0.1', 'localhost') + '/thief?' + how;
const steal = () => { try { frame.focus(); frame.contentWindow.focus(); } catch (e) {} };
if (how === 'handler') document.getElementById('code').addEventListener('focus', steal);
if (how === 'timer') setInterval(steal, 0);
if (how === 'channel') { const c = new MessageChannel(); c.port1.onmessage = () => { steal(); c.port2.postMessage(0); };
                         c.port2.postMessage(0); }
if (how === 'shadow') {
  const root = document.getElementById('host').attachShadow({mode: 'open'});
  root.innerHTML = '<div id="editor" contenteditable="true" style="width:300px; height:40px; border:1px solid">x</div>';
  root.getElementById('editor').addEventListener('focus', steal);
}
if (how === 'active') {
  // the page lies about the focused element: reading it hands the focus to the frame
  const real = Object.getOwnPropertyDescriptor(Document.prototype, 'activeElement').get;
  Object.defineProperty(Document.prototype, 'activeElement', {configurable: true, get() {
    const el = real.call(this); setTimeout(steal, 0); steal(); return el; }});
}
</script></body></html>""",
    "/thief": """<html><body style="margin:0"><input id="grab" style="width:100%; height:150px">
<script>
window.got = [];
const grab = document.getElementById('grab');
for (const kind of ['keydown', 'keypress', 'input', 'beforeinput', 'paste']) {
  window.addEventListener(kind, (e) => window.got.push(kind + ':' + (e.data || e.key || '')), true);
}
const loop = () => grab.focus();
setInterval(loop, 0);
const c = new MessageChannel(); c.port1.onmessage = () => { loop(); c.port2.postMessage(0); }; c.port2.postMessage(0);
</script></body></html>""",
}


@pytest.mark.parametrize("how", ["timer", "channel", "handler", "shadow", "active"])
async def test_a_frame_that_takes_the_focus_receives_no_secret(secret_env, owrl_page_server, tmp_path, how):
    """A bound secret goes into the checked element only, whatever a frame of another host does
    with the keyboard focus: its own focus loops, the field's focus handler handing it the focus
    (also for a contenteditable in a shadow root), a lie about ``document.activeElement`` on the
    point_2d path. Each write is made six times."""
    from builtin_tools.text import Write
    from owrl_sdk.browser import BrowserHost
    from owrl_sdk.types import ToolCall

    url = owrl_page_server(THIEF_PAGES) + "?" + how
    if how == "shadow":
        target = {"selector": "#editor"}  # CSS reaches into open shadow roots
    elif how == "active":
        target = {"point_2d": [100, 20]}  # the Code field, at the top left of a 1280x1000 page
    else:
        target = {"selector": "#code"}
    s = Settings(runs_dir=str(tmp_path / "runs"), secrets_allowed_on={"ATTACK_PLAIN": ["127.0.0.1"]})
    with attack("secrets", f"a cross-origin frame takes the focus while a bound secret is written ({how})",
                "the value is set inside the checked element's own document, never through the focus"):
        async with BrowserHost(s) as host:
            env = await host.new_env()
            await env.reset(Task(intent="t", start_url=url))
            thief = next(f for f in env.page.frames if "/thief" in f.url)
            await thief.wait_for_function("window.got !== undefined")
            results = []
            for _ in range(6):
                args = Write.Args.model_validate({**target, "message": "{{secret:ATTACK_PLAIN}}"})
                results.append(await env.execute(Write(), args, ToolCall(name="write", arguments=args.model_dump())))
                await env.page.wait_for_timeout(50)
            got = await thief.evaluate("[window.got, document.getElementById('grab').value]")
            if how == "shadow":
                held = await env.page.evaluate("document.getElementById('host').shadowRoot.getElementById('editor')"
                                               ".textContent")
            else:
                held = await env.page.evaluate("document.getElementById('code').value")
            await env.close()
        assert got == [[], ""], got
        for result in results:
            assert result.ok or result.error_kind == "policy.secret_refused", result
        assert any(r.ok for r in results) and held == PLAIN, (results, held)
