"""What the two folder owners (`RunFolder`, `MatrixFolder`) share, written once: the folder's path, the
paths of its named files, its writer lock, its report page and plots, and the read of a JSON index."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, overload

from usersimcrs.core.folder_lock import FolderLock
from usersimcrs.errors import DataError

REPORT_PAGE = "report.html"
REPORT_DIR = "report"


class FolderFile:
    """A file (or folder) of an owned folder, by name: on an owner it reads as ``owner.path / name``."""

    def __init__(self, name: str, doc: str | None = None) -> None:
        self.name = name
        self.__doc__ = doc or f"The folder's `{name}`."

    @overload
    def __get__(self, owner: None, owner_type: type | None = None) -> FolderFile: ...

    @overload
    def __get__(self, owner: OwnedFolder, owner_type: type | None = None) -> Path: ...

    def __get__(self, owner: OwnedFolder | None, owner_type: type | None = None) -> Path | FolderFile:
        return self if owner is None else owner.path / self.name


class OwnedFolder:
    """A folder on disk that one class owns: every read and write of its files goes through that class.

    Writers hold `lock()` while they write; the owner's methods do not take it themselves, so one
    command can make several writes under one lock.
    """

    report_page = FolderFile(REPORT_PAGE, "The HTML report.")
    report_dir = FolderFile(REPORT_DIR, "Plots and tables of the HTML report.")

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"

    def lock(self, command: str = "") -> FolderLock:
        """The writer lock of this folder (a context manager; a second writer gets `FolderBusy`; a matrix's
        cells have their own)."""
        return FolderLock(self.path, command)


def read_json_object(path: Path, unreadable: str) -> dict[str, Any] | None:
    """The JSON object in `path` (None when the file is absent); unreadable JSON is a DataError naming the
    file and saying `unreadable`, anything but an object one saying so."""
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: {unreadable} ({exc})") from None
    if not isinstance(data, dict):
        raise DataError(f"{path}: expected a JSON object")
    return data


__all__ = ["REPORT_DIR", "REPORT_PAGE", "FolderFile", "OwnedFolder", "read_json_object"]
