"""The two folder owners share one base (core/owned_folder.py): paths, lock, report files, JSON index reads."""

from __future__ import annotations

import pytest

from usersimcrs.core.matrix_folder import MatrixFolder
from usersimcrs.core.owned_folder import FolderFile, OwnedFolder, read_json_object
from usersimcrs.core.run_folder import RunFolder
from usersimcrs.errors import DataError


@pytest.mark.parametrize("owner", [RunFolder, MatrixFolder])
def test_owners_share_the_base(owner, tmp_path):
    folder = owner(tmp_path)
    assert isinstance(folder, OwnedFolder)
    assert repr(folder) == f"{owner.__name__}({str(tmp_path)!r})"
    assert (folder.report_page, folder.report_dir) == (tmp_path / "report.html", tmp_path / "report")
    assert folder.lock("x").folder == tmp_path


def test_named_files_read_as_paths_below_the_folder(tmp_path):
    assert RunFolder(tmp_path).dialogues_path == tmp_path / "dialogues.jsonl"
    assert MatrixFolder(tmp_path).index_path == tmp_path / "matrix.json"
    assert isinstance(RunFolder.manifest_path, FolderFile)
    assert "ladder" in (MatrixFolder.ladder_path.__doc__ or "")


def test_json_index_reads_keep_each_owners_message(tmp_path):
    assert read_json_object(tmp_path / "absent.json", "x") is None
    assert RunFolder(tmp_path).read_manifest() == {}
    assert MatrixFolder(tmp_path).read_index() is None
    (tmp_path / "manifest.json").write_text("{", encoding="utf-8")
    (tmp_path / "matrix.json").write_text("[1]", encoding="utf-8")
    with pytest.raises(DataError, match="manifest.json: not a readable JSON manifest"):
        RunFolder(tmp_path).read_manifest()
    with pytest.raises(DataError, match="matrix.json: expected a JSON object"):
        MatrixFolder(tmp_path).read_index()
