"""Writes that fail part-way (ENOSPC, EIO): whole or nothing, one StorageError naming the path.

The tmpfs tests (test_storage_full_disk.py) fill a real disk; these inject the failing `write()`
directly, so the device error (EIO) and the short write are covered on any machine.
"""

from __future__ import annotations

import errno
import os

import pytest

from usersimcrs.core import storage
from usersimcrs.core.jsonl import JsonlWriter
from usersimcrs.core.run_folder import RunFolder
from usersimcrs.core.storage import StorageError, write_atomic


def _failing_write(after_bytes: int, code: int):
    """os.write that writes `after_bytes` more bytes in total, then fails with `code`."""
    real = os.write
    left = [after_bytes]

    def write(fd: int, data: bytes) -> int:
        if left[0] <= 0:
            raise OSError(code, os.strerror(code))
        chunk = bytes(data[: left[0]])
        left[0] -= len(chunk)
        return real(fd, chunk)

    return write


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO, errno.EDQUOT])
def test_a_line_that_fails_part_way_is_cut_back_and_named(tmp_path, monkeypatch, code):
    path = tmp_path / "d.jsonl"
    with JsonlWriter(path) as writer:
        writer.write({"conversation_id": "a"})
        monkeypatch.setattr(storage.os, "write", _failing_write(7, code))
        with pytest.raises(StorageError) as raised:
            writer.write({"conversation_id": "b", "text": "x" * 100})
    assert path.read_bytes() == b'{"conversation_id": "a"}\n'  # the 7 bytes written were taken back
    assert str(path) in str(raised.value) and os.strerror(code).lower() in str(raised.value)
    assert raised.value.exit_code == 74


def test_a_new_file_that_never_got_a_line_is_removed(tmp_path, monkeypatch):
    path = tmp_path / "judgments.jsonl"
    monkeypatch.setattr(storage.os, "write", _failing_write(0, errno.ENOSPC))
    with JsonlWriter(path) as writer, pytest.raises(StorageError):
        writer.write({"conversation_id": "a"})
    assert not path.exists()


def test_an_atomic_replacement_that_fails_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "manifest.json"
    path.write_text('{"old": true}')
    monkeypatch.setattr(storage.os, "write", _failing_write(3, errno.EIO))
    with pytest.raises(StorageError, match="input/output error"):
        write_atomic(path, '{"new": true, "padding": "' + "x" * 1000 + '"}')
    assert path.read_text() == '{"old": true}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]


def test_other_os_errors_are_not_disguised_as_storage_errors(tmp_path, monkeypatch):
    monkeypatch.setattr(storage.os, "write", _failing_write(0, errno.EBADF))
    with pytest.raises(OSError) as raised:
        write_atomic(tmp_path / "x.json", "{}")
    assert not isinstance(raised.value, StorageError) and raised.value.errno == errno.EBADF
    assert list(tmp_path.iterdir()) == []


def test_metric_tables_are_replaced_together_or_not_at_all(tmp_path, monkeypatch):
    folder = RunFolder(tmp_path)
    folder.write_metrics("a\n1\n", "b\n2\n", "c\n3\n")
    monkeypatch.setattr(storage.os, "write", _failing_write(20, errno.ENOSPC))
    with pytest.raises(StorageError):
        folder.write_metrics("a\n" + "9\n" * 5, "b\n" + "9\n" * 50, "c\n9\n")
    assert [p.read_text() for p in folder.metrics_paths] == ["a\n1\n", "b\n2\n", "c\n3\n"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in folder.metrics_paths)
