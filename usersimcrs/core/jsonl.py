"""JSON Lines records: whole-line appends, and a reader that tolerates a torn last line.

A process killed mid-write can leave a last line without its newline. Readers drop such a tail
(it was never a complete record) and report it; a bad line in the middle is a DataError naming
the file and line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator, TypeVar

from pydantic import BaseModel, ValidationError

from usersimcrs.core.validation import describe_validation_error
from usersimcrs.errors import DataError

M = TypeVar("M", bound=BaseModel)


def iter_jsonl(path: str | Path, *, on_torn_tail: str = "drop") -> Iterator[dict[str, Any]]:
    """Yield each complete JSON object of `path`; a torn final line is dropped (or raises).

    The file is streamed line by line, so reading a 10,000-conversation run needs no more
    memory than its longest line.
    """
    path = Path(path)
    if not path.exists():
        return
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                if not raw.endswith(b"\n"):  # only the last line can lack its newline
                    if on_torn_tail == "raise":
                        raise DataError(f"{path}:{number}: torn last line (incomplete record)") from exc
                    return
                raise DataError(f"{path}:{number}: not valid JSON ({exc})") from exc
            if not isinstance(obj, dict):
                raise DataError(f"{path}:{number}: expected a JSON object, got {type(obj).__name__}")
            yield obj


def read_models(path: str | Path, model: type[M]) -> list[M]:
    """Read every record of `path` as `model`, naming the line of the first invalid one."""
    out = []
    for number, obj in enumerate(iter_jsonl(path), start=1):
        try:
            out.append(model.model_validate(obj))
        except ValidationError as exc:
            raise DataError(describe_validation_error(exc, source=f"{path}: record {number}")) from exc
    return out


def repair_torn_tail(path: str | Path) -> int:
    """Cut a torn last line off `path` so that appends start on a fresh line; returns bytes cut."""
    path = Path(path)
    if not path.exists():
        return 0
    size = path.stat().st_size
    if size == 0:
        return 0
    with path.open("rb+") as handle:
        handle.seek(max(0, size - 1))
        if handle.read(1) == b"\n":
            return 0
        handle.seek(0)
        data = handle.read()
        keep = data.rfind(b"\n") + 1
        if _is_complete_record(data[keep:]):
            # only the newline was lost: the reader already counts this record, so keep it
            handle.seek(0, os.SEEK_END)
            handle.write(b"\n")
            return 0
        handle.truncate(keep)
        return size - keep


def _is_complete_record(raw: bytes) -> bool:
    """True when `raw` is a whole JSON object (what `iter_jsonl` yields for a last line)."""
    try:
        return isinstance(json.loads(raw), dict)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False


class JsonlWriter:
    """Appends records as whole lines with one write each, flushed (and optionally fsynced)."""

    def __init__(self, path: str | Path, *, fsync: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        repair_torn_tail(self.path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._fsync = fsync

    def write(self, record: BaseModel | dict[str, Any]) -> None:
        if isinstance(record, BaseModel):
            line = record.model_dump_json(exclude_none=False)
        else:
            line = json.dumps(record, ensure_ascii=False, default=str)
        data = (line + "\n").encode("utf-8")
        written = 0
        while written < len(data):
            written += os.write(self._fd, data[written:])
        if self._fsync:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
