"""Safe re-runs of a batch that creates records: --retry-failed runs only the failed rows (a
changed flow allowed), a row that failed or was killed after its point of no return (a call
marked commit) is needs_review and never re-run, and a batch failing the same way stops."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from owrl_cli import KEEP, owrl
from test_checkboxes_and_conditions import invoice_flow

from owrl_sdk.flows.batch import NEEDS_REVIEW, Batch
from owrl_sdk.scheduling.executors import WorkItem, WorkResult
from owrl_sdk.types import Task


def committing_flow(pause: float = 0.0) -> dict[str, Any]:
    flow = invoice_flow()
    submit = flow["turns"][4]["calls"][0]
    submit["commit"] = True  # the invoice exists once Submit is pressed
    if pause:
        flow["turns"].insert(5, {"calls": [{"name": "wait", "arguments": {"seconds": pause}}]})
    return flow


ROWS = ("customer,amount\n"
        "Globex Ltd,10\nInitech,20\nNobody Inc,30\nAcme Corp,-5\nUmbrella plc,50\nGlobex Ltd,60\n")


def batch(tmp_path: Path, site: str, *extra: str) -> tuple[int, dict[str, Any], str]:
    out = owrl("run", "--flow", "flow.json", "--inputs", "rows.csv", "--url", site, "--out", "batch", "--json", *extra,
               cwd=tmp_path)
    return out.returncode, (json.loads(out.stdout) if out.stdout.strip() else {}), out.stderr


def by_customer(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["inputs"]["customer"]: r for r in summary["results"]}


@pytest.mark.slow
def test_retry_failed_runs_only_the_fixed_row_and_never_the_committed_one(tmp_path, invoice_site):
    (tmp_path / "flow.json").write_text(json.dumps(committing_flow()))
    (tmp_path / "rows.csv").write_text(ROWS)
    code, first, err = batch(tmp_path, invoice_site)
    assert code == 1, err
    rows = by_customer(first)
    assert (first["succeeded"], first["failed"], first["needs_review"]) == (4, 1, 1), first
    assert rows["Nobody Inc"]["status"] == "fail" and rows["Nobody Inc"]["committed"] is None
    review = rows["Acme Corp"]
    assert review["status"] == NEEDS_REVIEW and "#submit" in review["committed"]
    assert "Amount must be a positive number" in review["detail"]  # the site's own words
    # the progress line counts as the summary does: the row past its commit is no "failed" one
    assert "1 need review" in err and "2 failed" not in err, err[-2000:]
    assert "after its point of no return" in review["detail"]

    # the person fixes the bad customer; the row with the bad amount may have made an invoice: left alone
    (tmp_path / "rows.csv").write_text(ROWS.replace("Nobody Inc", "Umbrella plc"))
    code, second, err = batch(tmp_path, invoice_site, "--retry-failed")
    assert code == 1, err  # the needs_review row still needs a person
    assert second["ran"] == 1, second
    rows = by_customer(second)
    assert (second["succeeded"], second["failed"], second["needs_review"]) == (5, 0, 1), second
    assert rows["Acme Corp"]["status"] == NEEDS_REVIEW
    assert "1 needs review" in err


@pytest.mark.slow
def test_a_changed_flow_is_refused_on_the_old_folder_unless_retrying_the_failed_rows(tmp_path, invoice_site):
    flow = committing_flow()
    flow["turns"][1]["calls"][1]["arguments"]["selector"] = "role=option[name=\"{{input:customer}} Corp\"]"
    (tmp_path / "flow.json").write_text(json.dumps(flow))
    (tmp_path / "rows.csv").write_text("customer,amount\nGlobex Ltd,10\nAcme,20\n")
    code, first, err = batch(tmp_path, invoice_site)
    assert code == 1 and (first["succeeded"], first["failed"]) == (1, 1), first  # "Acme Corp" matched
    (tmp_path / "flow.json").write_text(json.dumps(committing_flow()))  # the fix
    code, refused, err = batch(tmp_path, invoice_site)
    assert code == 2 and "--retry-failed runs its failed rows again with the changed flow" in err
    code, second, err = batch(tmp_path, invoice_site, "--retry-failed")
    assert code == 0, err
    assert second["ran"] == 1 and second["succeeded"] == 2
    rows = {r["row"]: r for r in second["results"]}
    assert rows[1]["flow"] != rows[2]["flow"]  # each row says which version of the flow it ran with
    kept = list((tmp_path / "batch").glob("flow-*.json"))
    assert len(kept) == 1 and rows[2]["flow"] in kept[0].name


@pytest.mark.slow
def test_a_row_killed_after_its_commit_is_needs_review_and_not_run_again(tmp_path, invoice_site):
    (tmp_path / "flow.json").write_text(json.dumps(committing_flow(pause=5)))
    (tmp_path / "rows.csv").write_text("customer,amount\nGlobex Ltd,10\nInitech,20\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OWRL_") or k in KEEP}
    proc = subprocess.Popen([sys.executable, "-m", "owrl_sdk", "run", "--flow", "flow.json", "--inputs", "rows.csv",
                             "--url", invoice_site, "--out", "batch"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    commits = tmp_path / "batch" / "commits.jsonl"
    deadline = time.monotonic() + 240
    while not (commits.exists() and commits.read_text().strip()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)  # the machine died during the 5 s after Submit
    proc.communicate(timeout=60)
    code, summary, err = batch(tmp_path, invoice_site)
    assert code == 1, err
    rows = by_customer(summary)
    assert rows["Globex Ltd"]["status"] == NEEDS_REVIEW
    assert rows["Globex Ltd"]["failure"] == "task.interrupted_after_commit"
    assert "check the site" in rows["Globex Ltd"]["detail"] and rows["Globex Ltd"]["run_dir"] is None
    assert rows["Initech"]["status"] == "success" and summary["ran"] == 2  # the review record and Initech
    code, again, err = batch(tmp_path, invoice_site)  # resuming again runs nothing
    assert again["ran"] == 0 and by_customer(again)["Globex Ltd"]["status"] == NEEDS_REVIEW


@pytest.mark.slow
def test_a_batch_failing_the_same_way_stops(tmp_path, invoice_site):
    flow = committing_flow()
    flow["turns"][0]["calls"][2]["arguments"]["selector"] = "role=button[name=\"Sign in\"]"  # renamed on the site
    (tmp_path / "flow.json").write_text(json.dumps(flow))
    (tmp_path / "rows.csv").write_text("customer,amount\n" + "".join(f"Initech,{n}\n" for n in range(1, 7)))
    code, summary, err = batch(tmp_path, invoice_site, "--stop-after-same-failure", "2")
    assert code == 1
    assert summary["failed"] == 2 and summary["pending"] == 4 and summary["ran"] == 2
    assert "2 rows in a row failed with" in summary["stopped"] and "stopped:" in err


def test_an_infra_error_before_the_commit_is_retried_and_after_it_is_not(tmp_path, invoice_site):
    (tmp_path / "flow.json").write_text(json.dumps(committing_flow()))
    (tmp_path / "rows.csv").write_text("customer,amount\nInitech,20\n")
    b = Batch(tmp_path / "flow.json", tmp_path / "rows.csv", tmp_path / "batch", url=invoice_site, retries=2)
    b.out.mkdir()  # as run_async makes it; the episodes' results are handed to _finished by hand here
    row = b.rows[0]
    item = WorkItem(Task(intent="x", start_url=invoice_site, metadata={"inputs": {}}), 0, group=row.key)

    def infra(episode: int) -> WorkResult:
        from owrl_sdk.scheduling.executors import failed_record

        return WorkResult(WorkItem(item.task, episode, group=row.key),
                          failed_record(item.task, episode, "infra.browser_crash", 1.0), error="crashed")

    assert b._finished(row, infra(0)) and b._finished(row, infra(1))  # two retries
    assert not b._finished(row, infra(2)) and b.results[row.key].status == "infra_error"
    assert b.results[row.key].attempts == 3
    b._committed[row.key] = 'click({"selector": "#submit"})'
    assert not b._finished(row, infra(0))  # past the point of no return: never retried
    assert b.results[row.key].status == NEEDS_REVIEW
