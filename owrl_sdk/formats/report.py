"""HTML reports: one page per run folder, one page per evaluation folder.

A run report (``RUN/report.html``) holds everything needed to read the run offline: the
task, the outcome, every step with its screenshot embedded as a data URI, thought, calls,
results, verdicts and feedback, and the judgements. An evaluation report
(``EVAL/report.html``) holds the summary and per-task tables and links every episode to
its run's report, which it writes next to that run's ``trajectory.json``.

Everything shown comes from documents a model or a web page filled in, so every piece of
text is escaped, the pages carry no script, and a Content-Security-Policy forbids scripts
and any load other than the embedded images.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import json
import os
from pathlib import Path
from typing import Any, Iterable, Optional, Union

from owrl_sdk.formats.documents import load_trajectory
from owrl_sdk.errors import UsageError
from owrl_sdk.support.files import write_atomic
from owrl_sdk.formats.records import read_records, summarise
from owrl_sdk.types import CallRecord, Step, Trajectory

REPORT_NAME = "report.html"
_IMAGE_TYPES = {".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png", ".webp": "image/webp"}
_STATUS_CLASS = {"success": "ok", "fail": "bad", "aborted": "bad", "infra_error": "warn"}

CSS = """
:root { --ok: #137333; --bad: #b3261e; --warn: #8a5a00; --line: #d9dce1; --soft: #f5f6f8; --ink: #1d2430; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink); margin: 0; background: #fff; }
header, main, footer { max-width: 1400px; margin: 0 auto; padding: 16px 24px; }
header { border-bottom: 1px solid var(--line); }
h1 { font-size: 20px; margin: 0 0 8px; white-space: pre-wrap; word-break: break-word; }
h2 { font-size: 16px; margin: 24px 0 8px; }
h3 { font-size: 14px; margin: 0 0 6px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 8px 0; }
dl.facts dt { color: #5f6673; } dl.facts dd { margin: 0; word-break: break-word; white-space: pre-wrap; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-weight: 600; font-size: 12px; border: 1px solid; }
.ok { color: var(--ok); } .bad { color: var(--bad); } .warn { color: var(--warn); } .dim { color: #6b7280; }
table { border-collapse: collapse; width: 100%; margin: 8px 0 16px; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: var(--soft); font-weight: 600; }
td code, a.run-link { white-space: nowrap; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
section.step { border: 1px solid var(--line); border-radius: 8px; margin: 16px 0; padding: 12px 16px; }
section.step > h2 { margin-top: 0; word-break: break-all; }
.step-body { display: grid; grid-template-columns: minmax(0, 5fr) minmax(0, 6fr); gap: 16px; }
@media (max-width: 900px) { .step-body { grid-template-columns: 1fr; } }
img.shot { width: 100%; height: auto; border: 1px solid var(--line); border-radius: 4px; }
.thought { font-style: italic; background: var(--soft); padding: 6px 10px; border-radius: 4px; white-space: pre-wrap; }
.call { border-left: 3px solid var(--line); padding: 4px 10px; margin: 8px 0; }
.call.passed { border-color: var(--ok); } .call.failed { border-color: var(--bad); } .call.skipped { border-color: #aab; }
.call-name { font-weight: 700; font-size: 14px; }
pre { background: var(--soft); padding: 6px 8px; border-radius: 4px; margin: 4px 0; overflow-x: auto;
      white-space: pre-wrap; word-break: break-word; font-size: 12px; }
.label { color: #5f6673; font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
ul.checks { margin: 2px 0; padding-left: 18px; }
details summary { cursor: pointer; color: #3b4a63; }
img.thumb { max-width: 320px; }
"""

# No script may run and nothing may load from outside the page (links still navigate).
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _json(value: Any) -> str:
    """One line when short, indented otherwise."""
    flat = json.dumps(value, ensure_ascii=False, default=str)
    return flat if len(flat) <= 100 else json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _page(title: str, body: str) -> str:
    generated = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        "<meta name=\"referrer\" content=\"no-referrer\">\n"
        f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n{body}\n"
        f"<footer class=\"dim\">owrl report · generated {esc(generated)}</footer>\n</body>\n</html>\n"
    )


def _facts(rows: Iterable[tuple[str, Any]]) -> str:
    items = "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in rows if v not in (None, ""))
    return f'<dl class="facts">{items}</dl>'


def _badge(text: str, cls: str) -> str:
    return f'<span class="badge {cls}">{esc(text)}</span>'


def _ms(value: Optional[float]) -> str:
    if value is None:
        return ""
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.0f} ms"


# ---------------------------------------------------------------------------- run report


def _screenshot(run_dir: Path, name: Optional[str]) -> str:
    """The step's screenshot as an <img> with a data URI; only files inside the run folder."""
    if not name:
        return '<p class="dim">no screenshot</p>'
    root = run_dir.resolve()
    path = (root / name).resolve()
    mime = _IMAGE_TYPES.get(path.suffix.lower())
    if root not in path.parents or mime is None:
        return f'<p class="bad">screenshot {esc(name)} refused: not an image inside the run folder</p>'
    try:
        data = base64.b64encode(path.read_bytes()).decode("ascii")
    except OSError:
        return f'<p class="bad">screenshot {esc(name)} is missing</p>'
    return f'<img class="shot" alt="screenshot {esc(name)}" src="data:{mime};base64,{data}">'


def _call(record: CallRecord) -> str:
    call = record.call
    expect = call.expect.model_dump(exclude_none=True) if call.expect else None
    parts = [f'<div class="call-head"><code class="call-name">{esc(call.name)}</code>']
    if record.skipped:
        state, mark = "skipped", _badge("not run", "dim")
    elif record.result is not None and not record.result.ok:
        state, mark = "failed", _badge("error", "bad")
    elif record.verdict is not None and not record.verdict.ok:
        state, mark = "failed", _badge("expectation failed", "bad")
    else:
        state, mark = "passed", _badge("ok", "ok")
    parts.append(f" {mark}")
    if record.duration_ms:
        parts.append(f' <span class="dim">{esc(_ms(record.duration_ms))}</span>')
    parts.append("</div>")
    parts.append(f'<div class="label">arguments</div><pre class="arguments">{esc(_json(call.arguments))}</pre>')
    if expect:
        parts.append(f'<div class="label">expects</div><pre class="expect">{esc(_json(expect))}</pre>')
    if record.skipped:
        parts.append(f'<p class="skip">not run: {esc(record.skip_reason or "an earlier call failed")}</p>')
    result = record.result
    if result is not None:
        if result.ok:
            parts.append(f'<div class="label">result</div><pre class="result">{esc(result.feedback or "(no feedback)")}</pre>')
        else:
            parts.append(f'<div class="label bad">error</div><pre class="result error">{esc(result.error)}</pre>')
        if result.answer is not None:
            parts.append(f'<div class="label">answer</div><pre class="answer">{esc(result.answer)}</pre>')
    verdict = record.verdict
    if verdict is not None:
        cls = "ok" if verdict.ok else "bad"
        word = "pass" if verdict.ok else "fail"
        checks = "".join(
            f'<li class="{"ok" if c.ok else "bad"}">{esc(c.key)}: {"met" if c.ok else "not met"}'
            + (f" — {esc(c.detail)}" if c.detail else "") + "</li>"
            for c in verdict.checks
        )
        parts.append(f'<div class="verdict {cls}"><span class="label">verdict</span> {_badge(word, cls)} '
                     f'{esc(verdict.describe())}'
                     + (f' <span class="dim">(waited {esc(_ms(verdict.waited_ms))})</span>' if verdict.waited_ms else "")
                     + f'<ul class="checks">{checks}</ul></div>')
    return f'<div class="call {state}">{"".join(parts)}</div>'


def _step(run_dir: Path, step: Step, total: int) -> str:
    obs, turn = step.observation, step.turn
    right = []
    if turn.thought:
        right.append(f'<div class="label">thought</div><div class="thought">{esc(turn.thought)}</div>')
    if turn.parse_error:
        right.append(f'<div class="label bad">unreadable answer</div><pre class="parse-error">{esc(turn.parse_error)}</pre>')
    if turn.end:
        right.append(f'<div class="label">policy ended</div><pre class="end">{esc(turn.end)}</pre>')
    if step.calls:
        right.append("".join(_call(r) for r in step.calls))
    elif not turn.parse_error and not turn.end:
        right.append('<p class="dim">(no calls)</p>')
    if step.feedback:
        right.append(f'<div class="label">feedback to the policy</div><pre class="feedback">{esc(step.feedback)}</pre>')
    if turn.raw:
        right.append(f"<details><summary>raw model output</summary><pre>{esc(turn.raw)}</pre></details>")
    if obs.aria:
        right.append(f"<details><summary>page snapshot</summary><pre>{esc(obs.aria)}</pre></details>")
    timing = " · ".join(f"{k.removesuffix('_ms')} {_ms(v)}" for k, v in step.timings.items())
    tabs = f" · {len(obs.tabs)} tabs" if len(obs.tabs) > 1 else ""
    head = (f'<h2>Step {step.index + 1} of {total} · <span class="url">{esc(obs.url)}</span></h2>'
            f'<p class="dim">{esc(obs.title)}{esc(tabs)}{" · " + esc(timing) if timing else ""}</p>')
    return (f'<section class="step" id="step-{step.index + 1}" data-index="{step.index}">{head}'
            f'<div class="step-body"><div>{_screenshot(run_dir, obs.screenshot_file)}</div>'
            f'<div>{"".join(right)}</div></div></section>')


def _judgements(traj: Trajectory) -> str:
    if not traj.judgements:
        return '<h2>Judgements</h2><p class="dim">not judged</p>'
    rows = []
    for j in traj.judgements:
        label, cls = {True: ("success", "ok"), False: ("failure", "bad"), None: ("no label", "warn")}[j.success]
        rows.append(f'<tr class="judgement"><td>{esc(j.judge)}</td><td>{_badge(label, cls)}</td>'
                    f'<td class="num">{j.score:.2f}</td><td>{esc(j.reason)}</td></tr>')
    return ('<h2>Judgements</h2><table class="judgements"><tr><th>judge</th><th>label</th>'
            f'<th class="num">score</th><th>reason</th></tr>{"".join(rows)}</table>')


def run_report_html(run_dir: Union[str, Path]) -> str:
    """The HTML page of a run folder (its ``trajectory.json`` and screenshots)."""
    run_dir = Path(run_dir)
    traj = load_trajectory(run_dir / "trajectory.json")
    task, out = traj.task, traj.outcome
    if out is None:
        status = _badge("unfinished", "warn")
        outcome_rows: list[tuple[str, Any]] = [("status", status)]
    else:
        status = _badge(out.status, _STATUS_CLASS.get(out.status, "warn"))
        outcome_rows = [("status", status), ("answer", f'<span class="answer">{esc(out.answer)}</span>' if out.answer is not None else None)]
        if out.failure is not None:
            outcome_rows.append(("failure", f"<code>{esc(out.failure.kind)}</code> {esc(out.failure.detail)}"))
    if traj.reward is not None:
        outcome_rows.append(("reward", esc(f"{traj.reward:g}")))
    check = traj.metadata.get("suite_check")
    if isinstance(check, dict):
        outcome_rows.append(("suite check", esc(f"{'success' if check.get('success') else 'failure'}, "
                                                 f"score {check.get('score')} — {check.get('reason', '')}")))
    policy = " · ".join(esc(p) for p in (traj.policy.name, traj.policy.model, traj.policy.revision) if p)
    header = (
        f'<header><div class="label">task {esc(task.id)}</div><h1 class="intent">{esc(task.intent)}</h1>'
        + _facts([("start URL", esc(task.metadata.get("given_start_url") or task.start_url)),
                  ("suite", esc(task.suite)), ("expected answer", esc(task.answer)),
                  ("policy", policy), ("started", esc(traj.started_at)), ("ended", esc(traj.ended_at)),
                  ("steps", esc(len(traj.steps))), ("run folder", esc(run_dir))])
        + "</header>"
    )
    body = ['<h2>Outcome</h2>', _facts(outcome_rows)]
    if traj.warnings:
        body.append('<h2>Warnings</h2><ul class="warnings">'
                    + "".join(f'<li class="warn">{esc(w)}</li>' for w in traj.warnings) + "</ul>")
    body.append(_judgements(traj))
    body.append("<h2>Steps</h2>")
    if not traj.steps:
        body.append('<p class="dim">no steps</p>')
    body.extend(_step(run_dir, s, len(traj.steps)) for s in traj.steps)
    return _page(f"owrl run · {task.intent[:80]}", header + "<main>" + "".join(body) + "</main>")


def write_run_report(run_dir: Union[str, Path], out: Union[str, Path, None] = None) -> Path:
    """Write the run's report (default ``RUN/report.html``) and return its path."""
    run_dir = Path(run_dir)
    target = Path(out) if out else run_dir / REPORT_NAME
    _write(target, run_report_html(run_dir))
    return target


def _write(target: Path, text: str) -> None:
    write_atomic(target, text)


# ---------------------------------------------------------------------------- evaluation report


def _rate(block: dict[str, Any]) -> str:
    low, high = block.get("ci95", [0.0, 0.0])
    return f"{block.get('success_rate', 0.0):.0%} <span class=\"dim\">[{low:.0%}, {high:.0%}]</span>"


def _summary_row(name: str, b: dict[str, Any], cls: str = "") -> str:
    return (f'<tr class="{cls}"><td>{name}</td><td class="num">{esc(b.get("episodes", 0))}</td>'
            f'<td class="num">{esc(b.get("successes", 0))}</td><td class="num rate">{_rate(b)}</td>'
            f'<td class="num">{b.get("mean_score", 0.0):.2f}</td><td class="num">{b.get("mean_steps", 0.0):.1f}</td>'
            f'<td class="num">{b.get("mean_seconds", 0.0):.1f} s</td><td class="num">{esc(b.get("infra_errors", 0))}</td></tr>')


def _find_run(eval_dir: Path, recorded: Optional[str]) -> Optional[Path]:
    """The run folder of an episode: its recorded path, else the same name under EVAL/runs
    (the recorded path is relative to where ``owrl eval`` ran)."""
    if not recorded:
        return None
    candidates = [eval_dir / "runs" / Path(recorded).name, Path(recorded)]
    return next((c for c in candidates if (c / "trajectory.json").is_file()), None)


def _run_report_for(run_dir: Path) -> tuple[Optional[Path], Optional[str], str]:
    """(report path, intent, problem) for one episode's run; reports already newer than the
    trajectory are kept, so a resumed evaluation writes only the new ones."""
    target = run_dir / REPORT_NAME
    traj_file = run_dir / "trajectory.json"
    try:
        intent = load_trajectory(traj_file).task.intent
        if not target.exists() or target.stat().st_mtime < traj_file.stat().st_mtime:
            write_run_report(run_dir)
    except (UsageError, OSError) as err:
        return None, None, str(err)
    return target, intent, ""


def eval_report_html(eval_dir: Union[str, Path], out: Union[str, Path, None] = None) -> str:
    """The HTML page of an evaluation folder; writes each episode's run report on the way.
    Links are relative to ``out`` (default ``EVAL/report.html``)."""
    eval_dir = Path(eval_dir)
    page_dir = (Path(out) if out else eval_dir / REPORT_NAME).resolve().parent
    records = read_records(eval_dir / "episodes.jsonl")
    summary_file = eval_dir / "summary.json"
    try:
        summary = json.loads(summary_file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        summary = summarise(records)  # an interrupted evaluation has episodes but no summary yet
    if summary.get("per_task"):  # the summary's tasks only, as in `owrl eval`'s table
        records = [r for r in records if r.task_id in summary["per_task"]]
    rows = []
    for r in records:
        run_dir = _find_run(eval_dir, r.run_dir)
        report, intent, problem = _run_report_for(run_dir) if run_dir else (None, None, "run folder not found")
        if report is not None:
            href = Path(os.path.relpath(report.resolve(), page_dir)).as_posix()
            link = f'<a class="run-link" href="{esc(href)}">run report</a>'
        else:
            link = f'<span class="bad">{esc(problem)}</span>'
        label, cls = {True: ("success", "ok"), False: ("failure", "bad"), None: ("infra error", "warn")}[r.success]
        rows.append(
            f'<tr class="episode"><td><code>{esc(r.key)}</code></td><td class="intent">{esc(intent)}</td>'
            f'<td>{_badge(label, cls)}</td><td>{esc(r.status)}</td><td class="num">{r.score:.2f}</td>'
            f'<td class="num">{esc(r.steps)}</td><td class="num">{r.seconds:.1f} s</td>'
            f'<td>{esc(r.failure)}</td><td class="answer">{esc(r.answer)}</td><td>{link}</td></tr>'
        )
    head = ("<tr><th>task</th><th class=\"num\">episodes</th><th class=\"num\">successes</th>"
            "<th class=\"num\">success [95% CI]</th><th class=\"num\">mean score</th><th class=\"num\">mean steps</th>"
            "<th class=\"num\">mean time</th><th class=\"num\">infra errors</th></tr>")
    per_task = "".join(_summary_row(f"<code>{esc(tid)}</code>", b, "task") for tid, b in summary.get("per_task", {}).items())
    title = " · ".join(esc(summary.get(k)) for k in ("suite", "policy", "judge") if summary.get(k)) or esc(eval_dir.name)
    header = (f'<header><div class="label">evaluation</div><h1>{title}</h1>'
              + _facts([("folder", esc(eval_dir)), ("episodes", esc(summary.get("episodes", len(records)))),
                        ("success rate", _rate(summary)), ("infra errors", esc(summary.get("infra_errors", 0)))])
              + "</header>")
    body = (
        '<h2>Summary</h2><p class="dim">Success rate with its Wilson 95% interval; infrastructure errors are '
        'left out of the rate.</p>'
        f'<table class="summary">{head}{_summary_row("<strong>overall</strong>", summary, "overall")}</table>'
        f'<h2>Per task</h2><table class="per-task">{head}{per_task}</table>'
        '<h2>Episodes</h2><table class="episodes"><tr><th>episode</th><th>task</th><th>judged</th><th>status</th>'
        '<th class="num">score</th><th class="num">steps</th><th class="num">time</th><th>failure</th>'
        f'<th>answer</th><th>report</th></tr>{"".join(rows)}</table>'
    )
    return _page(f"owrl eval · {html.unescape(title)}", header + "<main>" + body + "</main>")


def write_eval_report(eval_dir: Union[str, Path], out: Union[str, Path, None] = None) -> Path:
    """Write the evaluation's report (default ``EVAL/report.html``) and its runs' reports."""
    eval_dir = Path(eval_dir)
    target = Path(out) if out else eval_dir / REPORT_NAME
    _write(target, eval_report_html(eval_dir, target))
    return target


# ---------------------------------------------------------------------------- batch report

#: Rows whose last screenshot a batch page embeds (the rows that did not succeed, in order):
#: a page of a 10,000-row batch stays readable.
BATCH_SHOTS = 200

_BATCH_CLASS = {**_STATUS_CLASS, "needs_review": "warn", "pending": "warn"}


def _last_shot(run_dir: Path) -> Optional[str]:
    """The file name, inside ``run_dir``, of the last screenshot its trajectory recorded."""
    try:
        traj = load_trajectory(run_dir / "trajectory.json")
    except (UsageError, OSError):
        return None
    names = [s.observation.screenshot_file for s in traj.steps if s.observation.screenshot_file]
    return names[-1] if names else None


def _cells(values: Any) -> str:
    if not isinstance(values, dict) or not values:
        return ""
    return "".join(f"<div><code>{esc(k)}</code> {esc(_json(v))}</div>" for k, v in values.items())


def batch_report_html(batch_dir: Union[str, Path], out: Union[str, Path, None] = None) -> str:
    """The HTML page of a batch folder (its ``batch.json``): the counts, then one line per row
    with its inputs, outputs, status, failure and, for a row that did not succeed, its last
    screenshot; each row that ran links to its run's page (written next to its trajectory)."""
    batch_dir = Path(batch_dir)
    page_dir = (Path(out) if out else batch_dir / REPORT_NAME).resolve().parent
    try:
        summary = json.loads((batch_dir / "batch.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise UsageError(f"{batch_dir / 'batch.json'}: cannot be read ({err}); run the batch command again "
                         "with this --out to write it") from None
    if not isinstance(summary, dict) or not isinstance(summary.get("results"), list):
        raise UsageError(f"{batch_dir / 'batch.json'}: not a batch summary (no results)")
    rows, shots = [], 0
    for r in summary["results"]:
        if not isinstance(r, dict):
            continue
        status = str(r.get("status") or "")
        run_dir = _find_run(batch_dir, r.get("run_dir"))
        link, shot = "", ""
        if run_dir is not None:
            report, _intent, problem = _run_report_for(run_dir)
            if report is not None:
                href = Path(os.path.relpath(report.resolve(), page_dir)).as_posix()
                link = f'<a class="run-link" href="{esc(href)}">run report</a>'
            else:
                link = f'<span class="bad">{esc(problem)}</span>'
            if status != "success" and shots < BATCH_SHOTS:
                name = _last_shot(run_dir)
                if name:
                    shot, shots = _screenshot(run_dir, name).replace('class="shot"', 'class="shot thumb"'), shots + 1
        detail = esc(r.get("detail"))
        failure: str = f"<code>{esc(r.get('failure'))}</code> {detail}" if r.get("failure") else (detail or "")
        earlier = [a for a in (r.get("history") or []) if isinstance(a, dict)]
        if earlier:  # every earlier attempt, oldest first, each linking to its own run folder's page
            items = []
            for a in earlier:
                what = f"{esc(a.get('status'))}" + (f" <code>{esc(a.get('failure'))}</code>" if a.get("failure") else "")
                before = _find_run(batch_dir, a.get("run_dir"))
                its_page = _run_report_for(before)[0] if before is not None else None
                to = Path(os.path.relpath(its_page.resolve(), page_dir)).as_posix() if its_page is not None else None
                items.append(f"<li>{what} {esc(a.get('detail'))}" + (f' <a href="{esc(to)}">run report</a>' if to else "")
                             + "</li>")
            failure += f'<details class="history"><summary>{len(earlier)} earlier attempt(s)</summary><ol>{"".join(items)}</ol></details>'
        rows.append(
            f'<tr class="row {esc(status)}"><td class="num">{esc(r.get("row"))}</td>'
            f'<td>{_badge(status, _BATCH_CLASS.get(status, "warn"))}</td><td>{_cells(r.get("inputs"))}</td>'
            f'<td>{_cells(r.get("outputs"))}</td><td class="failure">{failure}</td><td>{shot}</td><td>{link}</td></tr>')
    counts = [("rows", summary.get("rows")), ("succeeded", summary.get("succeeded")), ("failed", summary.get("failed")),
              ("needs review", summary.get("needs_review")), ("pending", summary.get("pending")),
              ("sessions renewed", summary.get("sessions_renewed") or None)]
    flow = summary.get("flow") or batch_dir.name
    header = (f'<header><div class="label">batch</div><h1>{esc(flow)}</h1>'
              + _facts([("folder", esc(batch_dir)), ("inputs", esc(summary.get("inputs_file"))),
                        *((k, esc(v)) for k, v in counts if v is not None),
                        ("stopped", esc(summary.get("stopped")))])
              + "</header>")
    body = ('<h2>Rows</h2><table class="rows"><tr><th class="num">row</th><th>status</th><th>inputs</th>'
            f'<th>outputs</th><th>failure</th><th>last screenshot</th><th>report</th></tr>{"".join(rows)}</table>')
    if shots >= BATCH_SHOTS:
        body += f'<p class="dim">Screenshots are shown for the first {BATCH_SHOTS} rows that did not succeed.</p>'
    return _page(f"owrl batch · {flow}", header + "<main>" + body + "</main>")


def write_batch_report(batch_dir: Union[str, Path], out: Union[str, Path, None] = None) -> Path:
    """Write the batch's page (default ``BATCH/report.html``) and its rows' run pages."""
    batch_dir = Path(batch_dir)
    target = Path(out) if out else batch_dir / REPORT_NAME
    _write(target, batch_report_html(batch_dir, target))
    return target


def write_report(path: Union[str, Path], out: Union[str, Path, None] = None) -> Path:
    """A run folder, an evaluation folder or a batch folder, told apart by what it holds."""
    p = Path(path)
    if (p / "trajectory.json").is_file():
        return write_run_report(p, out)
    if (p / "episodes.jsonl").is_file() or (p / "summary.json").is_file():
        return write_eval_report(p, out)
    if (p / "batch.json").is_file() or (p / "rows.jsonl").is_file():
        return write_batch_report(p, out)
    raise UsageError(f"{p}: not a run folder (trajectory.json), an evaluation folder (episodes.jsonl) or a "
                     "batch folder (batch.json); give one of those")
