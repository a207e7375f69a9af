"""Batches (``owrl run --flow F --inputs ROWS``, :mod:`owrl_sdk.flows.batch`): rows read as a careless
user writes them, one row's failure never stopping the others, resuming from the batch folder,
and a five-row batch on the demo shop in a real Chromium."""

from __future__ import annotations

import json
import re
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from owrl_sdk.flows.batch import BAD_INPUTS, Batch, read_rows
from owrl_sdk.cli import main
from owrl_sdk.formats.documents import load_flow, load_trajectory
from owrl_sdk.errors import UsageError
from owrl_sdk.scheduling.executors import Executor

from owrl_cli import KEEP, owrl

FLOW = Path(__file__).resolve().parent / "batch" / "find-product.json"


def cli(capsys, *args: str) -> tuple[int, str, str]:
    """``owrl ARGS`` in this process: (exit code, stdout, stderr)."""
    try:
        main(list(args))
        code = 0
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


class NoBrowser(Executor):
    """An executor that must never start: the rows it would get needed no browser."""

    async def start(self, workload):  # noqa: ANN001
        raise AssertionError("a browser was asked for")


# ============================================================================ reading rows


def test_csv_rows_as_spreadsheets_save_them(tmp_path):
    rows = tmp_path / "rows.csv"
    # a byte-order mark, ';' as separator, spaces around cells, a blank row, an empty cell, a duplicate
    rows.write_bytes("\ufeff product ; quantity\nCanvas Tote Bag ; 2\n;\nWool Beanie;\nCanvas Tote Bag ; 2\n"
                     .encode("utf-8"))
    read = read_rows(rows)
    assert [(r.number, r.values) for r in read] == [
        (1, {"product": "Canvas Tote Bag", "quantity": "2"}),
        (3, {"product": "Wool Beanie"}),  # the empty cell gives no value: the default applies
        (4, {"product": "Canvas Tote Bag", "quantity": "2"}),
    ]
    # keyed by content: the same row twice is two rows; moving a row keeps its key
    assert read[0].key.endswith("#0") and read[2].key == read[0].key[:-1] + "1"
    rows.write_bytes("product;quantity\nWool Beanie;\nCanvas Tote Bag;2\n".encode("utf-8"))
    moved = read_rows(rows)
    assert moved[0].key == read[1].key and moved[1].key == read[0].key


def test_jsonl_lines_that_are_not_objects_are_failed_rows(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"product": "Wool Beanie", "quantity": null}\n\n[1, 2]\n{"product": \n"Hat"\n')
    read = read_rows(rows)
    assert [(r.number, r.values, r.error) for r in read] == [
        (1, {"product": "Wool Beanie"}, None),
        (3, {}, "line 3 is a list, not an object of inputs ({\"NAME\": value, ...})"),
        (4, {}, "line 4 is not valid JSON (Expecting value, column 13)"),
        (5, {}, 'line 5 is a string, not an object of inputs ({"NAME": value, ...})'),
    ]


def test_csv_with_tabs_crlf_and_a_row_longer_than_the_header(tmp_path):
    rows = tmp_path / "rows.csv"
    rows.write_bytes(b"product\tquantity\r\nWool Beanie\t2\r\nFelt Fedora\t1\textra\r\n")
    read = read_rows(rows)
    assert [(r.number, r.values, r.error) for r in read] == [
        (1, {"product": "Wool Beanie", "quantity": "2"}, None),
        (2, {"product": "Felt Fedora", "quantity": "1"}, "row 2 has 3 cells but the header names 2 columns"),
    ]


@pytest.mark.parametrize("name, content, message", [
    ("rows.csv", "product,quantity\n".encode(), "rows.csv: no rows to run (only a header)"),
    ("rows.csv", b"", "rows.csv: no header"),
    ("rows.txt", b"product\nHat\n", "rows.txt: give the rows as a .csv file"),
    ("rows.csv", b"product,product\nHat,Cap\n", "rows.csv: the header names 'product' more than once"),
    ("rows.csv", b"product,\nHat,3\n", "rows.csv: column 2 has values but no name in the header"),
    ("rows.jsonl", b"\n\n", "rows.jsonl: no rows to run"),
])
def test_files_that_are_not_rows(tmp_path, name, content, message):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(UsageError) as err:
        read_rows(tmp_path / name)
    assert message in str(err.value)


def test_a_file_that_is_not_utf8_is_one_error_and_exit_2(tmp_path, capsys):
    rows = tmp_path / "rows.csv"
    rows.write_bytes("product\nCaf\u00e9 Hat\n".encode("latin-1"))
    code, out, err = cli(capsys, "run", "--flow", str(FLOW), "--inputs", str(rows), "--out", str(tmp_path / "b"))
    assert code == 2 and out == ""
    assert err.strip() == f"Error: {rows}: not UTF-8 text (byte 0xe9 on line 2); save it as UTF-8"
    assert not (tmp_path / "b").exists()


# ============================================================================ the header against the flow


def test_a_column_the_flow_does_not_take_stops_the_batch(tmp_path, capsys):
    rows = tmp_path / "rows.csv"
    rows.write_text("product,colour\nWool Beanie,red\n")
    code, _, err = cli(capsys, "run", "--flow", str(FLOW), "--inputs", str(rows), "--out", str(tmp_path / "b"))
    assert code == 2
    assert err.strip() == (f"Error: {rows}: column 'colour' is not an input of the flow (its inputs: product, "
                           "quantity); rename or remove the column")


def test_a_missing_column_for_a_required_input_stops_the_batch(tmp_path):
    rows = tmp_path / "rows.csv"
    rows.write_text("quantity\n2\n")
    with pytest.raises(UsageError) as err:
        Batch(FLOW, rows, tmp_path / "b")
    assert str(err.value) == (f"{rows}: no column for the input 'product', which the flow requires "
                              "(columns: quantity)")
    # --input gives it to every row instead
    batch = Batch(FLOW, rows, tmp_path / "b", common={"product": "Wool Beanie"})
    assert batch.prepare(batch.rows[0]).metadata["inputs"] == {"product": "Wool Beanie", "quantity": 2}
    # and is part of the rows' keys: other --input values are other rows
    other = Batch(FLOW, rows, tmp_path / "b", common={"product": "Felt Fedora"})
    assert other.rows[0].key != batch.rows[0].key and other.rows[0].key.endswith("#0")
    # a row's own value wins over --input's
    both = tmp_path / "both.csv"
    both.write_text("product\nCanvas Tote Bag\n\n")
    mixed = Batch(FLOW, both, tmp_path / "c", common={"product": "Wool Beanie", "quantity": "3"})
    assert mixed.prepare(mixed.rows[0]).metadata["inputs"] == {"product": "Canvas Tote Bag", "quantity": 3}


@pytest.mark.parametrize("common, message", [
    ({"colour": "red"}, "--input: unknown input 'colour' (inputs: product, quantity)"),
    ({"quantity": "two"}, "--input: input 'quantity' must be"),
    ({"product": "{{secret:SHOP_PASSWORD}}"}, "--input: input 'product' holds a {{secret:...}} placeholder"),
])
def test_an_input_for_every_row_that_the_flow_cannot_take_stops_the_batch(tmp_path, capsys, common, message):
    """--input is the command's mistake, not each row's: usage error (exit 2) before any row."""
    rows = tmp_path / "rows.csv"
    rows.write_text("product\nWool Beanie\n")
    with pytest.raises(UsageError, match=re.escape(message)):
        Batch(FLOW, rows, tmp_path / "b", common=common)
    (name, value), = common.items()
    code, _, err = cli(capsys, "run", "--flow", str(FLOW), "--inputs", str(rows), "--input", f"{name}={value}",
                       "--out", str(tmp_path / "b"))
    assert code == 2 and message in err and not (tmp_path / "b").exists()


@pytest.mark.parametrize("args, message", [
    (["--workers", "2"], "--workers runs the rows of a batch in parallel: give --inputs FILE too"),
    (["--inputs", "ROWS"], "--inputs runs a flow once per row: give --flow FILE too"),
    (["--flow", str(FLOW), "--inputs", "ROWS", "--heal-with", "random"], "--heal-with is not available with --inputs"),
    (["--flow", str(FLOW), "--inputs", "ROWS", "--trace"], "--trace is not available with --inputs"),
])
def test_options_a_batch_does_not_take(tmp_path, capsys, args, message):
    rows = tmp_path / "rows.csv"
    rows.write_text("product\nWool Beanie\n")
    code, _, err = cli(capsys, "run", *[str(rows) if a == "ROWS" else a for a in args])
    assert code == 2 and message in err


# ============================================================================ rows that fail alone


def test_rows_whose_inputs_do_not_resolve_fail_without_a_browser(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"product": "Wool Beanie", "quantity": "two"}\n[1, 2]\n{"colour": "red"}\n{"quantity": 3}\n')
    batch = Batch(FLOW, rows, tmp_path / "b", executor=NoBrowser(None, None))  # type: ignore[arg-type]
    summary = batch.run()
    assert (summary["rows"], summary["succeeded"], summary["failed"], summary["ran"]) == (4, 0, 4, 4)
    details = {r["row"]: r["detail"] for r in summary["results"]}
    assert all(r["failure"] == BAD_INPUTS and r["run_dir"] is None for r in summary["results"])
    assert details[1] == "1 input problem: input 'quantity' must be an integer: 'two' (expected a whole number)"
    assert details[2] == 'line 2 is a list, not an object of inputs ({"NAME": value, ...})'
    assert "unknown input 'colour' (inputs: product, quantity)" in details[3]
    assert details[4] == ("1 input problem: missing input 'product' (a product's name, as the shop writes it): "
                          "give product a value in this row")
    assert json.loads((tmp_path / "b" / "batch.json").read_text()) == summary
    assert len((tmp_path / "b" / "rows.jsonl").read_text().splitlines()) == 4
    # done is done: a second run has nothing to do
    again = Batch(FLOW, rows, tmp_path / "b", executor=NoBrowser(None, None)).run()  # type: ignore[arg-type]
    assert again["ran"] == 0 and again["results"] == summary["results"]


class Scripted(Executor):
    """Ends each row as told by its product (``infra:...`` an infra error, else a success), no browser."""

    async def start(self, workload):  # noqa: ANN001
        self.workload = workload

    async def run(self, items, on_result=None):  # noqa: ANN001
        from owrl_sdk.scheduling.executors import WorkResult, error_result
        from owrl_sdk.episode.runner import EpisodeRecord

        results = []
        for item in items:
            product = item.task.metadata["inputs"]["product"]
            if product.startswith("infra:"):
                result = error_result(item, RuntimeError("the browser went away"))
            else:
                result = WorkResult(item, EpisodeRecord(item.key, item.task.id, 0, "success", True, 1.0, 3, 1.0, None,
                                                        product, None))
            results.append(result)
            on_result(result)
        return results


def test_rows_the_machinery_failed_run_again_and_failed_rows_do_not(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"product": "infra:Wool Beanie"}\n{"product": "Felt Fedora"}\n{"quantity": "x"}\n')
    first = Batch(FLOW, rows, tmp_path / "b", executor=Scripted(None, None)).run()  # type: ignore[arg-type]
    assert [r["status"] for r in first["results"]] == ["infra_error", "success", "fail"]
    infra = first["results"][0]
    assert infra["failure"] == "infra.RuntimeError" and infra["detail"] == "RuntimeError: the browser went away"
    assert infra["inputs"] == {"product": "infra:Wool Beanie", "quantity": 1}
    again = Batch(FLOW, rows, tmp_path / "b", executor=Scripted(None, None))  # type: ignore[arg-type]
    assert [r.number for r in again.pending()] == [1]
    assert again.run()["ran"] == 1


def test_line_separators_inside_values_neither_split_rows_nor_lose_them_on_resume(tmp_path):
    """JSON keeps U+2028, U+2029 and U+0085 raw inside a string (as rows.jsonl writes a scraped
    value or an answer); they are not line ends, in the rows file or in the batch's own record:
    a finished row that holds one is not run again."""
    rows = tmp_path / "rows.jsonl"
    names = ["Wool\u2028Beanie", "Felt\u2029Fedora", "Baseball\x85Cap"]
    rows.write_text("".join(json.dumps({"product": n}, ensure_ascii=False) + "\n" for n in names), encoding="utf-8")
    read = read_rows(rows)
    assert [(r.number, r.values, r.error) for r in read] == [(i + 1, {"product": n}, None) for i, n in enumerate(names)]
    first = Batch(FLOW, rows, tmp_path / "b", executor=Scripted(None, None)).run()  # type: ignore[arg-type]
    assert [r["answer"] for r in first["results"]] == names  # the answer holds the separator, raw in rows.jsonl
    assert "\u2028" in (tmp_path / "b" / "rows.jsonl").read_text(encoding="utf-8")
    again = Batch(FLOW, rows, tmp_path / "b", executor=Scripted(None, None))  # type: ignore[arg-type]
    assert again.pending() == [] and again.run()["ran"] == 0


def test_a_flow_without_a_start_url(tmp_path):
    rows = tmp_path / "rows.csv"
    rows.write_text("product\nWool Beanie\n")
    flow = tmp_path / "nostart.json"
    flow.write_text(load_flow(FLOW).model_copy(update={"start_url": None}).to_json())
    with pytest.raises(UsageError) as err:
        Batch(flow, rows, tmp_path / "b")
    assert str(err.value) == f"{flow} has no start_url: give one (or --url)"
    batch = Batch(flow, rows, tmp_path / "b", url="http://127.0.0.1:9/")  # --url gives it
    assert batch.prepare(batch.rows[0]).start_url == "http://127.0.0.1:9/"
    # a placeholder in --url takes each row's value (encoded), and its column is an input
    filled = Batch(flow, rows, tmp_path / "b", url="http://127.0.0.1:9/search?q={{input:product}}")
    assert filled.prepare(filled.rows[0]).start_url == "http://127.0.0.1:9/search?q=Wool%20Beanie"
    only_url = tmp_path / "only-url.csv"
    only_url.write_text("product,shop\nWool Beanie,127.0.0.1:9\n")
    both = Batch(flow, only_url, tmp_path / "c", url="http://{{input:shop}}/p/{{input:product}}")
    assert both.prepare(both.rows[0]).start_url == "http://127.0.0.1:9/p/Wool%20Beanie"


def test_a_batch_reads_the_flows_start_url_as_a_single_run_does(tmp_path, capsys, monkeypatch):
    """A relative file becomes a file:// address (run from the folder it is in), and an address
    that cannot be one stops the batch before any browser, naming the flow's field."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "page.html").write_text("<title>Local page</title><p>hello</p>")
    rows = tmp_path / "rows.jsonl"
    rows.write_text("{}\n")
    flow = tmp_path / "local.json"
    flow.write_text(json.dumps({"start_url": "page.html", "turns": [{"calls": [
        {"name": "done", "arguments": {"response": "read"}}]}]}))
    code, out, err = cli(capsys, "run", "--flow", str(flow), "--inputs", str(rows), "--out", "b", "--json")
    assert code == 0, err
    (row,) = json.loads(out)["results"]
    assert row["status"] == "success"
    traj = json.loads((Path(row["run_dir"]) / "trajectory.json").read_text())
    assert traj["task"]["start_url"] == (tmp_path / "page.html").as_uri()
    flow.write_text(json.dumps({"start_url": "http://", "turns": [{"calls": [{"name": "done"}]}]}))
    code, _, err = cli(capsys, "run", "--flow", str(flow), "--inputs", str(rows), "--out", "c")
    assert code == 2 and f"{flow}: start_url 'http://' is not a valid address: it names no host" in err, err
    assert not (tmp_path / "c").exists()


def test_a_folder_another_process_runs_is_refused(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"quantity": 1}\n')
    holder = subprocess.Popen(  # another process that runs the folder's batch (holds its lock) until told
        [sys.executable, "-c", "import sys; from owrl_sdk.flows.batch import Batch; "
         f"b = Batch({str(FLOW)!r}, {str(rows)!r}, {str(tmp_path / 'b')!r}); b.out.mkdir(); b._take_lock(); "
         "print('held', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(UsageError) as err:
            Batch(FLOW, rows, tmp_path / "b")
        assert str(err.value) == (f"{tmp_path / 'b'} is being run by another process (pid {holder.pid}): wait for "
                                  "it to end, or give another --out")
    finally:
        holder.kill()  # dies holding it: the file stays, with its pid, and the system frees the lock
        holder.wait()
    assert (tmp_path / "b" / "batch.lock").read_text() == str(holder.pid)
    # a lock left by a process that died is taken over, and released at the end
    summary = Batch(FLOW, rows, tmp_path / "b", executor=NoBrowser(None, None)).run()  # type: ignore[arg-type]
    assert summary["failed"] == 1 and not (tmp_path / "b" / "batch.lock").exists()


def test_of_many_batches_taking_one_folder_at_once_exactly_one_runs(tmp_path):
    """Two commands that both found the lock free (or left by a dead process) must not both
    take it: each holds it only if the system's lock on the very file named batch.lock is its."""
    import threading

    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"quantity": 1}\n')
    (tmp_path / "b").mkdir()
    for stale in ["", "999999999"]:  # no lock, then one a dead process left
        if stale:
            (tmp_path / "b" / "batch.lock").write_text(stale)
        batches = [Batch(FLOW, rows, tmp_path / "b") for _ in range(8)]  # each checked: free
        start = threading.Barrier(len(batches))
        took: list[Batch] = []
        refused: list[str] = []

        def take(batch: Batch, start: threading.Barrier, took: list, refused: list) -> None:
            start.wait()
            try:
                batch._take_lock()
                took.append(batch)
            except UsageError as err:
                refused.append(str(err))

        threads = [threading.Thread(target=take, args=(b, start, took, refused)) for b in batches]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(took) == 1 and len(refused) == 7, (took, refused)
        assert all("is being run by another process" in r for r in refused)
        took[0]._release_lock()
        assert not (tmp_path / "b" / "batch.lock").exists()


def test_a_folder_of_another_flow_is_not_resumed(tmp_path):
    rows = tmp_path / "rows.csv"
    rows.write_text("product\nWool Beanie\n")
    (tmp_path / "b").mkdir()
    other = load_flow(FLOW).model_copy(update={"task": "Something else {{input:product}}"})
    (tmp_path / "b" / "flow.json").write_text(other.to_json())
    with pytest.raises(UsageError) as err:
        Batch(FLOW, rows, tmp_path / "b")
    assert str(err.value).startswith(f"{tmp_path / 'b'} holds a batch of another version of this flow")


# ============================================================================ on the demo shop


ROWS = "product,quantity\nCanvas Tote Bag,2\nWool Beanie,\nInvisible Unicorn Cloak,1\nHiking Boots,1\nFelt Fedora,3\n"
PRICES = {"Canvas Tote Bag": "$25.00", "Wool Beanie": "$19.00", "Hiking Boots": "$139.00", "Felt Fedora": "$65.00"}


@pytest.mark.slow
def test_five_rows_on_the_demo_shop_then_resume_with_nothing_to_do(tmp_path):
    (tmp_path / "rows.csv").write_text(ROWS)
    args = ("run", "--flow", str(FLOW), "--inputs", "rows.csv", "--workers", "2", "--out", "b", "--json")
    first = owrl(*args, cwd=tmp_path)
    assert first.returncode == 1, first.stderr
    summary = json.loads(first.stdout)
    assert (summary["rows"], summary["succeeded"], summary["failed"], summary["ran"]) == (5, 4, 1, 5)
    by_row = {r["row"]: r for r in summary["results"]}
    failed = by_row[3]
    assert failed["status"] == "fail" and failed["failure"] == "policy.gave_up"
    assert failed["detail"] == ('flow stopped: click: expectation failed: element_visible: no element matches '
                                'selector role=link[name="Invisible Unicorn Cloak"]; the page says: '
                                '"No products found for “Invisible Unicorn Cloak”."')  # the shop's own words
    assert "row 3: fail · policy.gave_up: flow stopped" in first.stderr
    for n in (1, 2, 4, 5):
        row = by_row[n]
        product = row["inputs"]["product"]
        assert row["status"] == "success" and row["outputs"] == {"name": product, "price": PRICES[product]}
        assert row["answer"] == f"{row['inputs']['quantity']} x {product}"
        traj = load_trajectory(tmp_path / row["run_dir"])  # each row's own run folder, its inputs recorded
        assert traj.inputs == row["inputs"] and traj.outcome.outputs == row["outputs"]
    assert by_row[2]["inputs"] == {"product": "Wool Beanie", "quantity": 1}  # the empty cell: the default
    saved = json.loads((tmp_path / "b" / "batch.json").read_text())
    assert saved == summary
    table = (tmp_path / "b" / "batch.csv").read_text().splitlines()
    assert table[0] == "row,status,input:product,input:quantity,output:name,output:price,failure,detail,run_dir,earlier attempts"
    assert table[1].startswith("1,success,Canvas Tote Bag,2,Canvas Tote Bag,$25.00,,,b")
    assert table[3].startswith("3,fail,Invisible Unicorn Cloak,1,,,policy.gave_up,")

    again = owrl(*args, cwd=tmp_path)
    assert again.returncode == 1, again.stderr
    resumed = json.loads(again.stdout)
    assert resumed["ran"] == 0 and resumed["results"] == summary["results"]
    assert "resuming: 5 of 5 rows already done in b" in again.stderr
    assert json.loads((tmp_path / "b" / "batch.json").read_text()) == resumed

    # the spreadsheet corrected: only the changed row runs (rows are keyed by their content)
    (tmp_path / "rows.csv").write_text(ROWS.replace("Invisible Unicorn Cloak", "Baseball Cap"))
    fixed = owrl(*args, cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stderr
    done = json.loads(fixed.stdout)
    assert (done["ran"], done["succeeded"], done["failed"]) == (1, 5, 0)
    assert done["results"][2]["outputs"] == {"name": "Baseball Cap", "price": "$22.00"}
    assert [r["run_dir"] for r in done["results"] if r["row"] != 3] == \
        [r["run_dir"] for r in summary["results"] if r["row"] != 3]


@pytest.mark.slow
def test_ctrl_c_keeps_the_rows_done_and_the_rest_resume(tmp_path):
    flow = load_flow(FLOW)
    slow = flow.turns[-1].model_copy(update={"calls": [flow.turns[-1].calls[0].model_copy(
        update={"name": "wait", "arguments": {"seconds": 2}})]})
    flow.turns.insert(len(flow.turns) - 1, slow)
    (tmp_path / "slow.json").write_text(flow.to_json())
    (tmp_path / "rows.csv").write_text("product\nWool Beanie\nFelt Fedora\nBaseball Cap\n")
    args = ["run", "--flow", "slow.json", "--inputs", "rows.csv", "--out", "b", "--json"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OWRL_") or k in KEEP}
    # Ctrl-C as a terminal sends it, to a command started with SIGINT at its default: a test run
    # started in the background inherits SIGINT ignored, and so would its child (which then
    # rightly runs on, as any command started with `&` does)
    proc = subprocess.Popen([sys.executable, "-m", "owrl_sdk", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    finished = tmp_path / "b" / "rows.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (finished.exists() and finished.read_text().strip()):
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted: 1 of 3 rows done, 2 left; the same command resumes them (b/batch.json)" in err or \
        "interrupted: 2 of 3 rows done, 1 left" in err
    summary = json.loads((tmp_path / "b" / "batch.json").read_text())
    statuses = [r["status"] for r in summary["results"]]
    assert statuses[0] == "success" and "pending" in statuses and summary["pending"] == statuses.count("pending")
    done_before = len(finished.read_text().splitlines())
    assert done_before == 3 - summary["pending"]

    resumed = owrl(*args, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    after = json.loads(resumed.stdout)
    assert after["ran"] == summary["pending"] and after["succeeded"] == 3
    assert after["results"][0] == summary["results"][0]
