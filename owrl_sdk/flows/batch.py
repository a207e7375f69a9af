"""Batches: one flow played once per row of a CSV or JSONL file, through the evaluation runner.

    from owrl_sdk.flows.batch import Batch
    summary = Batch("flow.json", "rows.csv", out="runs/batch-orders", workers=2).run()
    print(summary["succeeded"], summary["failed"])

Each row's values are the flow's inputs (``{{input:NAME}}``): they are resolved against the
flow's declared inputs (:func:`owrl_sdk.rules.inputs.resolve_inputs`) and filled in
(:func:`owrl_sdk.rules.inputs.apply_inputs`), and the row's own flow travels with its task
(``task.metadata["flow"]``, :data:`owrl_sdk.flows.flowplayer.FLOW_METADATA`) to the ``scripted``
policy. The episodes run on an executor (:class:`owrl_sdk.scheduling.executors.LocalExecutor` unless
one is given): ``workers`` browser contexts at a time, judged by the ``outcome`` judge, each
in its own run folder, exactly as an evaluation's episodes are.

The batch folder::

    OUT/
      flow.json     the flow the batch plays (its inputs not filled in)
      rows.jsonl    one line per finished row, appended as each ends (what a re-run resumes from)
      batch.lock    while a process runs the batch: its pid (a second one on the folder is refused)
      .batch.lock   the system lock behind it (filelock), which the holder's death releases
      batch.json    every row of the input file: row, key, status, inputs, outputs, failure
      batch.csv     the same as a table: row, status, input:NAME..., output:NAME..., failure, detail, run_dir
      runs/         each row's run folder (trajectory.json, screenshots, result.json)

Rows are keyed by their content: ``key`` is a digest of the row's values (a record that could
not be read: of its text) and ``#N`` for the N-th row with the same content, so re-running the
same command after an interruption runs only the rows not in ``rows.jsonl``, whatever rows were
added or moved; a row whose values changed is a new row and runs. Rows that ended in
``infra_error`` (the machinery's failure, not the row's) run again; every other status, failures
included, is done, unless ``retry_failed`` asks for the failed ones. A batch folder belongs to
one flow: re-running it with a changed flow is a :class:`~owrl_sdk.errors.UsageError`, except
with ``retry_failed`` (the old flow is kept as ``flow-DIGEST.json``).

A flow's call marked ``commit`` is its point of no return: a line in ``commits.jsonl`` is written
before it runs, and a row that fails after it, or is found cut short after it, is ``needs_review``
and never run again automatically (``retry_needs_review`` does). ``retries`` runs a row again on
an ``infra_error`` before that point; ``max_failures`` and ``stop_after_same_failure`` stop a batch
that keeps failing (the rows not started stay pending).

One row never stops the others: a row whose inputs do not resolve, or a line that is not a JSON
object, is recorded as failed (``task.bad_inputs``, the reason as its detail) without a browser;
an episode that fails is recorded with its failure. What stops the whole batch before anything
runs, as a :class:`UsageError`, is a file that cannot be read as rows: not UTF-8, not ``.csv`` or
``.jsonl``, no rows, a CSV header that repeats a name, names a column the flow takes no input
for, or lacks a column for an input the flow requires.
"""

from __future__ import annotations

import asyncio
import csv
import datetime
import datetime as _dt
import hashlib
import io
import json
import os
import re
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional, Union

from owrl_sdk.support import interrupts

from owrl_sdk.safety import secrets
from owrl_sdk.contract.components import TaskSuite
from owrl_sdk.config import Settings, load_settings
from owrl_sdk.formats.documents import Flow, json_lines, load_flow, not_utf8
from owrl_sdk.errors import UsageError
from owrl_sdk.scheduling.executors import RETRY, STOP, Executor, LocalExecutor, NamedPolicy, WorkItem, Workload, WorkResult
from owrl_sdk.support.files import try_lock, write_atomic
from owrl_sdk.flows.flowplayer import FLOW_POLICY, flow_memory
from owrl_sdk.contract.plugins import Plugins
from owrl_sdk.formats.records import ResultLog
from owrl_sdk.formats.report import write_batch_report
from owrl_sdk.flows.runrequest import RunRequest
from owrl_sdk.episode.runstore import slugify
from owrl_sdk.types import Task, Trajectory

if TYPE_CHECKING:
    from filelock import BaseFileLock

__all__ = ["Batch", "Row", "RowResult", "read_rows", "BAD_INPUTS", "INTERRUPTED_AFTER_COMMIT", "NEEDS_REVIEW", "RETRIED"]

#: The failure kind of a row whose values could not be made into the flow's inputs.
BAD_INPUTS = "task.bad_inputs"

#: Statuses a re-run runs again (the machinery's failures); every other recorded status is done.
RETRIED = frozenset({"infra_error"})

#: What a spreadsheet reads as the start of a formula (a leading tab or carriage return too).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def spreadsheet_safe(text: str) -> str:
    """``text`` as a CSV cell a spreadsheet shows as text: one that would be read as a formula
    (``=HYPERLINK(...)``, ``+cmd|...``, ``@SUM(...)``, also after leading spaces or in full-width
    forms) gets a leading apostrophe; a plain number (``-5``, ``+3.2``) is left as it is."""
    stripped = text.lstrip(" ")
    if not stripped.startswith(_FORMULA_START):
        return text
    try:
        float(stripped)
        return text
    except ValueError:
        return "'" + text


def _write_xlsx(path: Path, header: list[str], lines: list[list[Any]]) -> None:
    """``batch.csv``'s table as an Excel workbook too, when openpyxl (the ``excel`` extra) is
    there. Every text cell is stored as text, escaped as in the CSV: nothing is a formula."""
    try:
        from openpyxl import Workbook
        from openpyxl.cell import WriteOnlyCell
    except ImportError:
        return
    book = Workbook(write_only=True)
    sheet = book.create_sheet("batch")

    def text(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        out = WriteOnlyCell(sheet, value=value)
        out.data_type = "s"  # never a formula, whatever the text starts with
        return out

    for line in [header, *lines]:
        sheet.append([text(v) for v in line])
    data = io.BytesIO()
    book.save(data)
    write_atomic(path, data.getvalue())


#: The status of a row not yet run, in ``batch.json`` and ``batch.csv``.
PENDING = "pending"

#: The status of a row that failed, or was cut short, after its flow's point of no return (a
#: call marked ``commit``): the site may hold what the row created, so no re-run runs it again
#: unless told to (``retry_needs_review``).
NEEDS_REVIEW = "needs_review"

#: The failure kind of a row found cut short after its point of no return (its process died or
#: was stopped between the commit call and the row's end).
INTERRUPTED_AFTER_COMMIT = "task.interrupted_after_commit"

BATCH_SCHEMA = "owrl.batch/1"


@dataclass
class Row:
    """One row of the input file: its number (the N-th record after the header, or the line of a
    JSONL file, blank ones counted), its values, its content key, and why it could not be read."""

    number: int
    values: dict[str, Any]
    key: str = ""
    error: Optional[str] = None


@dataclass
class RowResult:
    """What a row came to: a line of ``rows.jsonl`` and an entry of ``batch.json``."""

    row: int
    key: str
    status: str
    inputs: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    failure: Optional[str] = None
    detail: Optional[str] = None
    answer: Optional[str] = None
    run_dir: Optional[str] = None
    steps: int = 0
    seconds: float = 0.0
    #: The digest of the flow version the row ran with (:func:`flow_digest`).
    flow: str = ""
    #: Episodes the row took: retries of infrastructure failures (``retries``) included.
    attempts: int = 1
    #: The call marked ``commit`` that ran (the row passed its point of no return), if any.
    committed: Optional[str] = None
    #: When the row ended (seconds since the epoch): orders it against ``commits.jsonl``.
    ended_at: float = 0.0
    #: Times the row's flow logged in again because its session was gone (the flow's ``session``).
    session_renewals: int = 0
    #: The row's earlier attempts, oldest first (:func:`attempt_of`): its retries in a run
    #: (``retries``) and the results of earlier runs (``--retry-failed``), never overwritten.
    history: list[dict[str, Any]] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.status not in RETRIED and self.status != PENDING


def history_text(history: list[dict[str, Any]]) -> str:
    """A row's earlier attempts in one cell: ``1. fail (page.http_4xx) at 2026-12-07 10:01: ...``."""
    parts = []
    for n, a in enumerate(history, 1):
        when = _dt.datetime.fromtimestamp(float(a.get("ended_at") or 0)).strftime("%Y-%m-%d %H:%M")
        kind = f" ({a['failure']})" if a.get("failure") else ""
        detail = str(a.get("detail") or "")
        detail = detail if len(detail) <= 160 else detail[:157] + "..."
        parts.append(f"{n}. {a.get('status')}{kind} at {when}" + (f": {detail}" if detail else ""))
    return "; ".join(parts)


def attempt_of(status: str, failure: Optional[str], detail: Optional[str], run_dir: Optional[str],
               ended_at: float, flow: str = "") -> dict[str, Any]:
    """One earlier attempt of a row, as its ``history`` keeps it."""
    return {"status": status, "failure": failure, "detail": detail, "run_dir": run_dir, "ended_at": ended_at,
            "flow": flow}


# ============================================================================ reading rows


def _digest(content: Any) -> str:
    text = content if isinstance(content, str) else json.dumps(content, sort_keys=True, ensure_ascii=False,
                                                                  default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _keyed(rows: list[Row], contents: list[Any]) -> list[Row]:
    """Give each row its content key: the digest, then ``#N`` counting rows of the same content."""
    seen: dict[str, int] = {}
    for row, content in zip(rows, contents):
        digest = _digest(content)
        n = seen.get(digest, 0)
        seen[digest] = n + 1
        row.key = f"{digest}#{n}"
    return rows


def _decode(path: Path) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a folder, not a file of rows") from None
    except OSError as err:
        raise UsageError(f"{path}: cannot read ({err.strerror})") from None
    if data.startswith(b"\xef\xbb\xbf"):  # the byte-order mark spreadsheets put first
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UsageError(not_utf8(path, err)) from None


def _delimiter(header_line: str) -> str:
    """``,`` unless the header holds more ``;`` or tabs (spreadsheets in many locales write ``;``)."""
    counts = {d: header_line.count(d) for d in (",", ";", "\t")}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] > counts[","] else ","


def _too_many(path: Path, max_rows: int) -> UsageError:
    return UsageError(f"{path}: more than {max_rows} rows; a batch takes at most {max_rows} (the max_rows setting): "
                      "split the file, or raise max_rows")


def _read_csv(path: Path, text: str, max_rows: Optional[int] = None) -> list[Row]:
    """The rows of a CSV text, read one record at a time: past ``max_rows`` rows it stops with
    an error (a file of a million rows is refused at the first row too many, not after all of
    them were read)."""
    first = text.split("\n", 1)[0]
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=_delimiter(first))
    try:
        head = next(reader, None)
        if head is None or not any(cell.strip() for cell in head):
            raise UsageError(f"{path}: no header (the first line names the columns, one per input)")
        header = [cell.strip() for cell in head]
        named = [name for name in header if name]
        repeated = sorted({name for name in named if named.count(name) > 1})
        if repeated:
            raise UsageError(f"{path}: the header names {', '.join(map(repr, repeated))} more than once")
        unnamed = [i for i, name in enumerate(header) if not name]
        rows: list[Row] = []
        contents: list[Any] = []
        for number, record in enumerate(reader, start=1):
            for i in unnamed:
                if i < len(record) and record[i].strip():
                    raise UsageError(f"{path}: column {i + 1} has values but no name in the header")
            if not any(cell.strip() for cell in record):
                continue  # a blank row (",,," as spreadsheets save them): not a row, but counted
            if max_rows is not None and len(rows) >= max_rows:
                raise _too_many(path, max_rows)
            rows.append(_csv_row(number, record, header, named, contents))
    except csv.Error as err:
        raise UsageError(f"{path}: not readable as CSV (line {reader.line_num}: {err})") from None
    return _keyed(rows, contents)


def _csv_row(number: int, record: list[str], header: list[str], named: list[str], contents: list[Any]) -> Row:
    """One CSV record as a row (its content, for the row's key, appended to ``contents``)."""
    values = {header[i]: cell.strip() for i, cell in enumerate(record)
              if i < len(header) and header[i] and cell.strip()}
    extra = [cell for cell in record[len(header):] if cell.strip()]
    row = Row(number, values)
    if extra:
        row.error = f"row {number} has {len(header) + len(extra)} cells but the header names {len(named)} columns"
    contents.append(record if extra else values)
    return row


def _read_jsonl(path: Path, text: str, max_rows: Optional[int] = None) -> list[Row]:
    rows: list[Row] = []
    contents: list[Any] = []
    for number, line in enumerate(json_lines(text), start=1):
        if not line.strip():
            continue
        if max_rows is not None and len(rows) >= max_rows:
            raise _too_many(path, max_rows)
        try:
            data = json.loads(line)
        except json.JSONDecodeError as err:
            rows.append(Row(number, {}, error=f"line {number} is not valid JSON ({err.msg}, column {err.colno})"))
            contents.append(line.strip())
            continue
        except RecursionError:
            rows.append(Row(number, {}, error=f"line {number} is nested too deeply to read"))
            contents.append(line.strip())
            continue
        if not isinstance(data, dict):
            kind = {list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number",
                    type(None): "null"}.get(type(data), type(data).__name__)
            rows.append(Row(number, {}, error=f"line {number} is {kind}, not an object of inputs "
                                              '({"NAME": value, ...})'))
            contents.append(line.strip())
            continue
        values = {str(k): v for k, v in data.items() if v is not None}
        rows.append(Row(number, values))
        contents.append(values)
    return _keyed(rows, contents)


def _cell(value: Any) -> Any:
    """A spreadsheet cell as an input value: text stripped (empty: no value), a date as
    ``YYYY-MM-DD`` (with its time, ISO, when it has one), numbers and booleans as they are."""
    if isinstance(value, str):
        return value.strip() or None
    if isinstance(value, datetime.datetime):
        return value.date().isoformat() if value.time() == datetime.time() else value.isoformat()
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    return value


#: What a workbook (a zip archive) may unpack to, checked from its directory before anything in
#: it is opened: one part, all parts, how many parts. A workbook of 10,000 rows by 50 columns of
#: text is a few tens of megabytes; an 8.5 KB archive that unpacks to gigabytes is a bomb.
XLSX_MAX_PART_MB = 64
XLSX_MAX_TOTAL_MB = 256
XLSX_MAX_PARTS = 10_000


def _check_archive(path: Path) -> None:
    """Refuse a workbook whose parts would unpack past the limits above (their sizes are read
    from the archive's directory; nothing is decompressed), or that is no archive at all."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            parts = archive.infolist()
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except (zipfile.BadZipFile, OSError) as err:
        raise UsageError(f"{path}: not readable as an Excel workbook ({err})") from None
    mb = 1 << 20
    biggest = max(parts, key=lambda part: part.file_size, default=None)
    total = sum(part.file_size for part in parts)
    if len(parts) > XLSX_MAX_PARTS or total > XLSX_MAX_TOTAL_MB * mb or \
            (biggest is not None and biggest.file_size > XLSX_MAX_PART_MB * mb):
        largest = f"{biggest.filename} {biggest.file_size / mb:,.0f} MB" if biggest is not None else "none"
        raise UsageError(f"{path}: the workbook unpacks past what a batch reads ({len(parts)} parts, "
                         f"{total / mb:,.0f} MB in all, the largest {largest}; at most {XLSX_MAX_PARTS:,} parts, "
                         f"{XLSX_MAX_TOTAL_MB} MB, {XLSX_MAX_PART_MB} MB a part): save the sheet as CSV, or split it")


def _read_xlsx(path: Path, max_rows: Optional[int] = None) -> list[Row]:
    """The rows of the first sheet of an Excel workbook (openpyxl, the ``excel`` extra), as a CSV
    is read: the first non-blank row names the columns, blank rows are skipped, formulas give the
    value Excel last computed, and reading stops past ``max_rows`` rows."""
    try:
        import openpyxl
    except ImportError:
        raise UsageError(f"{path}: reading .xlsx files needs openpyxl: pip install 'openwebrl-sdk[excel]' "
                         "(or save the sheet as CSV)") from None
    _check_archive(path)
    try:
        book = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except Exception as err:  # noqa: BLE001 - a damaged or mislabelled file: openpyxl's own errors
        raise UsageError(f"{path}: not readable as an Excel workbook ({type(err).__name__}: {err})") from None
    try:
        records = (list(r) for r in book.worksheets[0].iter_rows(values_only=True))
        header: list[str] = []
        for head in records:
            if any(_cell(v) is not None for v in head):
                header = [str(_cell(v) or "") for v in head]
                break
        if not header:
            raise UsageError(f"{path}: no header (the first row names the columns, one per input)")
        named = [name for name in header if name]
        repeated = sorted({name for name in named if named.count(name) > 1})
        if repeated:
            raise UsageError(f"{path}: the header names {', '.join(map(repr, repeated))} more than once")
        rows: list[Row] = []
        contents: list[Any] = []
        for number, record in enumerate(records, start=1):
            cells = [_cell(v) for v in record]
            if all(c is None for c in cells):
                continue
            for i, c in enumerate(cells):
                if c is not None and (i >= len(header) or not header[i]):
                    raise UsageError(f"{path}: column {i + 1} has values but no name in the header")
            if max_rows is not None and len(rows) >= max_rows:
                raise _too_many(path, max_rows)
            values = {header[i]: c for i, c in enumerate(cells) if c is not None}
            rows.append(Row(number, values))
            contents.append(values)
    finally:
        book.close()
    return _keyed(rows, contents)


def read_rows(path: Union[str, Path], max_rows: Optional[int] = None) -> list[Row]:
    """The rows of a ``.csv`` (a header, then one row per line) or ``.jsonl`` (one object per line)
    file, or of an ``.xlsx`` workbook's first sheet (read as a CSV is, cells keeping their types).

    Text is UTF-8, with or without a byte-order mark. CSV cells are stripped of surrounding spaces,
    an empty cell gives no value (the input's default applies), a blank row is skipped, and the
    separator is ``,``, or ``;`` or a tab when the header holds more of those. In JSONL a ``null``
    gives no value, a blank line is skipped. A file that cannot be read as rows raises
    :class:`UsageError`; a single bad record becomes a :class:`Row` with ``error`` set. Past
    ``max_rows`` rows the reading stops with a :class:`UsageError`.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".xlsx":
        rows = _read_xlsx(p, max_rows)
        if not rows:
            raise UsageError(f"{p}: no rows to run (only a header)")
        return rows
    if suffix not in (".csv", ".jsonl"):
        raise UsageError(f"{p}: give the rows as a .csv file (a header row, then one row per run), a .jsonl "
                         "file (one JSON object per line) or an .xlsx workbook (its first sheet, as a CSV)")
    text = _decode(p)
    rows = _read_csv(p, text, max_rows) if suffix == ".csv" else _read_jsonl(p, text, max_rows)
    if not rows:
        raise UsageError(f"{p}: no rows to run" + (" (only a header)" if suffix == ".csv" else ""))
    return rows


def rows_from(values: Iterable[Mapping[str, Any]]) -> list[Row]:
    """Rows given in Python (one mapping of input values each), numbered from 1."""
    rows = [Row(n, {str(k): v for k, v in dict(m).items() if v is not None}) for n, m in enumerate(values, start=1)]
    return _keyed(rows, [r.values for r in rows])


# ============================================================================ the batch


def _commit_entry(data: dict[str, Any]) -> dict[str, Any]:
    data["key"] = str(data["key"])  # a line without one is no commit (KeyError: skipped)
    return data


def commit_log(path: Path) -> ResultLog[dict[str, Any]]:
    """``commits.jsonl``: a line per call marked ``commit``, on disk (fsync) before the call
    acts, so that a row stopped anywhere after its point of no return is known to have passed it."""
    return ResultLog(path, _commit_entry, lambda entry: str(entry["key"]), durable=True)


class BatchSuite(TaskSuite):
    """The batch's rows as a suite for the executor: nothing to set up, no check of its own (the
    ``outcome`` judge reads the flow's own expectations)."""

    name = "batch"
    description = "the rows of an owrl run --inputs batch"

    def __init__(self, settings: Settings, tasks: Optional[list[Task]] = None, *,
                 commits: Optional[Path] = None, on_commit: Optional[Callable[[str, str], None]] = None,
                 **options: Any):
        super().__init__(settings, **options)
        self._tasks = list(tasks or [])
        self.commits = commits
        self.on_commit = on_commit

    def tasks(self) -> list[Task]:
        return list(self._tasks)

    def before_tool_call(self, call: Any, env: Any, task: Task) -> None:
        """Before a call marked ``commit`` runs: a line in ``commits.jsonl``, on disk (fsync) before
        the call acts, so a row stopped anywhere after it is known to have passed that point."""
        if not getattr(call, "commit", False) or self.commits is None or "batch_key" not in task.metadata:
            return None
        line = commit_log(self.commits).append({"key": task.metadata["batch_key"], "row": task.metadata.get("batch_row"),
                                                "call": call.describe()[:300], "at": time.time()})
        if self.on_commit is not None:
            self.on_commit(str(line["key"]), str(line["call"]))
        return None


def _required(spec: Any) -> bool:
    return bool(getattr(spec, "required", True)) and getattr(spec, "default", None) is None


def flow_digest(flow: Flow) -> str:
    return _digest(flow.model_dump(mode="json", by_alias=True, exclude_none=True))


def outputs_of(trajectory: Optional[Trajectory]) -> dict[str, Any]:
    """The named outputs of an episode (saved values and ``done``'s structured output)."""
    if trajectory is None:
        return {}
    for holder in (trajectory, trajectory.outcome):
        found = getattr(holder, "outputs", None)
        if found:
            return dict(found)
    return {}


def default_out(flow_name: str, runs_dir: Union[str, Path] = "runs") -> Path:
    """``runs/batch-<timestamp>-<flow name>``."""
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path(runs_dir) / f"batch-{stamp}-{slugify(flow_name)}"


class Batch:
    """One flow, once per row, on ``workers`` browser contexts; resumable from its folder.

    ``flow``: a :class:`Flow` or a flow file. ``rows``: a ``.csv``/``.jsonl`` file, mappings of
    input values, or :class:`Row` s. ``out``: the batch folder (default
    ``<runs_dir>/batch-<timestamp>-<flow name>``); an existing one is resumed. ``settings``
    (default :func:`load_settings`) and ``plugins`` as for :class:`owrl_sdk.Agent`; ``url``
    replaces the flow's start URL. ``on_row(result)`` is called as each row finishes.
    ``executor``: an :class:`Executor` not yet started (default: the ``local`` one, with
    ``workers`` and ``browser_per_worker``); it should be made with :attr:`settings`, which play
    flows with the flow memory. ``common``: input values every row gets (a row's own value wins);
    they are part of every row's key, so other values run the rows again.

    Everything that would stop the batch is checked when it is made (a :class:`UsageError`):
    the file, its header against the flow's inputs, a folder that holds another flow's batch.
    """

    def __init__(self, flow: Union[Flow, str, Path], rows: Union[str, Path, Iterable[Mapping[str, Any]], Iterable[Row]],
                 out: Union[str, Path, None] = None, workers: int = 1, settings: Optional[Settings] = None,
                 plugins: Optional[Plugins] = None, *, url: Optional[str] = None,
                 on_row: Optional[Callable[[RowResult], None]] = None, executor: Optional[Executor] = None,
                 browser_per_worker: bool = False, common: Optional[Mapping[str, Any]] = None,
                 retry_failed: bool = False, retry_needs_review: bool = False, retries: int = 0,
                 max_failures: Optional[int] = None, stop_after_same_failure: Optional[int] = None,
                 key: Optional[str] = None):
        self.flow_file = None if isinstance(flow, Flow) else str(flow)
        self.flow = flow if isinstance(flow, Flow) else load_flow(flow)
        self._shared_flow: Optional[dict[str, Any]] = None  # the flow as every row's task carries it
        self.plugins = plugins or Plugins()
        base = settings or load_settings()
        #: The settings the episodes run with: the flow memory unless another is configured.
        self.settings = base.with_overrides(memory=flow_memory(self.plugins.catalogue, base))
        self.plugins = self.plugins.bind(self.settings)  # hooks receive the batch's settings
        self.url = url
        self.workers = max(1, workers)
        self.on_row = on_row
        self.browser_per_worker = browser_per_worker
        self._executor = executor
        #: Run the rows that failed again (in this folder, with this flow, changed or not), and
        #: with ``retry_needs_review`` those that stopped after their point of no return too.
        self.retry_failed = retry_failed or retry_needs_review
        self.retry_needs_review = retry_needs_review
        #: Episodes more for a row whose episode ended in an infra_error before its point of no return.
        self.retries = max(0, int(retries))
        #: Stop the batch (the rows not started stay pending) after this many failed rows, or
        #: after this many failed in a row with the same failure kind.
        self.max_failures = max_failures
        self.stop_after_same_failure = stop_after_same_failure
        self.stopped: Optional[str] = None
        self._failures = 0
        self._same: tuple[Optional[str], int] = (None, 0)
        #: Values every row gets (``--input``); a row's own value for the same input wins.
        self.common = {k: v for k, v in dict(common or {}).items() if v is not None}
        if isinstance(rows, (str, Path)):
            self.inputs_file: Optional[str] = str(rows)
            self.rows = read_rows(rows, max_rows=self.settings.max_rows)
        else:
            given = list(rows)
            self.inputs_file = None
            self.rows = [r for r in given if isinstance(r, Row)] if given and isinstance(given[0], Row) \
                else rows_from(given)  # type: ignore[arg-type]
            if not self.rows:
                raise UsageError("no rows to run")
        #: The column whose value is a row's identity (``--key``): its history and its point of no
        #: return stay with it when its other values are edited. None: the row's content is.
        self.key = key
        if key is not None:
            self._key_rows(key)
        elif self.common:  # the same row with other --input values is another row
            for row in self.rows:
                digest, _, n = row.key.partition("#")
                row.key = f"{_digest([digest, self.common])}#{n}"
        name = Path(self.flow_file).stem if self.flow_file else (self.flow.task or "flow")
        self.out = Path(out) if out is not None else default_out(name, self.settings.runs_dir)
        if not (url or self.flow.start_url):
            raise UsageError(f"{self.flow_file or 'the flow'} has no start_url: give one (or --url)")
        self._request: Optional[RunRequest] = None
        self._held: Optional[BaseFileLock] = None
        self._check_common()
        self._check_columns()
        self._check_folder()
        self._check_lock()
        #: Recorded rows by key (what ``rows.jsonl`` holds), and how many rows this run finished.
        self.results: dict[str, RowResult] = self._read_results()
        self.ran = 0
        self._digest_now = flow_digest(self.flow)
        #: Rows whose call marked ``commit`` ran in this command (key -> the call), until they end.
        self._committed: dict[str, str] = {}
        #: Attempts of rows retried in this command (key -> attempts), until the row ends.
        self._tries: dict[str, list[dict[str, Any]]] = {}

    def _key_rows(self, column: str) -> None:
        """Each row's identity is its value in ``column``; a row without one, or two rows with
        the same one, stop the batch before anything runs."""
        seen: dict[str, int] = {}
        for row in self.rows:
            if row.error is not None:
                continue
            value = row.values.get(column)
            if value is None or str(value).strip() == "":
                raise UsageError(f"--key {column}: row {row.number} has no {column}")
            key = f"{column}={str(value).strip()}"
            if key in seen:
                raise UsageError(f"--key {column}: rows {seen[key]} and {row.number} are both {key}: a key names one row")
            seen[key] = row.number
            row.key = key

    # ------------------------------------------------------------------ checks before any browser

    @property
    def rows_file(self) -> Path:
        return self.out / "rows.jsonl"

    def request(self) -> RunRequest:
        """The batch's request: its flow, the address given for it (``--url``) and the values every
        row is given; each row's is ``request().with_inputs(row)``. The names it reads are read once."""
        if self._request is None:
            self._request = RunRequest(flow=self.flow, inputs=dict(self.common), url=self.url).shared()
        return self._request

    def _names(self) -> tuple[dict[str, Any], set[str]]:
        """The flow's declared inputs and the names its placeholders and the address use."""
        return self.request().input_names()

    @property
    def lock_file(self) -> Path:
        """The holder's pid while a command runs the batch (what a refusal names)."""
        return self.out / "batch.lock"

    def _owner(self) -> Optional[int]:
        """The pid written in ``batch.lock``, if any (for the refusal; the system lock on
        ``.batch.lock`` decides who holds the folder)."""
        try:
            pid = int(self.lock_file.read_text(encoding="utf-8").strip() or 0)
        except (OSError, ValueError):
            return None
        return pid if pid > 0 else None

    def _lock(self) -> Optional[BaseFileLock]:
        """The system lock on ``.batch.lock``, held (released by the system when its holder
        dies), or None when another command or another Batch in this process holds it."""
        return try_lock(self.out / ".batch.lock")

    def _refuse(self) -> UsageError:
        pid = self._owner()
        return UsageError(f"{self.out} is being run by another process" + (f" (pid {pid})" if pid else "")
                          + ": wait for it to end, or give another --out")

    def _check_lock(self) -> None:
        """Refuse a folder whose batch another command (or another Batch) runs now."""
        if not (self.out / ".batch.lock").exists():
            return
        held = self._lock()
        if held is None:
            raise self._refuse()
        held.release()  # free, or left by a process that died

    def _take_lock(self) -> None:
        """Hold the folder while rows run (``batch.lock`` says by which pid): two commands on
        one folder would run the same rows twice. A lock whose process died is taken over."""
        held = self._lock()
        if held is None:
            raise self._refuse()
        self.lock_file.write_text(str(os.getpid()), encoding="utf-8")
        self._held = held

    def _release_lock(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            self.lock_file.unlink(missing_ok=True)  # while still held: no pid outlives its run
            held.release()

    def _check_common(self) -> None:
        """The values for every row (``--input``) are the command's: a name the flow does not
        take, or a value not of its input's type, stops the batch, not each row."""
        declared, used = self._names()
        problems: list[str] = []
        for name, value in self.common.items():
            if name not in declared and name not in used:
                known = sorted(set(declared) | used)
                problems.append(f"unknown input {name!r} (" + (f"inputs: {', '.join(known)}" if known
                                                              else "this flow takes no inputs") + ")")
                continue
            alone = RunRequest(inputs={name: value}, names=({name: declared[name]} if name in declared else {},
                                                            frozenset({name})))
            try:
                alone.values()  # this value checked against its input alone, before any row
            except UsageError as err:
                problems.append(str(err).split(": ", 1)[1])
        if problems:
            raise UsageError(f"--input: {'; '.join(problems)}")

    def _check_columns(self) -> None:
        """A CSV header must name only the flow's inputs and every input it requires."""
        if self.inputs_file is None or not self.inputs_file.lower().endswith(".csv"):
            return
        declared, used = self._names()
        known = set(declared) | used
        header = self._header()
        where = self.inputs_file
        unknown = [c for c in header if c not in known]
        if unknown:
            takes = f"its inputs: {', '.join(sorted(known))}" if known else "it takes no inputs"
            raise UsageError(f"{where}: column {', '.join(map(repr, unknown))} is not an input of the flow ({takes}); "
                             "rename or remove the column")
        missing = [n for n in sorted(known) if n not in header and n not in self.common
                   and (n not in declared or _required(declared[n]))]
        if missing:
            raise UsageError(f"{where}: no column for the input {', '.join(map(repr, missing))}, which the flow "
                             f"requires (columns: {', '.join(header) or 'none'})")

    def _header(self) -> list[str]:
        assert self.inputs_file is not None
        text = _decode(Path(self.inputs_file))
        first = next(csv.reader(io.StringIO(text, newline=""), delimiter=_delimiter(text.split("\n", 1)[0])), [])
        return [c.strip() for c in first if c.strip()]

    def _check_folder(self) -> None:
        saved = self.out / "flow.json"
        if not saved.exists():
            return
        try:
            before = load_flow(saved)
        except UsageError:
            return
        if flow_digest(before) != flow_digest(self.flow) and not self.retry_failed:
            raise UsageError(f"{self.out} holds a batch of another version of this flow ({saved}): --retry-failed "
                             "runs its failed rows again with the changed flow (the rows that succeeded are kept); "
                             "or give a new --out, or put the flow back to resume")

    @property
    def rows_log(self) -> ResultLog[RowResult]:
        """``rows.jsonl``: a :class:`RowResult` per finished row, the last of a key standing."""
        return ResultLog(self.rows_file, lambda data: RowResult(**data), lambda result: result.key)

    def _read_results(self) -> dict[str, RowResult]:
        return self.rows_log.latest()  # a line cut short by a crash is skipped: that row runs again

    # ------------------------------------------------------------------ running

    @property
    def commits_file(self) -> Path:
        return self.out / "commits.jsonl"

    def _read_commits(self) -> dict[str, dict[str, Any]]:
        """The last line of ``commits.jsonl`` per row key: when each row last passed its point of no return."""
        return commit_log(self.commits_file).latest()

    def _again(self, result: RowResult) -> bool:
        """Whether a recorded row runs again in this command."""
        if result.status in RETRIED or result.status == PENDING:
            return True
        if result.status == NEEDS_REVIEW:
            return self.retry_needs_review
        return self.retry_failed and result.status != "success"

    def pending(self) -> list[Row]:
        """The rows this command runs: never run, cut short before their point of no return, or
        ended in an ``infra_error``; with ``retry_failed`` also the failed ones, and with
        ``retry_needs_review`` those that stopped after their point of no return."""
        return [r for r in self.rows if r.key not in self.results or self._again(self.results[r.key])]

    def _interrupted_after_commit(self) -> list[RowResult]:
        """Rows whose last commit line is later than their last result: their process stopped
        between the point of no return and the row's end. Each is recorded as needs_review."""
        found = []
        commits = self._read_commits()
        for row in self.rows:
            entry = commits.get(row.key)
            if entry is None:
                continue
            last = self.results.get(row.key)
            if last is not None and last.ended_at >= float(entry.get("at") or 0):
                continue
            found.append(RowResult(
                row=row.number, key=row.key, status=NEEDS_REVIEW, inputs=dict(row.values),
                failure=INTERRUPTED_AFTER_COMMIT, flow=flow_digest(self.flow), ended_at=time.time(),
                committed=str(entry.get("call") or ""),
                detail=f"stopped after its point of no return ({entry.get('call')}) and before its end: check "
                       "the site for what it created before running it again (--retry-needs-review)"))
        return found

    def prepare(self, row: Row) -> Union[Task, RowResult]:
        """The row's task (its flow, inputs filled in, in the task's metadata) or, when its
        values do not make the flow's inputs, its failed result."""
        if row.error is not None:
            return self._failed(row, row.error)
        request = self.request().with_inputs(row.values, source=f"row {row.number}")
        try:
            values = request.values()
            # every row's task carries the batch's one flow (the same object) and its own values: the
            # flow player fills them in when the row runs, so a batch of N rows does not hold N flows
            return request.task(self.plugins, values, flow_data=self._flow_data(), default_intent=f"row {row.number}",
                                metadata={"batch_row": row.number, "batch_key": row.key}, id=f"row-{row.number}")
        except UsageError as err:  # "pass --input NAME=..." is the command line's remedy, not a row's
            why = re.sub(r"pass --input (\w+)=\.\.\.", r"give \1 a value in this row", str(err))
            return self._failed(row, why, inputs=row.values)

    def _flow_data(self) -> dict[str, Any]:
        if self._shared_flow is None:
            self._shared_flow = self.flow.model_dump(mode="json", by_alias=True, exclude_none=True)
        return self._shared_flow

    def _failed(self, row: Row, why: str, inputs: Optional[dict[str, Any]] = None) -> RowResult:
        return RowResult(row=row.number, key=row.key, status="fail", inputs=dict(inputs or {}), failure=BAD_INPUTS,
                         detail=why)

    def workload(self) -> Workload:
        suite = BatchSuite(self.settings, commits=self.commits_file, on_commit=self._on_commit)
        return Workload(suite=suite, policy=NamedPolicy(FLOW_POLICY, {"flow": self.flow}),
                        judge="outcome", out=self.out, record_blocklist=False, with_trajectory=True)

    def _on_commit(self, key: str, call: str) -> None:
        self._committed[key] = call

    def _save_flow(self) -> None:
        """``flow.json`` is the flow this command plays; a changed flow (``retry_failed``) keeps
        the one before beside it, as ``flow-DIGEST.json``, which the rows' ``flow`` name."""
        saved = self.out / "flow.json"
        if saved.exists():
            try:
                before = load_flow(saved)
            except UsageError:
                before = None
            if before is None or flow_digest(before) == self._digest_now:
                return
            saved.replace(self.out / f"flow-{flow_digest(before)}.json")
        saved.write_text(self.flow.to_json(), encoding="utf-8")

    async def run_async(self) -> dict[str, Any]:
        """Run the pending rows; returns (and writes) the batch summary, also when cut short."""
        self.out.mkdir(parents=True, exist_ok=True)
        self._take_lock()
        by_key = {r.key: r for r in self.rows}
        items: list[WorkItem] = []
        try:
            self._save_flow()
            for stopped in self._interrupted_after_commit():
                self._add(stopped)
            for row in self.pending():
                prepared = self.prepare(row)
                if isinstance(prepared, RowResult):
                    self._add(prepared)
                else:
                    items.append(WorkItem(prepared, 0, group=row.key))
            if items:
                executor = self._executor or LocalExecutor(self.settings, self.plugins, self.workers,
                                                           browser_per_worker=self.browser_per_worker,
                                                           max_attempts=1)  # a row's retries are its own rule (--retries: RETRY)
                try:
                    await executor.start(self.workload())

                    def on_result(result: WorkResult) -> Any:
                        again = self._finished(by_key[str(result.item.group)], result)
                        # a SIGTERM whose cancellation was lost still stops the batch after this row
                        if self.stopped or interrupts.requested():
                            return STOP  # a row to run again stays pending, for the next run of the batch
                        return RETRY if again else None  # RETRY: the scheduler queues the row's next attempt

                    await executor.run(items, on_result)
                    if interrupts.requested():
                        raise KeyboardInterrupt  # as the signal's cancellation would have: the summary next
                finally:
                    await executor.close()
        finally:
            try:
                summary = self.write_summary()
            finally:
                self._release_lock()
        return summary

    def run(self) -> dict[str, Any]:
        """:meth:`run_async` for code without an event loop."""
        return asyncio.run(self.run_async())

    def _finished(self, row: Row, result: WorkResult) -> bool:
        """Record a row's episode; True when it is to run again instead (an infra_error before
        its point of no return, with ``retries`` left)."""
        traj = result.trajectory
        record = result.record
        outcome = traj.outcome if traj is not None else None
        committed = self._committed.pop(row.key, None)
        attempt = result.item.episode + 1
        detail = outcome.failure.detail if outcome is not None and outcome.failure is not None else result.error
        if record.status in RETRIED and committed is None and attempt <= self.retries:
            self._tries.setdefault(row.key, []).append(attempt_of(record.status, record.failure, detail,
                                                                  record.run_dir, time.time(), self._digest_now))
            result.trajectory = None
            return True
        status = record.status
        if committed is not None and status != "success":
            status = NEEDS_REVIEW
            detail = f"after its point of no return ({committed}): {detail}"
        inputs = dict(result.item.task.metadata.get("inputs") or {})  # also when the machinery failed it
        self._add(RowResult(
            row=row.number, key=row.key, status=status, inputs=inputs, outputs=outputs_of(traj),
            failure=record.failure, detail=detail, answer=record.answer, run_dir=record.run_dir,
            steps=record.steps, seconds=record.seconds, flow=self._digest_now, attempts=attempt,
            committed=committed, ended_at=time.time(), history=self._tries.pop(row.key, []),
            session_renewals=int((traj.task.metadata.get("session_renewals") if traj is not None else 0) or 0)))
        result.trajectory = None  # its screenshots need not stay in memory for the rest of the batch
        self._count(status, record.failure)
        return False

    def _count(self, status: str, failure: Optional[str]) -> None:
        """Stop the batch (``self.stopped`` says why) once too many rows failed, or too many in a
        row failed the same way."""
        if status == "success":
            self._same = (None, 0)
            return
        self._failures += 1
        kind, n = self._same
        self._same = (failure, n + 1 if failure == kind else 1)
        if self.stopped:
            return
        if self.max_failures and self._failures >= self.max_failures:
            self.stopped = f"{self._failures} rows failed (--max-failures {self.max_failures})"
        elif self.stop_after_same_failure and self._same[1] >= self.stop_after_same_failure:
            self.stopped = (f"{self._same[1]} rows in a row failed with {failure} "
                            f"(--stop-after-same-failure {self.stop_after_same_failure})")

    def _add(self, result: RowResult) -> None:
        """Record a finished row: appended to ``rows.jsonl`` (secrets scrubbed), then reported.
        The row keeps its own inputs only: a value every row was given (``common``) is stored
        once, as the summary's ``common_inputs``, not copied into each row."""
        if self.common:
            result.inputs = {k: v for k, v in result.inputs.items() if not (k in self.common and v == self.common[k])}
        before = self.results.get(result.key)
        if before is not None and before.status != PENDING:  # a run again: what it came to before is kept
            result.history = [*before.history, attempt_of(before.status, before.failure, before.detail, before.run_dir,
                                                          before.ended_at, before.flow), *result.history]
        result = self.rows_log.append(asdict(result))
        self.results[result.key] = result
        self.ran += 1
        if self.on_row is not None:
            self.on_row(result)

    # ------------------------------------------------------------------ the summary

    def row_results(self) -> list[RowResult]:
        """Every row of the input file, in its order: its result, or ``pending``."""
        out = []
        for row in self.rows:
            found = self.results.get(row.key)
            if found is None:
                out.append(RowResult(row=row.number, key=row.key, status=PENDING, inputs=dict(row.values)))
            else:  # the row's number in today's file (rows may have moved since it ran)
                out.append(RowResult(**{**asdict(found), "row": row.number}))
        return out

    def summary(self) -> dict[str, Any]:
        results = self.row_results()
        done = [r for r in results if r.status != PENDING]
        succeeded = sum(1 for r in done if r.status == "success")
        review = sum(1 for r in done if r.status == NEEDS_REVIEW)
        return {
            "schema": BATCH_SCHEMA,
            "flow": self.flow_file or self.flow.task,
            "inputs_file": self.inputs_file,
            "out": str(self.out),
            "rows": len(results),
            "succeeded": succeeded,
            "failed": len(done) - succeeded - review,
            "needs_review": review,
            "pending": len(results) - len(done),
            "sessions_renewed": sum(r.session_renewals for r in done),
            "ran": self.ran,
            "stopped": self.stopped,
            "common_inputs": dict(self.common),
            "results": [asdict(r) for r in results],
        }

    def write_summary(self) -> dict[str, Any]:
        """Write ``batch.json`` and ``batch.csv`` from the rows' results; returns the summary."""
        summary = secrets.scrub(self.summary())
        self.out.mkdir(parents=True, exist_ok=True)
        write_atomic(self.out / "batch.json", json.dumps(summary, indent=2, ensure_ascii=False, default=str))
        self._write_csv(summary["results"])
        try:  # the page a person opens: counts, rows, failures with their last screenshot

            write_batch_report(self.out)
        except Exception as err:  # noqa: BLE001 - batch.json and batch.csv are written; the page is extra

            warnings.warn(f"{self.out}: report.html not written: {err}", stacklevel=2)
        return summary

    def _write_csv(self, results: list[dict[str, Any]]) -> None:
        declared, used = self._names()
        input_names = list(declared) + sorted(used - set(declared))
        for r in results:
            input_names += [k for k in r["inputs"] if k not in input_names]
        output_names: list[str] = []
        for r in results:
            output_names += [k for k in r["outputs"] if k not in output_names]

        def cell(value: Any) -> str:
            if value is None:
                return ""
            return spreadsheet_safe(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                                                  default=str))

        buf = io.StringIO(newline="")
        writer = csv.writer(buf)
        header = ["row", "status", *(f"input:{n}" for n in input_names), *(f"output:{n}" for n in output_names),
                  "failure", "detail", "run_dir", "earlier attempts"]
        lines = [[r["row"], r["status"], *(cell(r["inputs"].get(n)) for n in input_names),
                  *(cell(r["outputs"].get(n)) for n in output_names), cell(r["failure"]),
                  cell(r["detail"]), cell(r["run_dir"]), cell(history_text(r.get("history") or []))] for r in results]
        writer.writerows([header, *lines])
        write_atomic(self.out / "batch.csv", buf.getvalue())
        _write_xlsx(self.out / "batch.xlsx", header, lines)
