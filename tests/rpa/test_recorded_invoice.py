"""The whole path on the invoice form, as an operations engineer takes it: a person (Playwright
driving the recorder's own page, with trusted input only) records the form with its five
fields named in --input-fields and marks the confirmation with Alt+Shift+E; the raw
recording, unedited, replays with other values for all five; and it runs a 10-row XLSX batch
in which the 2 bad rows fail alone, each with the site's own message in its failure; once
one is fixed in the workbook, --retry-failed runs the failed rows alone and the fixed one succeeds."""

from __future__ import annotations

import asyncio
import datetime
import json
from pathlib import Path
from typing import Any

import pytest
from owrl_cli import owrl

from owrl_sdk.browser.chromium import find_chromium

openpyxl = pytest.importorskip("openpyxl", reason="the excel extra (scripts/setup.sh installs it)")
pytestmark = pytest.mark.skipif(find_chromium(check_managed=False) is None, reason="no Chromium on this machine")

FIELDS = ("customer", "amount", "currency", "due", "priority")


async def person(page: Any) -> None:
    await page.get_by_label("User").click()
    await page.keyboard.type("ops", delay=5)
    await page.get_by_label("Password").click()
    await page.keyboard.type("s3cret", delay=5)
    await page.get_by_role("button", name="Log in").click()
    await page.get_by_role("heading", name="New invoice").wait_for()
    await page.get_by_label("Customer").click()
    await page.keyboard.type("Globex Ltd", delay=5)
    await page.get_by_role("option", name="Globex Ltd").click()  # the suggestion shows after 300 ms
    await page.get_by_label("Amount").click()
    await page.keyboard.type("120.5", delay=5)
    await page.get_by_label("Currency").focus()
    await page.keyboard.type("u")  # US dollar, chosen by keyboard as a person does
    await page.get_by_label("Due date").focus()
    await page.keyboard.type("03152027", delay=60)
    await page.get_by_label("Priority").check()
    await page.get_by_role("button", name="Submit").click()
    await page.get_by_text("created for Globex Ltd").wait_for()
    await asyncio.sleep(1.5)  # what the submit changed is reported once the page settles
    await page.locator("#status").hover()
    await page.keyboard.press("Alt+Shift+E")
    await asyncio.sleep(0.5)


def record(site: str, out: Path) -> dict[str, Any]:
    from owrl_sdk.config import Settings
    from owrl_sdk.contract.plugins import Plugins
    from owrl_sdk.recorder import Recorder

    async def go() -> None:
        recorder = Recorder(site, out, Settings(headless=True), Plugins(), start_url=site, input_fields=FIELDS)
        page = await recorder.start()
        try:
            await person(page)
        finally:
            await recorder.stop()

    asyncio.run(go())
    return json.loads(out.read_text())


@pytest.mark.slow
def test_a_recording_of_the_invoice_form_replays_with_five_inputs_and_runs_a_workbook(tmp_path, invoice_site):
    flow = record(invoice_site, tmp_path / "invoice.json")
    assert sorted(flow["inputs"]) == sorted(FIELDS), flow["inputs"]
    assert flow["inputs"]["priority"]["default"] is True and flow["inputs"]["currency"]["default"] == "USD"
    assert flow["inputs"]["due"]["default"] == "2027-03-15"
    text = json.dumps(flow)
    assert "s3cret" not in text and "{{secret:PASSWORD}}" in text
    assert "Globex" not in text.replace('"default": "Globex Ltd"', "")  # every later use quotes the input
    calls = [c for turn in flow["turns"] for c in turn["calls"]]
    assert [c for c in calls if c["name"] == "extract"][0]["save_as"], calls

    secret = {"OWRL_SECRET_PASSWORD": "s3cret"}
    # the raw recording, with other values for all five fields
    replay = owrl("run", "--flow", "invoice.json", "--json", "--out", "runs", "--input", "customer=Initech",
                  "--input", "amount=75", "--input", "currency=GBP", "--input", "due=2027-06-01",
                  "--input", "priority=true", cwd=tmp_path, env=secret, timeout=300)
    assert replay.returncode == 0, replay.stdout[-3000:] + replay.stderr[-3000:]
    result = json.loads(replay.stdout)
    (confirmation,) = result["outputs"].values()
    assert "created for Initech: 75 GBP, due 2027-06-01 (priority" in confirmation, result

    # ten rows from a workbook; rows 4 and 8 have amounts the site refuses
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(list(FIELDS))
    names = ["Globex Ltd", "Initech", "Acme Corp", "Umbrella plc"]
    for i in range(10):
        amount = {3: -5, 7: 0}.get(i, 10 * (i + 1))
        sheet.append([names[i % 4], amount, ["EUR", "USD", "GBP"][i % 3], datetime.datetime(2027, 2, 1 + i), True])
    book.save(tmp_path / "rows.xlsx")
    batch = owrl("run", "--flow", "invoice.json", "--inputs", "rows.xlsx", "--out", "batch", "--json",
                 cwd=tmp_path, env=secret, timeout=600)
    assert batch.returncode == 1, batch.stderr[-3000:]  # some rows failed
    summary = json.loads(batch.stdout)
    assert (summary["succeeded"], summary["failed"]) == (8, 2), summary
    rows = sorted(summary["results"], key=lambda r: r["row"])
    assert [r["row"] for r in rows if r["status"] == "fail"] == [4, 8]
    for row in rows:
        if row["status"] == "fail":
            assert "Amount must be a positive number" in row["detail"], row
        else:
            (out,) = row["outputs"].values()
            assert f"created for {row['inputs']['customer']}" in out, row

    # the person fixes row 4's amount in the workbook; --retry-failed runs the failed rows again (row 8
    # too, unchanged: a failure of the network would be worth a retry), and none of the 8 that succeeded
    sheet.cell(row=5, column=2, value=40)
    book.save(tmp_path / "rows.xlsx")
    again = owrl("run", "--flow", "invoice.json", "--inputs", "rows.xlsx", "--out", "batch", "--json",
                 "--retry-failed", cwd=tmp_path, env=secret, timeout=600)
    assert again.returncode == 1, again.stderr[-3000:]  # row 8 still fails
    summary = json.loads(again.stdout)
    assert summary["ran"] == 2 and (summary["succeeded"], summary["failed"]) == (9, 1), summary
    rows = sorted(summary["results"], key=lambda r: r["row"])
    assert [r["row"] for r in rows if r["status"] == "fail"] == [8]
