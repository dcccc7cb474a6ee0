"""One writer at a time per run or matrix folder: an OS-level lock on a file inside the folder.

`fcntl.flock` on ``FOLDER/.usersimcrs.lock``: the kernel releases it when the holder exits or is
killed, so a crash never leaves a stale lock to clean up (a file left by a killed holder is simply
locked by the next writer). The holder writes its PID and command into the file, so a second
writer stops at once with one line naming them (`FolderBusy`). The holder removes the file when it
is done (a writer that locked a file just removed checks the path still names it, and retries),
and a folder the lock created is removed again when nothing else was written into it.

Within one process the lock is re-entrant (a matrix run holds its folder while it writes the
matrix report; `simulate --report` scores and reports the folder it just ran): flock conflicts
between two open file descriptions even in the same process, so the held locks are counted in a
process-wide table keyed by the lock file's device and inode. That table is the one piece of
process state here, as the lock itself is a property of the process.
"""

from __future__ import annotations

import errno
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from usersimcrs.core.storage import is_storage_failure, storage_error
from usersimcrs.errors import UserError

LOCK_FILE = ".usersimcrs.lock"
_PID_FIELD = 64  # bytes of "PID command" written at offset 0, space-padded, so rewrites need no new block


class FolderBusy(UserError):
    """Another process is writing the folder; this command stopped before writing anything (exit 75)."""

    exit_code = 75  # EX_TEMPFAIL: try again later

    def __init__(self, folder: Path, holder: str) -> None:
        self.folder = folder
        self.holder = holder
        super().__init__(f"{folder}: another usersimcrs process is writing this folder ({holder}); wait for it to end")


@dataclass
class _Held:
    fd: int
    depth: int
    path: Path
    created_folder: bool


class FolderLock:
    """The writer lock of one folder; use as a context manager (re-entrant within a process)."""

    _held: ClassVar[dict[tuple[int, int], _Held]] = {}
    _guard: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, folder: str | Path, command: str = "") -> None:
        self.folder = Path(folder)
        self.command = command or _command_name()
        self.path = self.folder / LOCK_FILE
        self._key: tuple[int, int] | None = None

    def acquire(self) -> None:
        """Take the lock or raise `FolderBusy` naming the holder; never waits."""
        created_folder = not self.folder.exists()
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            if is_storage_failure(exc):
                raise storage_error(exc, self.folder, None) from None
            raise
        try:
            self._acquire(created_folder)
        except BaseException:
            if created_folder:
                _remove_if_empty(self.folder)
            raise

    def _acquire(self, created_folder: bool) -> None:
        import fcntl

        while True:
            try:
                created = not self.path.exists()
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                if is_storage_failure(exc):
                    raise storage_error(exc, self.path, None) from None
                raise
            stat = os.fstat(fd)
            key = (stat.st_dev, stat.st_ino)
            with self._guard:
                held = self._held.get(key)
                if held is not None:  # this process holds it already
                    os.close(fd)
                    held.depth += 1
                    self._key = key
                    return
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError as exc:
                    holder = _read_holder(fd)
                    os.close(fd)
                    if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                        raise FolderBusy(self.folder, holder) from None
                    raise
                if not _names(self.path, stat):  # the holder before us removed the file: lock the new one
                    os.close(fd)
                    continue
                try:
                    _write_holder(fd, self.command)
                except OSError as exc:
                    if created:  # a full disk must not leave an empty lock file behind
                        self.path.unlink(missing_ok=True)
                    os.close(fd)
                    if is_storage_failure(exc):
                        raise storage_error(exc, self.path, _PID_FIELD) from None
                    raise
                self._held[key] = _Held(fd=fd, depth=1, path=self.path, created_folder=created_folder)
                self._key = key
                return

    def release(self) -> None:
        """Give the lock up (the outermost release in the process unlocks the file)."""
        if self._key is None:
            return
        with self._guard:
            held = self._held.get(self._key)
            self._key = None
            if held is None:
                return
            held.depth -= 1
            if held.depth > 0:
                return
            for key, value in list(self._held.items()):
                if value is held:
                    del self._held[key]
            held.path.unlink(missing_ok=True)  # still locked: a writer waiting on this file will see it gone
            os.close(held.fd)  # closing the last descriptor releases the flock
        if held.created_folder:
            _remove_if_empty(held.path.parent)

    def __enter__(self) -> FolderLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _names(path: Path, stat: os.stat_result) -> bool:
    """True when `path` still names the file whose status is `stat`."""
    try:
        now = os.stat(path)
    except FileNotFoundError:
        return False
    return (now.st_dev, now.st_ino) == (stat.st_dev, stat.st_ino)


def _remove_if_empty(folder: Path) -> None:
    """Remove a folder the lock created when nothing was written into it (a refused or failed command)."""
    try:
        folder.rmdir()
    except OSError:
        pass


def _command_name() -> str:
    argv = sys.argv[1:3] if sys.argv and sys.argv[0].endswith(("usersimcrs", "__main__.py")) else []
    return " ".join(["usersimcrs", *argv]) if argv else "usersimcrs"


def _write_holder(fd: int, command: str) -> None:
    text = f"{os.getpid()} {command}".encode("utf-8", "replace")[: _PID_FIELD - 1]
    os.pwrite(fd, text.ljust(_PID_FIELD - 1) + b"\n", 0)


def _read_holder(fd: int) -> str:
    """'PID 1234: usersimcrs run' from the lock file (the holder wrote it after locking)."""
    try:
        raw = os.pread(fd, _PID_FIELD, 0).decode("utf-8", "replace").strip()
    except OSError:
        raw = ""
    pid, _, command = raw.partition(" ")
    if not pid.isdigit():
        return "PID unknown"
    return f"PID {pid}" + (f": {command.strip()}" if command.strip() else "")
