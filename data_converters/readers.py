"""Raw-file readers that name the file and line of every bad record (JSONL, JSON, CSV, TSV)."""

from __future__ import annotations

import csv
import json
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, TextIO

from usersimcrs.core.json_types import JSON, JSONObject
from usersimcrs.errors import DataError

BadRecord = Callable[[str, str], None]
"""Called with (where, reason) for a malformed record; raises unless --skip-bad."""

NAN_STRINGS = frozenset({"nan", "NaN", "None", "\\N"})

csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


@contextmanager
def _open_text(path: Path) -> Iterator[TextIO]:
    """The file as UTF-8 text; unreadable files and bytes that are not UTF-8 are one-line DataErrors."""
    try:
        handle = path.open(encoding="utf-8-sig", newline="")
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror})") from exc
    with handle:
        try:
            yield handle
        except UnicodeDecodeError as exc:
            raise DataError(f"{path}: not UTF-8 text ({exc.reason} near byte {exc.start})") from None


def header_of(path: Path, delimiter: str = ",") -> list[str]:
    """The column names on the first line of a delimited file (empty for other files)."""
    with _open_text(path) as handle:
        first = handle.readline().rstrip("\r\n")
    return [c.strip().strip('"') for c in first.split(delimiter)] if first else []


def iter_json_lines(path: Path, on_bad: BadRecord) -> Iterator[tuple[int, JSONObject]]:
    """(line number, object) for each line; a truncated or non-object line goes to `on_bad`."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror})") from exc
    lines = data.split(b"\n")
    last = len(lines)
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw.decode("utf-8-sig"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            torn = number == last and not data.endswith(b"\n")
            reason = "truncated JSON line (file ends mid-record)" if torn else f"not valid JSON ({exc})"
            on_bad(f"{path}:{number}", reason)
            continue
        if not isinstance(obj, dict):
            on_bad(f"{path}:{number}", f"expected a JSON object, got {type(obj).__name__}")
            continue
        yield number, obj


def read_json(path: Path) -> JSON:
    """A whole JSON document; malformed JSON is a DataError naming the line and column."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror})") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})") from exc


def require_columns(path: Path, header: list[str], required: list[str]) -> None:
    """A missing required column makes the whole file unusable: one DataError naming it."""
    for column in required:
        if column not in header:
            raise DataError(f"{path}: missing column {column!r} (header: {', '.join(header)})")


def iter_csv_rows(
    path: Path, required: list[str], on_bad: BadRecord, *, delimiter: str = ","
) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, row) for a quoted CSV; rows with a missing or extra field go to `on_bad`."""
    with _open_text(path) as handle:
        reader = csv.reader(handle, delimiter=delimiter)
        try:
            header = [c.strip() for c in next(reader)]
        except StopIteration:
            raise DataError(f"{path}: empty file (no header)") from None
        require_columns(path, header, required)
        end = reader.line_num
        for row in reader:
            start, end = end + 1, reader.line_num
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if len(row) != len(header):
                on_bad(f"{path}:{start}", _field_count_reason(header, row))
                continue
            yield start, dict(zip(header, row))


def iter_tsv_rows(path: Path, required: list[str], on_bad: BadRecord) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, row) for a TSV read with quoting off: a `"` inside a field is just a character."""
    with _open_text(path) as handle:
        lines = handle.read().split("\n")
    if not lines or not lines[0].strip():
        raise DataError(f"{path}: empty file (no header)")
    header = [c.strip() for c in lines[0].rstrip("\r").split("\t")]
    require_columns(path, header, required)
    for number, line in enumerate(lines[1:], start=2):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        row = line.split("\t")
        if len(row) != len(header):
            on_bad(f"{path}:{number}", _field_count_reason(header, row))
            continue
        yield number, dict(zip(header, row))


def _field_count_reason(header: list[str], row: list[str]) -> str:
    if len(row) < len(header):
        return f"expected {len(header)} fields, got {len(row)} (missing column {header[len(row)]!r})"
    return f"expected {len(header)} fields, got {len(row)} (extra fields after column {header[-1]!r})"


def clean(value: str | None) -> str | None:
    """A cell with surrounding space removed; empty cells and literal nan/None/\\N become None."""
    if value is None:
        return None
    value = value.strip()
    return None if value == "" or value in NAN_STRINGS else value
