"""Task files: owrl JSONL, and the public records of Online-Mind2Web, WebVoyager and DeepShop.

Each record's format is recognised by its fields, so one loader reads them all:

- owrl: ``intent`` and ``start_url`` (the fields of :class:`owrl_sdk.types.Task`);
- Online-Mind2Web: ``task_id``, ``confirmed_task``, ``website`` (``level``, ``reference_length``);
- WebVoyager: ``id``, ``ques``, ``web``, ``web_name``;
- DeepShop: ``id``, ``ques``, ``web`` (plus its attribute/filter/sort tags), without ``web_name``.

A file may be JSON Lines or one JSON array. A bad record is reported with its line (or
array index) and skipped; the good ones are all kept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union
from urllib.parse import urlsplit

from pydantic import ValidationError

from owrl_sdk.formats.documents import format_validation_error, json_lines, read_text, too_deep
from owrl_sdk.errors import DocumentError
from owrl_sdk.types import Task

LEVELS = {"easy": 1, "medium": 3, "hard": 5}


@dataclass
class BadRecord:
    where: str  # "line 7" or "record 7"
    error: str


def _host(url: str) -> list[str]:
    host = urlsplit(url if "://" in url else "https://" + url).hostname
    return [host.removeprefix("www.")] if host else []


def _url(site: str) -> str:
    return site if "://" in site else "https://" + site


def record_to_task(rec: dict[str, Any], source: str = "") -> Task:
    if "intent" in rec:
        return Task.model_validate(rec)
    if "confirmed_task" in rec:
        url = _url(rec["website"])
        return Task(id=str(rec["task_id"]), intent=rec["confirmed_task"], start_url=url, suite=source or "online-mind2web",
                    difficulty=LEVELS.get(str(rec.get("level", "")).lower()), allowed_domains=_host(url),
                    metadata={k: v for k, v in rec.items() if k not in ("task_id", "confirmed_task", "website")}
                    | {"format": "online-mind2web"})
    if "ques" in rec and "web" in rec:
        fmt = "webvoyager" if "web_name" in rec else "deepshop"
        url = _url(rec["web"])
        return Task(id=str(rec["id"]), intent=rec["ques"], start_url=url, suite=source or fmt, allowed_domains=_host(url),
                    metadata={k: v for k, v in rec.items() if k not in ("id", "ques", "web")} | {"format": fmt})
    raise ValueError("not a task record: expected owrl (intent, start_url), Online-Mind2Web "
                     "(task_id, confirmed_task, website), WebVoyager or DeepShop (id, ques, web) fields")


class _TooDeep(ValueError):
    """A record nested deeper than the JSON parser can follow (reported, and skipped)."""

    msg = "nested too deeply to read"


def _records(path: Path) -> list[tuple[str, Any]]:
    text = read_text(path)  # a missing, unreadable or non-UTF-8 file is an error of the whole file
    if text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise DocumentError(f"{path}: not valid JSON (line {err.lineno}: {err.msg})") from None
        except RecursionError:
            raise DocumentError(too_deep(path)) from None
        return [(f"record {i + 1}", rec) for i, rec in enumerate(data)]
    out: list[tuple[str, Any]] = []
    for n, line in enumerate(json_lines(text), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            out.append((f"line {n}", json.loads(line)))
        except json.JSONDecodeError as err:
            out.append((f"line {n}", err))
        except RecursionError:
            out.append((f"line {n}", _TooDeep()))
    return out


def load_tasks(path: Union[str, Path], suite: str = "") -> tuple[list[Task], list[BadRecord]]:
    """Tasks from a file, and the records that could not be read (with where they are)."""
    p = Path(path)
    tasks: list[Task] = []
    bad: list[BadRecord] = []
    seen: set[str] = set()
    for where, rec in _records(p):
        if isinstance(rec, _TooDeep):
            bad.append(BadRecord(where, rec.msg))
            continue
        if isinstance(rec, json.JSONDecodeError):
            bad.append(BadRecord(where, f"not valid JSON: {rec.msg}"))
            continue
        if not isinstance(rec, dict):
            bad.append(BadRecord(where, "not a JSON object"))
            continue
        try:
            task = record_to_task(rec, suite)
        except ValidationError as err:
            bad.append(BadRecord(where, format_validation_error(err)))
            continue
        except (ValueError, KeyError, TypeError) as err:
            bad.append(BadRecord(where, str(err)))
            continue
        except RecursionError:
            bad.append(BadRecord(where, _TooDeep.msg))
            continue
        if task.id in seen:
            bad.append(BadRecord(where, f"duplicate task id {task.id!r}"))
            continue
        seen.add(task.id)
        tasks.append(task)
    return tasks, bad
