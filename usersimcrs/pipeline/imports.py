"""Outside results into a run folder: DialogueKit JSON exports and the anchor toolkit's judge files.

The anchor (UserSimCRS v2) writes judge results as ``{agent_id: {ASPECT: [{"conversation_id",
"score", "score_explanation"}]}}`` and stores 0.0 when the judge's reply could not be parsed. On its
1-5 scale 0.0 is impossible, so such scores become missing values with status "parse_error"
(the original number is kept in `raw_value`) rather than entering averages as zeros.

Real exports repeat conversation IDs (built from second-resolution timestamps) and their judge
files may give every record one foreign ID, in dialogue order. `import_run` resolves repeated IDs
(`on_duplicate`), joins judgments by ID or, when asked, by position, refuses to drop records
silently, and writes what it did to ``import_report.json``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, Field

from usersimcrs.analysis.anchor_judgments import read_anchor_judgments
from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.dialoguekit_io import ActCounts, DialogueKitRead, read_dialoguekit_report
from usersimcrs.core.manifest import environment
from usersimcrs.core.matrix_folder import CELL_SEPARATOR, MatrixFolder, cell_name
from usersimcrs.core.run_folder import RunFolder
from usersimcrs.errors import DataError, UserError

RENAME_MARK = "~"

JoinBy = Literal["id", "position"]
OnDuplicate = Literal["rename", "skip", "fail"]


class RenamedId(BaseModel):
    """A repeated conversation ID given a suffix; `position` is the dialogue's index in the file."""

    old: str
    new: str
    position: int
    exact_duplicate: bool


class SkippedId(BaseModel):
    """A later occurrence of a repeated conversation ID left out (`--on-duplicate skip`)."""

    conversation_id: str
    position: int
    exact_duplicate: bool


class DuplicateReport(BaseModel):
    """Repeated conversation IDs: how many later occurrences, which were exact copies, what became of them."""

    mode: OnDuplicate
    repeated_ids: int = 0
    exact: int = Field(default=0, description="later occurrences identical to an earlier one with the same ID")
    differing: int = Field(default=0, description="later occurrences whose content differs")
    renamed: list[RenamedId] = Field(default_factory=list)
    skipped: list[SkippedId] = Field(default_factory=list)


class ListJoin(BaseModel):
    """How one (agent, aspect) list of a judge file was joined to the dialogues."""

    agent_id: str
    aspect: str
    records: int
    dialogues: int = Field(description="dialogues a position join would pair these records with")
    joined: int = 0
    join: Literal["id", "position", "none"] = "none"
    dropped: dict[str, int] = Field(default_factory=dict, description="reason -> records left out")


class JudgmentJoinReport(BaseModel):
    """Judgment records read from an outside judge file, and how many were joined or dropped."""

    file: str
    join_by: JoinBy
    allow_unjoined: bool = False
    records_read: int = 0
    joined: int = 0
    dropped: int = 0
    parse_failures: int = Field(default=0, description="joined records whose score was unusable (stored as missing)")
    dropped_by_reason: dict[str, int] = Field(default_factory=dict)
    unmatched_ids: list[str] = Field(default_factory=list, description="first few IDs with no dialogue")
    lists: list[ListJoin] = Field(default_factory=list)

    def problem(self) -> str:
        """One line: records read/joined/dropped and what the user can do about the dropped ones."""
        reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(self.dropped_by_reason.items()))
        line = (
            f"{self.file}: {self.records_read} judgment records read, {self.joined} joined, "
            f"{self.dropped} dropped ({reasons})"
        )
        could_position = [x for x in self.lists if x.join == "none" or x.dropped]
        if self.join_by == "id" and could_position and all(x.records == x.dialogues for x in could_position):
            hint = (
                "each list has one record per dialogue: pass --join-by position to join them in dialogue "
                "order, or --allow-unjoined to import without them"
            )
        elif self.join_by == "position" and any(x.records != x.dialogues for x in could_position):
            hint = (
                "record counts differ from the dialogue counts, so they cannot be joined by position; "
                "pass --allow-unjoined to import without them"
            )
        else:
            hint = "pass --allow-unjoined to import without them"
        return f"{line}; {hint}"


class ImportReport(BaseModel):
    """What `usersimcrs import` read, changed, left out and wrote (saved as import_report.json)."""

    dialogues_file: str
    output: str
    dialogues_read: int = 0
    dialogues_written: int = 0
    dialogues_failed: int = 0
    acts: ActCounts = Field(default_factory=ActCounts)
    repairs: dict[str, int] = Field(
        default_factory=dict,
        description="hostile values repaired on reading, by kind (lone_surrogates -> U+FFFD, "
        "non_finite_numbers -> null, too_deep -> cut)",
    )
    duplicates: DuplicateReport
    judgments: JudgmentJoinReport | None = None

    def summary(self) -> str:
        """The one line the CLI prints."""
        dup = self.duplicates
        parts = [
            (
                f"{self.output}: {self.dialogues_written} of {self.dialogues_read} dialogues imported "
                f"({self.dialogues_failed} failed)"
            ),
            f"{self.acts.dropped} of {self.acts.read} dialogue acts dropped (no intent)",
        ]
        if self.repairs:
            parts.append("repaired " + ", ".join(f"{n} {kind}" for kind, n in self.repairs.items()))
        if dup.repeated_ids:
            done = "renamed" if dup.mode == "rename" else "skipped"
            parts.append(
                f"{dup.exact + dup.differing} dialogues with a repeated ID {done} "
                f"({dup.exact} exact duplicates, {dup.differing} differing)"
            )
        else:
            parts.append("no repeated IDs")
        if self.judgments is not None:
            j = self.judgments
            joins: list[str] = sorted({x.join for x in j.lists if x.join != "none"}) or ["none"]
            parts.append(
                f"judgments: {j.records_read} read, {j.joined} joined (by {'+'.join(joins)}), {j.dropped} dropped, "
                f"{j.parse_failures} unparseable -> missing"
            )
        return "; ".join(parts)


class UnjoinedJudgments(UserError):
    """Judgment records could not be joined and the user did not allow dropping them (exit code 1)."""

    exit_code = 1

    def __init__(self, report: JudgmentJoinReport) -> None:
        super().__init__(report.problem())
        self.report = report


# ---------------------------------------------------------------- repeated IDs


class FileDialogue(NamedTuple):
    """A dialogue with its index in the file, the ID the file gave it, and whether it is kept."""

    position: int
    source_id: str
    dialogue: Dialogue
    kept: bool


Seen = dict[str, list[tuple[str, int, dict[str, Any]]]]
"""conversation ID -> its occurrences so far: (file, position, content)."""


def resolve_duplicates(
    dialogues: list[Dialogue],
    mode: OnDuplicate,
    source: str,
    *,
    seen: Seen | None = None,
    taken: set[str] | None = None,
) -> tuple[list[FileDialogue], DuplicateReport]:
    """Rename (`ID~2`, `ID~3`, ... in file order), skip or refuse later occurrences of a repeated ID.

    The first occurrence keeps its ID; a suffix already used by another dialogue is passed over.
    Renamed dialogues keep the file's ID in `metadata["source_conversation_id"]`. Several files made
    into one matrix share `seen` (an ID of an earlier file is repeated here too) and `taken` (every
    file's IDs), so conversation IDs stay unique over the whole matrix.
    """
    report = DuplicateReport(mode=mode)
    taken = taken if taken is not None else set()
    taken.update(d.conversation_id for d in dialogues)
    seen = seen if seen is not None else {}
    repeated: set[str] = set()
    out: list[FileDialogue] = []
    for position, dialogue in enumerate(dialogues):
        cid = dialogue.conversation_id
        content = dialogue.model_dump(mode="json")
        earlier = seen.setdefault(cid, [])
        if not earlier:
            earlier.append((source, position, content))
            out.append(FileDialogue(position, cid, dialogue, True))
            continue
        if mode == "fail":
            first_file, first_position, _ = earlier[0]
            first = f"[{first_position}]" if first_file == source else f"{first_file}[{first_position}]"
            raise DataError(
                f"{source}: conversation_id {cid!r} occurs more than once (dialogues {first} and "
                f"[{position}]); pass --on-duplicate rename or skip"
            )
        exact = any(content == c for _, _, c in earlier)
        report.exact += exact
        report.differing += not exact
        repeated.add(cid)
        earlier.append((source, position, content))
        if mode == "skip":
            report.skipped.append(SkippedId(conversation_id=cid, position=position, exact_duplicate=exact))
            out.append(FileDialogue(position, cid, dialogue, False))
            continue
        n = len(earlier)
        while f"{cid}{RENAME_MARK}{n}" in taken:
            n += 1
        new = f"{cid}{RENAME_MARK}{n}"
        taken.add(new)
        renamed = dialogue.model_copy(
            update={"conversation_id": new, "metadata": {**dialogue.metadata, "source_conversation_id": cid}}
        )
        report.renamed.append(RenamedId(old=cid, new=new, position=position, exact_duplicate=exact))
        out.append(FileDialogue(position, cid, renamed, True))
    report.repeated_ids = len(repeated)
    return out, report


# ---------------------------------------------------------------- joining judgments


def join_judgments(
    records: list[dict[str, Any]], entries: list[FileDialogue], *, join_by: JoinBy, source: str
) -> tuple[list[dict[str, Any]], JudgmentJoinReport]:
    """Attach judgment records to the imported dialogues, list by list; nothing is dropped silently.

    A record joins by ID (the k-th record naming an ID goes to the k-th dialogue with that ID in the
    file). A list that does not fully join by ID is paired in dialogue order when `join_by` is
    "position", its length equals the dialogue count, and no record names another dialogue's ID.
    Each joined record keeps `source_conversation_id` and says `join`: "id" or "position".
    """
    report = JudgmentJoinReport(file=source, join_by=join_by, records_read=len(records))
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for record in records:
        groups.setdefault((str(record.get("agent_id")), str(record["name"])), []).append(record)
    by_id: dict[str, list[FileDialogue]] = {}
    for entry in entries:
        by_id.setdefault(entry.source_id, []).append(entry)
    agents = {e.dialogue.agent_id for e in entries}
    joined: list[dict[str, Any]] = []
    unmatched: list[str] = []
    for (agent_id, aspect), group in groups.items():
        candidates = [e for e in entries if e.dialogue.agent_id == agent_id] if agent_id in agents else entries
        pairs, dropped = _pair_by_id(group, by_id)
        listed = ListJoin(agent_id=agent_id, aspect=aspect, records=len(group), dialogues=len(candidates))
        if dropped and join_by == "position":
            if len(group) != len(candidates):
                dropped = {"count_mismatch": len(group)}
                pairs = []
            elif any(
                r["conversation_id"] in by_id and r["conversation_id"] != e.source_id for r, e in zip(group, candidates)
            ):
                dropped = {"position_conflicts_with_id": len(group)}
                pairs = []
            else:
                pairs = [(r, e) for r, e in zip(group, candidates) if e.kept]
                dropped = {"duplicate_skipped": len(group) - len(pairs)} if len(pairs) < len(group) else {}
                listed.join = "position"
        if pairs and listed.join == "none":
            listed.join = "id"
        unmatched += [r["conversation_id"] for r in group if r["conversation_id"] not in by_id]
        listed.joined = len(pairs)
        listed.dropped = {k: v for k, v in dropped.items() if v}
        for reason, n in listed.dropped.items():
            report.dropped_by_reason[reason] = report.dropped_by_reason.get(reason, 0) + n
        for record, entry in pairs:
            joined.append(
                {
                    **record,
                    "conversation_id": entry.dialogue.conversation_id,
                    "source_conversation_id": record["conversation_id"],
                    "join": listed.join,
                }
            )
        report.lists.append(listed)
    report.joined = len(joined)
    report.dropped = report.records_read - report.joined
    report.parse_failures = sum(r["value"] is None for r in joined)
    report.unmatched_ids = sorted(set(unmatched))[:10]
    return joined, report


def _pair_by_id(
    group: list[dict[str, Any]], by_id: dict[str, list[FileDialogue]]
) -> tuple[list[tuple[dict[str, Any], FileDialogue]], dict[str, int]]:
    """The k-th record naming an ID -> the k-th dialogue the file gave that ID; the rest counted by reason."""
    seen: Counter[str] = Counter()
    pairs = []
    dropped: Counter[str] = Counter()
    for record in group:
        cid = record["conversation_id"]
        occurrences = by_id.get(cid, [])
        k = seen[cid]
        seen[cid] += 1
        if k >= len(occurrences):
            dropped["no_dialogue_with_id" if not occurrences else "more_records_than_dialogues"] += 1
        elif not occurrences[k].kept:
            dropped["duplicate_skipped"] += 1
        else:
            pairs.append((record, occurrences[k]))
    return pairs, dict(dropped)


# ---------------------------------------------------------------- the import


class PreparedImport(NamedTuple):
    """One file read, de-duplicated and joined, ready to be written as a run folder."""

    dialogues: list[Dialogue]
    judgments: list[dict[str, Any]]
    report: ImportReport


def prepare_import(
    read: DialogueKitRead,
    dialogues_file: str | Path,
    output: str | Path,
    *,
    judgments_file: str | Path | None = None,
    on_duplicate: OnDuplicate = "rename",
    join_by: JoinBy = "id",
    allow_unjoined: bool = False,
    seen: Seen | None = None,
    taken: set[str] | None = None,
) -> PreparedImport:
    """Resolve repeated IDs and join the judgments of one read file; nothing is written.

    Raises UnjoinedJudgments when records would be dropped and `allow_unjoined` is off.
    """
    entries, duplicates = resolve_duplicates(read.dialogues, on_duplicate, str(dialogues_file), seen=seen, taken=taken)
    dialogues = [e.dialogue for e in entries if e.kept]
    join_report = None
    joined: list[dict[str, Any]] = []
    if judgments_file:
        records = read_anchor_judgments(judgments_file)
        joined, join_report = join_judgments(records, entries, join_by=join_by, source=str(judgments_file))
        join_report.allow_unjoined = allow_unjoined
        if join_report.dropped and not allow_unjoined:
            raise UnjoinedJudgments(join_report)
    report = ImportReport(
        dialogues_file=str(dialogues_file),
        output=str(output),
        dialogues_read=len(read.dialogues),
        dialogues_written=len(dialogues),
        dialogues_failed=sum(d.status == "failed" for d in dialogues),
        acts=read.acts,
        repairs=read.repairs,
        duplicates=duplicates,
        judgments=join_report,
    )
    return PreparedImport(dialogues, joined, report)


def import_run(
    dialogues_file: str | Path,
    output: str | Path,
    *,
    judgments_file: str | Path | None = None,
    simulator: str | None = None,
    crs: str | None = None,
    overwrite: bool = False,
    on_duplicate: OnDuplicate = "rename",
    join_by: JoinBy = "id",
    allow_unjoined: bool = False,
) -> ImportReport:
    """Write a run folder (dialogues, judgments, manifest and the import report) under its writer lock.

    Everything is read, de-duplicated and joined before the output folder is touched, and the files
    replace the folder's only once all are written, so a refused import (UserError, UnjoinedJudgments
    when records would be dropped) or a failed one (a full disk) leaves the folder as it was.
    """
    folder = RunFolder(output)
    if folder.has_run() and not overwrite:
        raise UserError(f"{folder.path} already holds a run; pass --overwrite to replace it")
    prepared = prepare_import(
        read_dialoguekit_report(dialogues_file),
        dialogues_file,
        output,
        judgments_file=judgments_file,
        on_duplicate=on_duplicate,
        join_by=join_by,
        allow_unjoined=allow_unjoined,
    )
    with folder.lock("import"):
        if folder.has_run() and not overwrite:  # written by another command meanwhile
            raise UserError(f"{folder.path} already holds a run; pass --overwrite to replace it")
        _write_run(folder, *prepared, simulator=simulator, crs=crs)
    return prepared.report


# ---------------------------------------------------------------- many files as one matrix

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
IMPORTED = "imported"


class ImportedCell(BaseModel):
    """One imported file as a matrix cell: its axis names, where they came from, and its import report."""

    name: str
    simulator: str
    crs: str
    dataset: str
    names_from: dict[str, str] = Field(description="axis -> 'option', 'user id', 'agent id' or 'default'")
    report: ImportReport


class MatrixImportReport(BaseModel):
    """What `usersimcrs import FILE... --matrix DIR` wrote: one cell per file (each with its import_report.json)."""

    matrix: str
    cells: list[ImportedCell]

    def summary(self) -> str:
        """The CLI's lines: one per cell, then the matrix."""
        lines = [c.report.summary() for c in self.cells]
        written = sum(c.report.dialogues_written for c in self.cells)
        read = sum(c.report.dialogues_read for c in self.cells)
        failed = sum(c.report.dialogues_failed for c in self.cells)
        lines.append(
            f"{self.matrix}: {len(self.cells)} cells from {len(self.cells)} files, {written} of {read} dialogues "
            f"imported ({failed} failed); matrix.json written"
        )
        return "\n".join(lines)


def cell_part(value: str) -> str:
    """A name read from a file as a cell-name part: characters other than letters, digits, '.', '_' and
    '-' become '-', and '__' (the cell separator) becomes '_' ('IAI MovieBot' -> 'IAI-MovieBot')."""
    slug = re.sub(r"[^A-Za-z0-9_.\-]+", "-", value.strip())
    slug = re.sub(r"_{2,}", "_", slug).strip("-_.")
    return slug or IMPORTED


def _given_name(value: str, flag: str) -> str:
    if not _NAME.match(value) or CELL_SEPARATOR in value:
        raise UserError(
            f"{flag} {value!r}: use letters, digits, '.', '_' and '-' (no '__'), starting with a letter or digit"
        )
    return value


def _cell_names(
    read: DialogueKitRead, path: Path, *, simulator: str | None, crs: str | None, dataset: str | None
) -> tuple[dict[str, str], dict[str, str]]:
    """The file's cell axes (simulator, crs, dataset) and where each name came from.

    Options win; else the simulator is the user id every dialogue shares (an exporting toolkit writes its
    simulator's id there) or "imported", the CRS the agent id every dialogue shares, the dataset "imported".
    """
    names: dict[str, str] = {}
    origin: dict[str, str] = {}
    users = sorted({d.user_id for d in read.dialogues})
    agents = sorted({d.agent_id for d in read.dialogues})
    if simulator:
        names["simulator"], origin["simulator"] = _given_name(simulator, "--simulator"), "option"
    elif len(users) == 1:
        names["simulator"], origin["simulator"] = cell_part(users[0]), "user id"
    else:
        names["simulator"], origin["simulator"] = IMPORTED, "default"
    if crs:
        names["crs"], origin["crs"] = _given_name(crs, "--crs"), "option"
    elif len(agents) == 1:
        names["crs"], origin["crs"] = cell_part(agents[0]), "agent id"
    else:
        shown = ", ".join(agents[:5]) + (", ..." if len(agents) > 5 else "")
        raise UserError(f"{path}: dialogues of {len(agents)} CRSs ({shown}); pass --crs NAME or split the file")
    if dataset:
        names["dataset"], origin["dataset"] = _given_name(dataset, "--dataset"), "option"
    else:
        names["dataset"], origin["dataset"] = IMPORTED, "default"
    return names, origin


def import_matrix(
    dialogues_files: Sequence[str | Path],
    output: str | Path,
    *,
    judgments_files: Sequence[str | Path] = (),
    simulator: str | None = None,
    crs: str | None = None,
    dataset: str | None = None,
    overwrite: bool = False,
    on_duplicate: OnDuplicate = "rename",
    join_by: JoinBy = "id",
    allow_unjoined: bool = False,
) -> MatrixImportReport:
    """Import several DialogueKit exports as one matrix: one cell per file, indexed by matrix.json.

    Cell names come from the options or from each file (`_cell_names`); two files giving one cell are
    refused. A conversation ID repeated across files is handled like one repeated within a file
    (`on_duplicate`), so IDs are unique over the matrix. `judgments_files`, when given, pair with the
    files in order. Every file is read and joined before anything is written.
    """
    paths = [Path(p) for p in dialogues_files]
    if not paths:
        raise UserError("give at least one DialogueKit JSON file")
    if judgments_files and len(judgments_files) != len(paths):
        raise UserError(
            f"--judgments: give one judge file per dialogues file, in the same order "
            f"({len(paths)} dialogues files, {len(judgments_files)} judge files)"
        )
    matrix = MatrixFolder(output)
    _check_matrix_target(matrix, overwrite)
    reads = [read_dialoguekit_report(p) for p in paths]
    planned: dict[str, Path] = {}
    cells: list[tuple[dict[str, str], dict[str, str]]] = []
    for path, read in zip(paths, reads):
        names, origin = _cell_names(read, path, simulator=simulator, crs=crs, dataset=dataset)
        name = cell_name(names["simulator"], names["crs"], names["dataset"])
        if name in planned:
            how = ", ".join(f"{axis} from {source}" for axis, source in origin.items())
            raise UserError(
                f"{planned[name]} and {path} both make cell {name} ({how}); "
                "import them into separate matrices, or join them into one file"
            )
        planned[name] = path
        cells.append((names, origin))
    seen: Seen = {}
    taken = {d.conversation_id for read in reads for d in read.dialogues}
    prepared = [
        prepare_import(
            read,
            path,
            matrix.cell_dir(cell_name(names["simulator"], names["crs"], names["dataset"])),
            judgments_file=judgments_files[i] if judgments_files else None,
            on_duplicate=on_duplicate,
            join_by=join_by,
            allow_unjoined=allow_unjoined,
            seen=seen,
            taken=taken,
        )
        for i, (path, read, (names, _)) in enumerate(zip(paths, reads, cells))
    ]
    result = MatrixImportReport(
        matrix=str(output),
        cells=[
            ImportedCell(
                name=cell_name(names["simulator"], names["crs"], names["dataset"]),
                **names,
                names_from=origin,
                report=p.report,
            )
            for (names, origin), p in zip(cells, prepared)
        ],
    )
    with matrix.lock("import"):
        _check_matrix_target(matrix, overwrite)  # written by another command meanwhile
        matrix.remove_converted_cells()
        for cell, p in zip(result.cells, prepared):
            folder = RunFolder(matrix.cell_dir(cell.name))
            with folder.lock("import"):
                _write_run(folder, *p, simulator=cell.simulator, crs=cell.crs)
        matrix.write_cells_index(
            matrix.path.name,
            "import",
            [
                {
                    "name": c.name,
                    "simulator": c.simulator,
                    "crs": c.crs,
                    "dataset": c.dataset,
                    "status": f"imported ({c.report.dialogues_written - c.report.dialogues_failed} ok, "
                    f"{c.report.dialogues_failed} failed)",
                    "source_file": c.report.dialogues_file,
                }
                for c in result.cells
            ],
        )
    return result


def _check_matrix_target(matrix: MatrixFolder, overwrite: bool) -> None:
    """Refuse a folder that holds a simulated matrix, or an imported or converted one without `overwrite`."""
    if not matrix.is_matrix():
        return
    if not matrix.written_from_files():
        raise UserError(
            f"{matrix.path} holds a simulated matrix (or cells without an import index); import into another folder"
        )
    if not overwrite:
        raise UserError(f"{matrix.path} already holds a matrix; pass --overwrite to replace it")


def _write_run(
    folder: RunFolder,
    dialogues: list[Dialogue],
    judgments: list[dict[str, Any]],
    report: ImportReport,
    *,
    simulator: str | None,
    crs: str | None,
) -> None:
    agents = sorted({d.agent_id for d in dialogues})
    j = report.judgments
    manifest = {
        "name": folder.path.name,
        "status": "imported",
        "source": {
            "dialogues": report.dialogues_file,
            "judgments": j.file if j else None,
            "format": "dialoguekit",
        },
        "config": {
            "simulator": {"type": simulator or "imported"},
            "crs": {"type": crs or (agents[0] if len(agents) == 1 else "imported")},
        },
        "dialogues": {
            "completed": report.dialogues_written - report.dialogues_failed,
            "failed": report.dialogues_failed,
        },
        "judgments": {
            "records": j.joined if j else 0,
            "parse_failures": j.parse_failures if j else 0,
            "dropped": j.dropped if j else 0,
        },
        "import_report": folder.import_report_path.name,
        "environment": environment(),
    }
    # profiles carried by the file are stored once, as in a simulated run
    folder.replace_run(
        dialogues, manifest=manifest, judgments=judgments, import_report=report.model_dump_json(indent=2)
    )
