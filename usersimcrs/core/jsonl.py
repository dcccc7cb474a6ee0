"""JSON Lines records: whole-line appends, and a reader that tolerates a torn last line.

A process killed mid-write can leave a last line without its newline. Readers drop such a tail
(it was never a complete record) and report it; a bad line in the middle is a DataError naming
the file and line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Iterator, TypeVar

from pydantic import BaseModel, ValidationError

from usersimcrs.core.storage import StorageError, append_record, is_storage_failure, storage_error
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
    """Appends records as whole lines with one write each, flushed (and optionally fsynced).

    A write that fails for lack of space or a device error raises `StorageError` naming the file,
    after cutting the file back to its last whole line; a file this writer created and never got
    a line into is removed again, so a failed command leaves no empty file behind.
    """

    def __init__(self, path: str | Path, *, fsync: bool = False) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._created = not self.path.exists()
            repair_torn_tail(self.path)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            if is_storage_failure(exc):
                raise storage_error(exc, self.path, None) from None
            raise
        self._fsync = fsync
        self.lines = 0

    def write(self, record: BaseModel | dict[str, Any]) -> None:
        if isinstance(record, BaseModel):
            line = record.model_dump_json(exclude_none=False)
        else:
            line = json.dumps(record, ensure_ascii=False, default=str)
        self.write_line((line + "\n").encode("utf-8"))

    def write_line(self, data: bytes) -> None:
        """Append one already encoded line (ending in a newline)."""
        try:
            append_record(self._fd, data, self.path)
            if self._fsync:
                os.fsync(self._fd)
        except StorageError:
            self._forget_if_empty()
            raise
        self.lines += 1

    def sync(self) -> None:
        """Flush the file to the device (before it replaces another by rename)."""
        os.fsync(self._fd)

    def _forget_if_empty(self) -> None:
        if self._created and not self.lines and os.fstat(self._fd).st_size == 0:
            self.path.unlink(missing_ok=True)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_jsonl(path: str | Path, records: Iterable[BaseModel | dict[str, Any]]) -> Path:
    """A fresh JSONL file at `path`, whole or not at all: written beside it, renamed over it when complete."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        with JsonlWriter(tmp) as writer:
            for record in records:
                writer.write(record)
            writer.sync()
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
