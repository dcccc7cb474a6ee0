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

from collections import Counter
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, Field

from usersimcrs.analysis.anchor_judgments import read_anchor_judgments
from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.dialoguekit_io import ActCounts, read_dialoguekit_report
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


def resolve_duplicates(
    dialogues: list[Dialogue], mode: OnDuplicate, source: str
) -> tuple[list[FileDialogue], DuplicateReport]:
    """Rename (`ID~2`, `ID~3`, ... in file order), skip or refuse later occurrences of a repeated ID.

    The first occurrence keeps its ID; a suffix already used by another dialogue is passed over.
    Renamed dialogues keep the file's ID in `metadata["source_conversation_id"]`.
    """
    report = DuplicateReport(mode=mode)
    taken = {d.conversation_id for d in dialogues}
    seen: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    out: list[FileDialogue] = []
    for position, dialogue in enumerate(dialogues):
        cid = dialogue.conversation_id
        content = dialogue.model_dump(mode="json")
        earlier = seen.setdefault(cid, [])
        if not earlier:
            earlier.append((position, content))
            out.append(FileDialogue(position, cid, dialogue, True))
            continue
        if mode == "fail":
            raise DataError(
                f"{source}: conversation_id {cid!r} occurs more than once (dialogues [{earlier[0][0]}] and "
                f"[{position}]); pass --on-duplicate rename or skip"
            )
        exact = any(content == c for _, c in earlier)
        report.exact += exact
        report.differing += not exact
        earlier.append((position, content))
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
    report.repeated_ids = sum(len(v) > 1 for v in seen.values())
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
    read = read_dialoguekit_report(dialogues_file)
    entries, duplicates = resolve_duplicates(read.dialogues, on_duplicate, str(dialogues_file))
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
    with folder.lock("import"):
        if folder.has_run() and not overwrite:  # written by another command meanwhile
            raise UserError(f"{folder.path} already holds a run; pass --overwrite to replace it")
        _write_run(folder, dialogues, joined, report, simulator=simulator, crs=crs)
    return report


def _write_run(
    folder: RunFolder,
    dialogues: list[Dialogue],
    judgments: list[dict[str, Any]],
    report: ImportReport,
    *,
    simulator: str | None,
    crs: str | None,
) -> None:
    from usersimcrs.core.manifest import environment

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
