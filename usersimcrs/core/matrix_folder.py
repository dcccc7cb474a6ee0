"""The matrix folder's one owner: `MatrixFolder` knows the cell layout and reads and writes `matrix.json`.

A simulator x CRS x dataset matrix (simulated by `usersimcrs matrix`, or converted from a human
corpus by `usersimcrs convert`) is a folder holding one ordinary run folder per cell under
``cells/<simulator>__<crs>__<dataset>/`` and an index ``matrix.json`` (names, axes, folders,
statuses). The engine, the converters and the analysis find cells only through this class.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from usersimcrs.core.owned_folder import FolderFile, OwnedFolder, read_json_object
from usersimcrs.core.run_folder import RunFolder
from usersimcrs.core.storage import write_atomic
from usersimcrs.errors import DataError

INDEX = "matrix.json"
CELLS_DIR = "cells"
LLM_CACHE_DIR = "llm_cache"
COMPARISON_DIR = "comparison"
LADDER = "ladder.json"
CELL_SEPARATOR = "__"
FILE_SOURCES = ("convert", "import")  # matrices written in one go from files: a rewrite replaces their cells


@dataclass
class Cell:
    """One simulator x CRS x dataset run folder of a matrix."""

    name: str
    simulator: str
    crs: str
    dataset: str
    run_dir: Path

    @property
    def folder(self) -> RunFolder:
        return RunFolder(self.run_dir)


def cell_name(simulator: str, crs: str, dataset: str) -> str:
    """The folder name of a cell."""
    return CELL_SEPARATOR.join((simulator, crs, dataset))


class MatrixFolder(OwnedFolder):
    """A matrix folder on disk: its cells, its index and the files its report and comparison write."""

    index_path = FolderFile(INDEX)
    cells_dir = FolderFile(CELLS_DIR)
    llm_cache_dir = FolderFile(LLM_CACHE_DIR, "The LLM response cache the cells of a simulated matrix share.")
    comparison_dir = FolderFile(COMPARISON_DIR)
    ladder_path = FolderFile(LADDER, "The figures of a sensitivity ladder (`usersimcrs ladder`), beside its cells.")

    def cell_dir(self, name: str) -> Path:
        """The run folder of the cell `name`."""
        return self.cells_dir / name

    def cell_entry(self, name: str) -> str:
        """The cell's folder as the index records it (relative to the matrix folder)."""
        return f"{CELLS_DIR}/{name}"

    def is_matrix(self) -> bool:
        """True when the folder has an index or a cells/ folder."""
        return self.index_path.exists() or self.cells_dir.is_dir()

    def read_index(self) -> dict[str, Any] | None:
        """matrix.json as a mapping (None when absent); bad JSON is a DataError naming the file."""
        return read_json_object(self.index_path, "not valid JSON")

    def write_index(self, index: dict[str, Any]) -> Path:
        """Replace matrix.json atomically."""
        return write_atomic(self.index_path, json.dumps(index, indent=2, ensure_ascii=False))

    def write_cells_index(self, name: str, source: str, cells: Sequence[Mapping[str, Any]]) -> Path:
        """matrix.json for cells written in one go from files (`source`: convert, import); the axes are the
        cells' names. Each cell maps name, simulator, crs, dataset, status (and any extra facts)."""
        index = {
            "name": name,
            "source": source,
            "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "axes": {
                "simulators": sorted({str(c["simulator"]) for c in cells}),
                "crs": sorted({str(c["crs"]) for c in cells}),
                "datasets": sorted({str(c["dataset"]) for c in cells}),
            },
            "cells": [{**cell, "run_dir": self.cell_entry(str(cell["name"]))} for cell in cells],
        }
        return self.write_index(index)

    def written_from_files(self) -> bool:
        """True when the index says a converter or an import wrote the matrix (not a simulation)."""
        try:
            data = self.read_index()
        except DataError:
            return False
        return data is not None and data.get("source") in FILE_SOURCES

    def cells(self) -> list[Cell]:
        """Every cell the index lists (else every ``cells/<sim>__<crs>__<dataset>/`` folder), written or not."""
        data = self.read_index()
        cells: list[Cell] = []
        if data is not None:
            for entry in data.get("cells", []):
                run_dir = self.path / entry.get("run_dir", self.cell_entry(entry["name"]))
                cells.append(Cell(entry["name"], entry["simulator"], entry["crs"], entry["dataset"], run_dir))
        elif self.cells_dir.is_dir():
            for folder in sorted(self.cells_dir.iterdir()):
                parts = folder.name.split(CELL_SEPARATOR)
                if folder.is_dir() and len(parts) == 3:
                    cells.append(Cell(folder.name, parts[0], parts[1], parts[2], folder))
        return cells

    def written_cells(self) -> list[Cell]:
        """The cells whose run folder holds dialogues; none at all is a DataError naming the layout."""
        cells = self.cells()
        if not cells:
            raise DataError(
                f"{self.path}: no cells found (expected {INDEX} or {CELLS_DIR}/<simulator>__<crs>__<dataset>/)"
            )
        return [c for c in cells if c.folder.has_dialogues()]

    def remove_converted_cells(self) -> None:
        """Remove the cell folders and the index an earlier conversion or import wrote (never a simulated matrix's)."""
        if not self.written_from_files():
            return
        data = self.read_index() or {}
        for entry in data.get("cells", []):
            name = str(entry.get("name", ""))
            folder = self.cell_dir(name)
            if name and "/" not in name and ".." not in name and folder.is_dir():
                shutil.rmtree(folder)
        self.index_path.unlink()


__all__ = ["CELLS_DIR", "INDEX", "Cell", "MatrixFolder", "cell_name"]
