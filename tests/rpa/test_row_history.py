"""A row's whole history: every attempt kept in order (retries in a run, and earlier runs), in
batch.json and batch.csv; and a row's identity by a key column (--key), so that editing its
values keeps its history and its point of no return. On the purchase-order back office."""

from __future__ import annotations

import csv
from typing import Any

import pytest

from owrl_sdk.config import Settings
from owrl_sdk.errors import UsageError
from owrl_sdk.flows.batch import Batch
from owrl_sdk.formats.documents import load_flow


def run(tmp_path, rows: list[dict[str, Any]], **options: Any) -> dict[str, Any]:
    settings = Settings(runs_dir=str(tmp_path / "runs"))
    return Batch(load_flow(tmp_path / "decide.json"), rows, tmp_path / "batch", settings=settings, **options).run()


def test_a_fixed_row_keeps_its_failed_attempt_in_the_summary_and_the_table(office, tmp_path):
    office, _ = office
    """A reject without a reason is refused by the site when it is sent, after the point of no
    return: the row needs review, in the page's words. Someone checks the site (nothing was
    decided), gives the reason and runs it again (the row keyed by its order number): it
    succeeds, and its first attempt stays."""
    first = run(tmp_path, [{"po": "PO-1003", "decision": "reject", "reason": ""}], key="po")
    (row,) = first["results"]
    assert row["status"] == "needs_review" and '"PO-1003 decided: reject" is not on the page' in row["detail"]
    assert row["history"] == [] and office.log == []
    again = run(tmp_path, [{"po": "PO-1003", "decision": "reject", "reason": "duplicate order"}], key="po",
                retry_failed=True, retry_needs_review=True)
    (row,) = again["results"]
    assert row["status"] == "success" and row["key"] == "po=PO-1003"
    (before,) = row["history"]
    assert before["status"] == "needs_review" and "after its point of no return" in before["detail"]
    assert before["run_dir"] != row["run_dir"] and before["ended_at"] <= row["ended_at"]
    assert office.log == [("PO-1003", "reject")]
    with open(tmp_path / "batch" / "batch.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert table[0]["status"] == "success" and table[0]["earlier attempts"].startswith("1. needs_review (")
    assert "after its point of no return" in table[0]["earlier attempts"]
    page = (tmp_path / "batch" / "report.html").read_text()
    assert "1 earlier attempt(s)" in page and page.count("run report") == 2  # this attempt's and the earlier one's


def test_a_key_keeps_a_rows_point_of_no_return_when_its_values_are_edited(office, tmp_path):
    office, _ = office
    """The decision went out and the confirmation asked for a log-in: needs review. Someone edits
    the row's reason and runs the batch again: the row is the same order, so it is not run
    (without --key it would be a new row, decided a second time)."""
    office.expire_on_done = True
    session_free = [{"po": "PO-1001", "decision": "approve", "reason": ""}]
    first = run(tmp_path, session_free, key="po")
    assert first["results"][0]["status"] == "needs_review"
    edited = [{"po": "PO-1001", "decision": "approve", "reason": "checked by phone"}]
    office.expire_on_done = False
    again = run(tmp_path, edited, key="po", retry_failed=True)
    (row,) = again["results"]
    assert row["status"] == "needs_review" and again["ran"] == 0
    assert office.log == [("PO-1001", "approve")] and office.refused == []


def test_a_key_names_one_row():
    flow = {"task": "t", "start_url": "http://127.0.0.1:9/", "inputs": {"po": {"type": "string"}},
            "turns": [{"calls": [{"name": "done"}]}]}
    from owrl_sdk.formats.documents import flow_from_data

    with pytest.raises(UsageError, match="rows 1 and 2 are both po=PO-1"):
        Batch(flow_from_data(flow), [{"po": "PO-1"}, {"po": "PO-1"}], key="po", settings=Settings())
    with pytest.raises(UsageError, match="row 2 has no po"):
        Batch(flow_from_data(flow), [{"po": "PO-1"}, {"po": ""}], key="po", settings=Settings())
