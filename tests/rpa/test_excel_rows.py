"""A batch read from an Excel workbook, as an operations team keeps its rows: ten invoices in
the first sheet of an .xlsx file (a date cell, a TRUE/FALSE cell, a number cell, a formula, a
blank row), run through `owrl run --inputs rows.xlsx` on the invoice form."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest

from owrl_cli import owrl
from test_checkboxes_and_conditions import invoice_flow

from owrl_sdk.flows.batch import read_rows
from owrl_sdk.errors import UsageError

openpyxl = pytest.importorskip("openpyxl", reason="the excel extra (scripts/setup.sh installs it)")

CUSTOMERS = ["Globex Ltd", "Initech", "Acme Corp", "Umbrella plc"]


def workbook(path: Path, rows: list[list], header=("customer", "amount", "due", "priority")) -> Path:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(list(header))
    for row in rows:
        sheet.append(row)
    book.save(path)
    return path


def test_cells_keep_their_types_and_the_sheet_is_read_as_a_csv(tmp_path):
    rows = read_rows(workbook(tmp_path / "r.xlsx", [
        ["  Globex Ltd ", 12.5, datetime.datetime(2027, 2, 1), True],
        [None, None, None, None],  # a blank row: skipped
        ["Initech", 3, datetime.date(2027, 3, 4), False],
        ["Acme Corp", "=2+3", None, None],  # never opened in Excel: the formula has no value yet
    ]))
    assert [r.values for r in rows] == [
        {"customer": "Globex Ltd", "amount": 12.5, "due": "2027-02-01", "priority": True},
        {"customer": "Initech", "amount": 3, "due": "2027-03-04", "priority": False},
        {"customer": "Acme Corp"},
    ]
    assert [r.number for r in rows] == [1, 3, 4] and len({r.key for r in rows}) == 3
    with pytest.raises(UsageError, match="more than 2 rows"):
        read_rows(tmp_path / "r.xlsx", max_rows=2)
    with pytest.raises(UsageError, match="names 'amount' more than once"):
        read_rows(workbook(tmp_path / "dup.xlsx", [["x", 1]], header=("amount", "amount")))
    with pytest.raises(UsageError, match="column 3 has values but no name"):
        read_rows(workbook(tmp_path / "extra.xlsx", [["x", 1, "stray"]], header=("customer", "amount")))
    with pytest.raises(UsageError, match="only a header"):
        read_rows(workbook(tmp_path / "empty.xlsx", []))
    (tmp_path / "fake.xlsx").write_text("customer,amount\nx,1\n")  # a CSV saved under the wrong name
    with pytest.raises(UsageError, match="not readable as an Excel workbook"):
        read_rows(tmp_path / "fake.xlsx")


@pytest.mark.slow
def test_ten_invoices_from_a_workbook(tmp_path, invoice_site):
    rows = [[CUSTOMERS[i % 4], 10 * (i + 1), datetime.datetime(2027, 1, 10 + i), i % 3 == 0] for i in range(10)]
    workbook(tmp_path / "rows.xlsx", rows)
    (tmp_path / "flow.json").write_text(json.dumps(invoice_flow()))
    out = owrl("run", "--flow", "flow.json", "--inputs", "rows.xlsx", "--url", invoice_site, "--out", "batch",
               "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert (summary["succeeded"], summary["failed"]) == (10, 0), summary
    results = sorted(summary["results"], key=lambda r: r["row"])
    assert [r["inputs"]["customer"] for r in results] == [r[0] for r in rows]
    assert results[3]["inputs"]["due"] == "2027-01-13" and results[3]["inputs"]["priority"] is True
    assert all(r["outputs"]["confirmation"].startswith("Invoice INV-") for r in results), results[0]["outputs"]
    # Excel out too: batch.xlsx beside batch.csv, the same table
    sheet = openpyxl.load_workbook(tmp_path / "batch" / "batch.xlsx").active
    table = [[c.value for c in row] for row in sheet.iter_rows()]
    assert table[0][:2] == ["row", "status"] and [line[1] for line in table[1:]] == ["success"] * 10
