"""`owrl report BATCH_DIR`: a page of the batch that a browser opens: its counts, one line per
row with inputs, outputs and failure, the last screenshot of each row that did not succeed, and
links to the rows' run pages; every run folder has its own report.html."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from owrl_cli import owrl
from test_safe_reruns import committing_flow

from owrl_sdk.browser.chromium import find_chromium


@pytest.mark.slow
def test_the_batch_page_shows_each_row_and_links_its_run(tmp_path, invoice_site):
    (tmp_path / "flow.json").write_text(json.dumps(committing_flow()))
    (tmp_path / "rows.csv").write_text("customer,amount\nGlobex Ltd,10\nNobody Inc,20\nAcme Corp,-5\n")
    done = owrl("run", "--flow", "flow.json", "--inputs", "rows.csv", "--url", invoice_site, "--out", "batch",
                cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    batch = tmp_path / "batch"
    assert "report.html" in done.stderr and (batch / "report.html").is_file()  # written by the batch itself
    summary = json.loads((batch / "batch.json").read_text())
    for row in summary["results"]:  # every row's run folder has its page already
        assert (tmp_path / row["run_dir"] / "report.html").is_file(), row
    (batch / "report.html").unlink()
    made = owrl("report", "batch", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    page = Path(made.stdout.strip())
    assert page == Path("batch/report.html") or page.resolve() == (batch / "report.html").resolve()

    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(find_chromium(check_managed=False, headless=True).path))
        tab = browser.new_page()
        tab.goto((batch / "report.html").resolve().as_uri())
        assert tab.locator("h1").inner_text() == "flow.json"
        facts = tab.locator("dl.facts").inner_text()
        for fact in ("rows\n3", "succeeded\n1", "failed\n1", "needs review\n1"):
            assert fact in facts, facts
        lines = tab.locator("tr.row")
        assert lines.count() == 3
        good, bad, review = (lines.nth(i) for i in range(3))
        assert "success" in good.inner_text() and "INV-" in good.inner_text()  # its confirmation output
        assert good.locator("img").count() == 0
        assert "Nobody Inc" in bad.inner_text() and "policy.gave_up" in bad.inner_text()
        assert bad.locator("img.thumb").count() == 1
        assert bad.locator("img.thumb").evaluate("img => img.naturalWidth") > 0  # the image loads under the CSP
        assert "needs_review" in review.inner_text() and "Amount must be a positive number" in review.inner_text()
        review.locator("a.run-link").click()
        tab.wait_for_load_state()
        assert tab.url.endswith("/report.html") and "/runs/" in tab.url
        assert "Steps" in tab.locator("main").inner_text()
        browser.close()


def test_report_refuses_a_folder_that_is_none_of_the_three(tmp_path):
    (tmp_path / "empty").mkdir()
    done = owrl("report", "empty", cwd=tmp_path)
    assert done.returncode == 2
    assert "a batch folder (batch.json)" in done.stderr
