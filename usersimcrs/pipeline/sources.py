"""A path given to meta-eval or fidelity: one run folder, or a matrix (simulated or converted human corpus).

Both commands accept either; this module turns the path into a list of run folders with the CRS and
simulator each one belongs to, using the one matrix layout (`MatrixFolder`) and the one run reader.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from data_converters.base import ConversionReport
from data_converters.writer import REPORT
from usersimcrs.core.matrix_folder import MatrixFolder
from usersimcrs.core.run_folder import Duplicates, Run, RunFolder, load_run
from usersimcrs.core.shared_resources import SharedResources
from usersimcrs.errors import DataError


@dataclass
class RunSource:
    """One run folder: its label (cell name or folder name), CRS and simulator, and what it holds."""

    name: str
    crs: str | None
    simulator: str | None
    run: Run


def empty_conversion(path: Path) -> str | None:
    """The one line for a converted corpus or export that holds no conversation (a studio export before
    anyone finished a conversation); None when `path` holds no conversion report."""
    try:
        report = ConversionReport.model_validate_json((path / REPORT).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    read = sum(report.counts_in.values())
    return (
        f"{path}: no conversations exported yet ({REPORT} of '{report.dataset}': {read} records read, "
        "no conversation written); export again once conversations are finished"
    )


def load_sources(
    path: str | Path, *, dedupe: bool = False, resources: SharedResources | None = None
) -> list[RunSource]:
    """The run folders under `path`: the cells of a matrix, else the run folder itself.

    A run whose conversation IDs repeat is refused (with the count) when read, unless `dedupe`. The runs
    share `resources` (one is made when none is given): cells naming the same item file read it once.
    """
    resources = resources if resources is not None else SharedResources()
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such folder")
    duplicates: Duplicates = "first" if dedupe else "refuse"
    matrix = MatrixFolder(path)
    if matrix.is_matrix():
        sources = [
            RunSource(c.name, c.crs, c.simulator, load_run(c.run_dir, duplicates=duplicates, resources=resources))
            for c in matrix.written_cells()
        ]
    else:
        folder = RunFolder(path)
        if not folder.has_dialogues():
            raise DataError(
                empty_conversion(path)
                or f"{path}: neither a run folder ({folder.dialogues_path.name}) nor a matrix (an index or cells/)"
            )
        run = load_run(path, duplicates=duplicates, resources=resources)
        sources = [RunSource(run.name, run.crs, run.simulator, run)]
    if not dedupe:  # refused before any work, with the count
        for source in sources:
            source.run.folder.check_unique()
    return sources
