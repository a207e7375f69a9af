"""Limits on what a file or a page controls: sizes checked before anything is opened or kept."""

from __future__ import annotations

import time
import tracemalloc
import zipfile

import pytest
from security_support import attack

from owrl_sdk.flows.batch import read_rows
from owrl_sdk.errors import UsageError

pytest.importorskip("openpyxl")


def workbook(path, rows):
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    for row in rows:
        sheet.append(row)
    book.save(path)
    return path


def bomb(tmp_path, part: str, megabytes: int):
    """A real workbook whose ``part`` is (or is added as) ``megabytes`` of one repeated
    character (a few hundred kilobytes compressed)."""
    plain = workbook(tmp_path / "plain.xlsx", [["name"], ["a"]])
    out = tmp_path / "bomb.xlsx"
    with zipfile.ZipFile(plain) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == part:
                data = b"<sst>" + b"a" * (megabytes << 20) + b"</sst>"
            dst.writestr(item, data, compress_type=zipfile.ZIP_DEFLATED)
        if part not in src.namelist():  # a workbook that keeps its strings shared has this part
            dst.writestr(part, b"<sst>" + b"a" * (megabytes << 20) + b"</sst>", compress_type=zipfile.ZIP_DEFLATED)
    return out


@pytest.mark.parametrize("part", ["xl/sharedStrings.xml", "xl/worksheets/sheet1.xml"])
def test_a_workbook_that_unpacks_to_hundreds_of_megabytes_is_refused_before_it_is_opened(tmp_path, part):
    path = bomb(tmp_path, part, 100)
    assert path.stat().st_size < 2 << 20
    with attack("inputs", f"a {path.stat().st_size // 1024} KB .xlsx whose {part} unpacks to 100 MB",
                "part sizes read from the archive's directory, refused before opening"):
        tracemalloc.start()
        started = time.monotonic()
        try:
            with pytest.raises(UsageError, match="unpacks past what a batch reads"):
                read_rows(path)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert time.monotonic() - started < 2.0
        assert peak < 5 << 20, peak


def test_an_ordinary_workbook_still_reads_and_a_non_archive_is_refused(tmp_path):
    assert [r.values for r in read_rows(workbook(tmp_path / "ok.xlsx", [["name", "qty"], ["tea", 2]]))] == \
        [{"name": "tea", "qty": 2}]
    fake = tmp_path / "fake.xlsx"
    fake.write_text("name\ntea\n")
    with pytest.raises(UsageError, match="not readable as an Excel workbook"):
        read_rows(fake)


async def test_a_page_title_of_megabytes_is_cut_in_every_observation(owrl_page_server, tmp_path):
    from owrl_sdk.browser import BrowserHost
    from owrl_sdk.config import Settings
    from owrl_sdk.types import Task

    url = owrl_page_server({"/": "<title>t</title><h1>Long title</h1><script>document.title = 'x'.repeat(4000000)</script>"})
    with attack("limits", "a page sets a 4 MB document.title", "an observation keeps 300 characters of a title"):
        async with BrowserHost(Settings(runs_dir=str(tmp_path / "runs"))) as host:
            env = await host.new_env()
            await env.reset(Task(intent="t", start_url=url))
            first = await env.observe()
            again = await env.observe()
            await env.close()
        for obs in (first, again):
            assert obs.title.startswith("xxx") and "title cut: 4,000,000 characters" in obs.title, obs.title[:80]
            assert len(obs.title) < 400 and all(len(t.title) < 400 for t in obs.tabs)
            assert len(obs.model_dump_json(exclude={"screenshot"})) < 50_000


@pytest.mark.parametrize("char", ["\u202e", "\u202d", "\u2066", "\u2067", "\u2068", "\u200f", "\u061c"])
def test_characters_that_reorder_text_are_shown_in_the_live_view_and_plain_lines(char):
    import io

    from rich.text import Text

    from owrl_sdk.support.console import SafeConsole, terminal_safe

    payload = f"Pay to {char}NABI 0000 ZZ99{chr(0x202c)} now"
    with attack("terminal", f"page text with U+{ord(char):04X} (a bidirectional control)",
                "shown as <U+XXXX>, never applied"):
        out = io.StringIO()
        console = SafeConsole(file=out, force_terminal=True, color_system="standard", width=200)
        console.print(Text("title: " + payload))
        for printed in (out.getvalue(), terminal_safe(payload)):
            assert char not in printed and f"<U+{ord(char):04X}>" in printed, printed


# ------------------------------------------------------------------ a batch's shared inputs


def test_a_batchs_shared_input_is_stored_once_not_copied_into_every_row(tmp_path):
    """A value given to every row (``--input``, a job's ``inputs``), as long as an input may be,
    with 300 rows: the batch's own bookkeeping (rows.jsonl, batch.json, batch.csv, the report)
    writes it once; a megabyte is refused before anything runs. The rows end by a scripted
    executor (no browser: the episodes are not what is measured)."""
    import json
    from pathlib import Path

    from owrl_sdk.flows.batch import Batch
    from owrl_sdk.scheduling.executors import Executor, WorkResult
    from owrl_sdk.rules.inputs import MAX_INPUT_CHARS
    from owrl_sdk.episode.runner import EpisodeRecord

    class Done(Executor):
        async def start(self, workload):  # noqa: ANN001
            pass

        async def run(self, items, on_result=None):  # noqa: ANN001
            results = []
            for item in items:
                result = WorkResult(item, EpisodeRecord(item.key, item.task.id, 0, "success", True, 1.0, 3, 0.1,
                                                        None, "ok", None))
                results.append(result)
                on_result(result)
            return results

    flow = Path(__file__).resolve().parent.parent / "batch" / "find-product.json"
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"quantity": n}) + "\n" for n in range(1, 301)))
    with attack("limits", "a 1 MB input given to every row of a batch", "an input holds 32,768 characters at most"):
        with pytest.raises(UsageError, match="more than the 32,768 an input may hold"):
            Batch(flow, rows, tmp_path / "a", executor=Done(None, None), common={"product": "x" * (1 << 20)}).run()  # type: ignore[arg-type]
        assert not (tmp_path / "a" / "rows.jsonl").exists()
    big = "x" * MAX_INPUT_CHARS
    with attack("limits", "a 32 KB input given to every row of a 300-row batch", "the shared inputs stored once (common_inputs)"):
        tracemalloc.start()
        started = time.monotonic()
        summary = Batch(flow, rows, tmp_path / "b", executor=Done(None, None), common={"product": big}).run()  # type: ignore[arg-type]
        seconds = time.monotonic() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert summary["succeeded"] == 300
        assert summary["common_inputs"] == {"product": big}
        assert all(r["inputs"] == {"quantity": r["row"]} for r in summary["results"])
        out = tmp_path / "b"
        assert big not in (out / "rows.jsonl").read_text() and big not in (out / "batch.csv").read_text()
        assert (out / "batch.json").read_text().count(big) == 1
        assert seconds < 30 and peak < 128 << 20, (seconds, peak >> 20)
