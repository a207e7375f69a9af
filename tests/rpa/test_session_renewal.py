"""Sessions that renew: a flow names its log-in flow and the sign that the session is gone; when
the sign shows, the row logs in again and starts over, unless it passed its point of no
return. On a purchase-order back office (tests/rpa/back_office.py) whose sessions expire after a
few page views, with a CSRF token on its log-in form, conditions on the amount read from the
page, and a server that refuses a second decision."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


from back_office import ORDERS, PASSWORD
from owrl_sdk.config import Settings
from owrl_sdk.flows.batch import Batch
from owrl_sdk.formats.documents import load_flow

def rows() -> list[dict[str, Any]]:
    out = []
    for n, po in enumerate(list(ORDERS)[:6]):
        reject = n % 3 == 2
        out.append({"po": po, "decision": "reject" if reject else "approve", "reason": "over budget" if reject else ""})
    return out


def signed_in(tmp_path: Path, base: str) -> Path:
    """A saved session, as ``owrl run --flow login.json --save-storage`` leaves one."""
    from owrl_sdk import Agent

    session = tmp_path / "state" / "ops.json"
    settings = Settings(runs_dir=str(tmp_path / "runs"), save_storage=str(session))
    with Agent(policy="scripted", flow=load_flow(tmp_path / "login.json"), settings=settings) as agent:
        assert agent.run_sync("sign in", base + "/login").outcome.status == "success"
    return session


def test_a_batch_logs_in_again_when_its_session_expires_and_decides_every_order_once(office, tmp_path):
    """Sessions last two orders: rows 3 and 5 find the log-in page, log in again, save the new
    session for the rows after them (the same file is loaded and saved) and start over."""
    state, base = office
    state.expire_after = 2
    session = signed_in(tmp_path, base)
    settings = Settings(runs_dir=str(tmp_path / "runs"), storage_state=str(session), save_storage=str(session))
    summary = Batch(load_flow(tmp_path / "decide.json"), rows(), tmp_path / "batch", settings=settings, workers=1).run()
    assert (summary["succeeded"], summary["failed"], summary["needs_review"]) == (6, 0, 0), summary["results"]
    assert summary["sessions_renewed"] == 2 and state.logins == 3  # the first log-in, then one per expiry
    assert [r["row"] for r in summary["results"] if r["session_renewals"]] == [3, 5]
    # every order decided once, as asked; the budget box ticked where the amount needed it
    assert sorted(state.log) == sorted((r["po"], r["decision"]) for r in rows()) and state.refused == []
    # the trajectory says why the flow logged in again; the password is in no file
    run = Path(summary["results"][2]["run_dir"])
    text = (run / "trajectory.json").read_text()
    thoughts = [s["turn"]["thought"] for s in json.loads(text)["steps"]]
    assert any(t.startswith("(the session is gone: the address holds '/login'; logging in again)") for t in thoughts)
    assert any(t.startswith("(logged in again") for t in thoughts)
    assert PASSWORD not in text


def test_a_session_gone_after_the_point_of_no_return_is_not_started_again(office, tmp_path):
    """The decision was sent and the confirmation asks for a log-in: the row needs review, and
    the order is never decided a second time."""
    state, base = office
    state.expire_on_done = True
    session = signed_in(tmp_path, base)
    settings = Settings(runs_dir=str(tmp_path / "runs"), storage_state=str(session))
    summary = Batch(load_flow(tmp_path / "decide.json"), rows()[:1], tmp_path / "batch", settings=settings).run()
    (row,) = summary["results"]
    assert row["status"] == "needs_review" and "after its point of no return" in row["detail"], row
    assert state.log == [("PO-1001", "approve")] and state.logins == 1 and row["session_renewals"] == 0


def test_a_log_in_that_fails_ends_the_row_with_the_page_s_words(office, tmp_path, monkeypatch):
    state, base = office
    monkeypatch.setenv("OWRL_SECRET_BO_PASSWORD", "wrong")
    summary = Batch(load_flow(tmp_path / "decide.json"), rows()[:1], tmp_path / "batch",
                    settings=Settings(runs_dir=str(tmp_path / "runs"))).run()
    (row,) = summary["results"]
    assert row["status"] == "fail" and "logging in again failed" in row["detail"] and state.log == [], row
