"""The study folder: its log (`records.jsonl`), its secret key and the lock of the one server writing it.

Crash safety: each record is one line written with one `write()` to a file opened with `O_APPEND`
and fsynced before the request that made it is answered (`core/jsonl.JsonlWriter`); a record a
participant was told about is on disk. A kill mid-write leaves at most a torn last line, which the
reader ignores and the writer cuts before appending. Idempotence: a record whose `record_id` is
already in the log is not written again (`append` returns the stored one).

Tokens: participant links and the admin token are HMACs of the study's secret key (`secret.key`,
0600, made once), so no token is ever written to the log and a restart recognises every link.
"""

from __future__ import annotations

import asyncio
import base64
import fcntl
import hashlib
import hmac
import os
import secrets
from pathlib import Path
from typing import Callable

from usersimcrs.core.jsonl import JsonlWriter, iter_jsonl
from usersimcrs.errors import DataError, UserError
from usersimcrs.studio.records import RECORD_ADAPTER, StudyRecord
from usersimcrs.studio.state import StudyState

LOG = "records.jsonl"
SECRET = "secret.key"
LOCK = "studio.lock"


def read_state(folder: str | Path) -> StudyState:
    """The state of a study folder, read without taking its lock (for `--export` and checks)."""
    state = StudyState()
    path = Path(folder) / LOG
    for number, raw in enumerate(iter_jsonl(path), start=1):
        try:
            record = RECORD_ADAPTER.validate_python(raw)
        except ValueError as exc:
            raise DataError(f"{path}: record {number}: {str(exc).splitlines()[0]}") from None
        if record.record_id not in state.records:
            state.apply(record)
    return state


def read_secret(folder: Path, *, create: bool) -> bytes:
    """The study's secret key (made on first use with `create`, mode 0600)."""
    path = folder / SECRET
    if not path.exists():
        if not create:
            raise UserError(f"{folder}: no study here (no {SECRET})")
        folder.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return read_secret(folder, create=False)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_hex(32))
            handle.flush()
            os.fsync(handle.fileno())
    return bytes.fromhex(path.read_text(encoding="utf-8").strip())


class Keys:
    """Everything derived from the study's secret: participant tokens, the admin token, form tokens."""

    def __init__(self, secret: bytes, admin_token: str | None = None) -> None:
        self._secret = secret
        self.admin = admin_token or self.derive("admin")
        self.open_key = self.derive("open-link")[:16]

    def derive(self, purpose: str) -> str:
        digest = hmac.new(self._secret, purpose.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")[:32]

    def participant_token(self, participant_id: str) -> str:
        return self.derive(f"participant:{participant_id}")

    def csrf(self, scope: str) -> str:
        """The form token of a participant (scope = their ID), of the admin pages or of the join form."""
        return self.derive(f"csrf:{scope}")

    def check_csrf(self, scope: str, value: str | None) -> bool:
        return value is not None and hmac.compare_digest(self.csrf(scope), value)


class FolderLock:
    """An exclusive `flock` on the study folder: one server (or one export) writes it at a time.

    The OS releases it when the holder dies, so a killed server never leaves a stale lock.
    """

    def __init__(self, folder: Path) -> None:
        self.path = folder / LOCK
        self._fd = -1

    def acquire(self) -> FolderLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise UserError(f"{self.path.parent}: another studio server (PID {holder}) is using this study") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # closing drops the flock
            self._fd = -1


class StudyStore:
    """The log of one study folder, its state, and the one async path that appends to both."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._lock = FolderLock(self.folder).acquire()
        try:
            self.state = read_state(self.folder)
            new_file = not (self.folder / LOG).exists()
            self._writer = JsonlWriter(self.folder / LOG, fsync=True)
            if new_file:
                _fsync_dir(self.folder)
        except BaseException:
            self._lock.release()
            raise
        self._append_lock = asyncio.Lock()

    async def append(self, record: StudyRecord) -> tuple[StudyRecord, bool]:
        """Store `record` once: (the stored record, True) when new; (the earlier one, False) for a repeat.

        A record that `StudyState.conflict` refuses raises `Conflict`. The line is fsynced before
        this returns, so the caller may acknowledge it.
        """
        return await self.submit(record.record_id, lambda state: record)

    async def submit(self, record_id: str, build: Callable[[StudyState], StudyRecord]) -> tuple[StudyRecord, bool]:
        """`append` for a record made from the current state (balancing counts), under the same lock,
        so two concurrent requests never decide from the same counts."""
        async with self._append_lock:
            stored = self.state.records.get(record_id)
            if stored is not None:
                return stored, False
            record = build(self.state)
            reason = self.state.conflict(record)
            if reason is not None:
                raise Conflict(reason)
            await asyncio.to_thread(self._writer.write, record)
            self.state.apply(record)
            return record, True

    def append_now(self, record: StudyRecord) -> tuple[StudyRecord, bool]:
        """`append` for code outside the event loop (set-up: issuing links before the server starts)."""
        stored = self.state.records.get(record.record_id)
        if stored is not None:
            return stored, False
        reason = self.state.conflict(record)
        if reason is not None:
            raise Conflict(reason)
        self._writer.write(record)
        self.state.apply(record)
        return record, True

    def close(self) -> None:
        self._writer.close()
        self._lock.release()


class Conflict(Exception):
    """A submission repeats something already answered (a stale form); the page says so."""


def _fsync_dir(folder: Path) -> None:
    """Make a new file's directory entry durable too."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
