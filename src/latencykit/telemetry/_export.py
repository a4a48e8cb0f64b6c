"""Records out of the process: JSON Lines, CSV and a pandas DataFrame (``latencykit[pandas]``).

One row / JSON object per `CallRecord`, with every field of ``CallRecord.to_dict()`` in
declaration order — timings in seconds, token counts, cache verdicts, outcome — and never
prompt or completion text (a record holds none). JSON Lines keeps types (``null``, lists,
the ``extra`` object); CSV writes ``None`` as an empty cell and lists / ``extra`` as JSON
text. `read_jsonl` turns a JSON Lines file back into records.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import importlib
import json
import os
from collections.abc import Iterable, Iterator
from typing import IO, Any, Union

from ..core._record import CallRecord

__all__ = ["FIELDS", "read_jsonl", "to_csv", "to_dataframe", "to_jsonl"]

PathOrFile = Union[str, "os.PathLike[str]", IO[str]]

FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(CallRecord))
"""Column order of every export: the `CallRecord` fields as declared."""

_PANDAS_HINT = 'Recorder.to_dataframe() needs pandas: pip install "latencykit[pandas]"'


@contextlib.contextmanager
def _open(target: PathOrFile, mode: str) -> Iterator[IO[str]]:
    """A text file for ``target``: opened (and closed) here for a path, used as given for a file object."""
    if isinstance(target, (str, os.PathLike)):
        with open(target, mode, encoding="utf-8", newline="") as f:
            yield f
    elif hasattr(target, "write" if "w" in mode else "read"):
        yield target
    else:
        raise ValueError(f"expected a path or a text file object, got {target!r}")


def to_jsonl(records: Iterable[CallRecord], target: PathOrFile) -> int:
    """Write one JSON object per record (``CallRecord.to_dict()``) per line; returns the number written."""
    n = 0
    with _open(target, "w") as f:
        for rec in records:
            f.write(json.dumps(rec.to_dict(), ensure_ascii=False, allow_nan=False, default=str))
            f.write("\n")
            n += 1
    return n


def read_jsonl(source: PathOrFile) -> list[CallRecord]:
    """Records from a `to_jsonl` file (blank lines skipped); ValueError naming the line otherwise."""
    out: list[CallRecord] = []
    with _open(source, "r") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                out.append(CallRecord.from_dict(json.loads(line)))
            except (ValueError, TypeError) as exc:
                raise ValueError(f"line {i} is not a latencykit CallRecord: {exc}") from None
    return out


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(list(value) if isinstance(value, tuple) else value, ensure_ascii=False, default=str)
    return value


def to_csv(records: Iterable[CallRecord], target: PathOrFile) -> int:
    """Write a header row and one row per record; returns the number of records written."""
    n = 0
    with _open(target, "w") as f:
        writer = csv.writer(f)
        writer.writerow(FIELDS)
        for rec in records:
            d = rec.to_dict()
            writer.writerow([_cell(d[k]) for k in FIELDS])
            n += 1
    return n


def to_dataframe(records: Iterable[CallRecord]) -> Any:
    """A ``pandas.DataFrame`` with one row per record and the `FIELDS` columns (lists and ``extra`` as objects)."""
    try:
        pd: Any = importlib.import_module("pandas")  # optional; untyped for mypy either way
    except ImportError as exc:
        raise ImportError(_PANDAS_HINT) from exc
    return pd.DataFrame([rec.to_dict() for rec in records], columns=list(FIELDS))
