"""Writes one conversion into its output folder, in the formats the rest of the toolkit reads.

Files: dialogues.jsonl + dialogues.dialoguekit.json (when there are dialogues), items.csv + items.yaml
(the ItemCollection.from_csv arguments), information_needs.jsonl, profiles.jsonl, ratings.csv, and
conversion_report.json. Files of these names left by an earlier conversion (or annotation) of the
folder are removed first, so the folder never mixes two conversions.

A converter may also return JSONL side files (e.g. votes.jsonl) and matrix cells: one run folder per
cell (dialogues + manifest, written through `RunFolder`) indexed by the matrix index, in the layout
`MatrixFolder` owns. Cell folders listed by an earlier conversion's index are removed first.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Sequence

import yaml

from data_converters.base import CellRun, ConversionOutput, ConversionReport
from usersimcrs.core.dialoguekit_io import write_dialoguekit
from usersimcrs.core.jsonl import write_jsonl
from usersimcrs.core.matrix_folder import MatrixFolder
from usersimcrs.core.run_folder import DIALOGUES, RunFolder

DIALOGUEKIT = "dialogues.dialoguekit.json"
ITEMS = "items.csv"
ITEMS_MAPPING = "items.yaml"
NEEDS = "information_needs.jsonl"
PROFILES = "profiles.jsonl"
RATINGS = "ratings.csv"
REPORT = "conversion_report.json"
OWN_FILES = (DIALOGUES, DIALOGUEKIT, ITEMS, ITEMS_MAPPING, NEEDS, PROFILES, RATINGS, REPORT)
DERIVED = (
    "information_needs.llm.jsonl",
    "annotation_report.dialogue-acts.json",
    "annotation_report.information-need.json",
)


def write_output(output: ConversionOutput, report: ConversionReport, out_dir: str | Path) -> Path:
    """Write every non-empty part of `output`, fill in the out-counts, and write the report last."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name in (*OWN_FILES, *DERIVED, *output.extra_files, *output.jsonl_files):
        (out / name).unlink(missing_ok=True)  # no stale file from an earlier conversion survives
    MatrixFolder(out).remove_converted_cells()
    files: list[str] = []
    if output.dialogues:
        RunFolder(out).write_dialogues(output.dialogues)
        write_dialoguekit(output.dialogues, out / DIALOGUEKIT)
        files += [DIALOGUES, DIALOGUEKIT]
        report.counts_out["dialogues"] = len(output.dialogues)
        report.counts_out["utterances"] = sum(len(d.utterances) for d in output.dialogues)
    if output.items is not None and len(output.items):
        mapping = output.items.to_csv(out / ITEMS)
        mapping["path"] = ITEMS
        (out / ITEMS_MAPPING).write_text(yaml.safe_dump(mapping, sort_keys=False, allow_unicode=True), encoding="utf-8")
        files += [ITEMS, ITEMS_MAPPING]
        report.counts_out["items"] = len(output.items)
    if output.needs:
        _write_jsonl(out / NEEDS, output.needs)
        files.append(NEEDS)
        report.counts_out["information_needs"] = len(output.needs)
    if output.profiles:
        _write_jsonl(out / PROFILES, output.profiles)
        files.append(PROFILES)
        report.counts_out["profiles"] = len(output.profiles)
    if output.ratings:
        with (out / RATINGS).open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["userId", "movieId", "rating", "timestamp"])
            for row in output.ratings:
                writer.writerow([row.user_id, row.item_id, _number(row.rating), row.timestamp])
        files.append(RATINGS)
        report.counts_out["ratings"] = len(output.ratings)
    for name, payload in output.extra_files.items():
        RunFolder(out).write_json(out / name, payload)
        files.append(name)
    for name, records in output.jsonl_files.items():
        _write_jsonl(out / name, records)
        files.append(name)
    if output.cells:
        files += _write_cells(out, output.cells, report.dataset)
        report.counts_out["cells"] = len(output.cells)
    report.files = files + [REPORT]
    (out / REPORT).write_text(report.model_dump_json(indent=1), encoding="utf-8")
    return out


def _write_cells(out: Path, cells: list[CellRun], dataset: str) -> list[str]:
    """Each cell as a run folder (dialogues + manifest) and the matrix index listing them."""
    matrix = MatrixFolder(out)
    files = []
    for cell in cells:
        folder = RunFolder(matrix.cell_dir(cell.name))
        folder.write_dialogues(cell.dialogues)
        manifest = {
            "name": cell.name,
            "status": "completed",
            "source": "convert",
            "dataset": dataset,
            "dialogues": {
                "completed": sum(d.status == "ok" for d in cell.dialogues),
                "failed": sum(d.status == "failed" for d in cell.dialogues),
            },
            **cell.manifest,
        }
        folder.write_manifest(manifest)
        files += [
            str(folder.dialogues_path.relative_to(out)),
            str(folder.manifest_path.relative_to(out)),
        ]
    matrix.write_cells_index(
        dataset,
        "convert",
        [
            {"name": c.name, "simulator": c.simulator, "crs": c.crs, "dataset": c.dataset, "status": _cell_status(c)}
            for c in cells
        ],
    )
    return files + [matrix.index_path.name]


def _cell_status(cell: CellRun) -> str:
    ok = sum(d.status == "ok" for d in cell.dialogues)
    return f"completed ({ok} ok, {len(cell.dialogues) - ok} failed)"


def _write_jsonl(path: Path, records: Sequence) -> None:
    write_jsonl(path, records)


def _number(value: float) -> str:
    return repr(float(value))
