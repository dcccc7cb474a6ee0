"""Durable writes for run folders: whole-line appends and atomic replacements that survive a full disk.

Every byte the toolkit writes into a run or matrix folder goes through here (via `RunFolder` and
`MatrixFolder`). A write either happens whole or not at all:

- `append_record` appends one line with one `write()` to a file opened with `O_APPEND`; when the
  disk fills up (ENOSPC, EDQUOT) or the device fails (EIO) part-way, the file is cut back to its
  size before the write, so it never ends in half a record.
- `write_atomic` writes a temporary file next to the target and renames it over the target; on
  failure the temporary file is removed and the target is left as it was.

Either failure becomes one `StorageError` naming the path and the bytes that could not be written;
the CLI prints it as one line (exit code 74, EX_IOERR of sysexits.h).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from usersimcrs.errors import UserError

STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.EFBIG})


class StorageError(UserError):
    """A write into a run folder failed for lack of space or a device error; nothing was half-written."""

    exit_code = 74  # EX_IOERR

    def __init__(self, path: Path, needed: int | None, reason: str) -> None:
        self.path = path
        self.needed = needed
        self.reason = reason
        size = f"; {format_bytes(needed)} could not be written" if needed else ""
        super().__init__(f"{path}: {reason}{size}; what was written before is kept (free space, then run again)")


def format_bytes(size: int) -> str:
    """1234 -> '1.2 kB' (decimal units, as `df -h --si` shows them)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


def is_storage_failure(exc: BaseException) -> bool:
    """True for an OSError of a full disk, a quota, a read-only or failing device."""
    return isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS


def storage_error(exc: OSError, path: Path, needed: int | None) -> StorageError:
    """The one-line error for a failed write of `needed` bytes to `path`."""
    reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
    return StorageError(path, needed, reason)


def append_record(fd: int, data: bytes, path: Path) -> None:
    """Append `data` (one whole line) to the file open as `fd` (O_APPEND); all of it or none of it.

    A short write is continued; a write that fails part-way is undone by cutting the file back to
    its size before it, so a reader never sees a torn line that this process left.
    """
    before = os.fstat(fd).st_size
    written = 0
    try:
        while written < len(data):
            written += os.write(fd, data[written:])
    except OSError as exc:
        if written:
            try:
                os.ftruncate(fd, before)
            except OSError:  # the torn tail stays; every reader ignores it and the next writer cuts it
                pass
        if is_storage_failure(exc):
            raise storage_error(exc, path, len(data)) from None
        raise


def write_atomic(path: str | Path, data: bytes | str, *, fsync: bool = False) -> Path:
    """Replace `path` by `data` atomically (temp file + rename); on failure `path` is untouched.

    The temporary file is removed on any failure, so a full disk leaves neither a 0-byte target
    nor a `.tmp` file behind.
    """
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if is_storage_failure(exc):
            raise storage_error(exc, path, len(payload)) from None
        raise
    return path


def remove_files(paths: list[Path]) -> None:
    """Remove each of `paths` that exists (removing frees space, so it cannot fail for lack of it)."""
    for path in paths:
        path.unlink(missing_ok=True)
