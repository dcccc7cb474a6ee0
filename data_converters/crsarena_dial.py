"""CRSArena-Dial (Bernard and Balog, 2025): real human-CRS conversations and pairwise votes -> runs.

Inputs: the DialogueKit JSON of conversations (``agent.id`` = the CRS, ``metadata.sentiment`` =
``satisfied``/``frustrated``, the user's own label) and optionally the votes CSV
(``session_id,user_id,crs1,crs2,vote,feedback``). The corpus ships in parts (open and closed
crowdsourcing: ``crs_arena_dial_open.json``, ``crs_arena_dial_closed.json``, ``votes_open.csv``,
``votes_closed.csv``): any number of each is merged, counted per file in the report's ``parts``,
each conversation naming its file in ``metadata["part"]``. A conversation ID or a vote that occurs
again (in the same or another part) is kept once: an identical copy is dropped and counted, a
different conversation under a kept ID is a bad record. Output, besides the usual dialogues files:

- ``cells/human__<crs>__crsarena/`` one run folder per CRS plus ``matrix.json``, so the matrix tools
  (compare, report, meta-eval) read human conversations as they read simulated ones;
- the human label on each conversation as ``metadata["reference"]`` =
  ``{"satisfaction_label": "satisfied", "satisfied": 1}`` (0 for frustrated; absent when unlabelled);
- ``votes.jsonl``: one `VoteRecord` per vote with both conversation IDs (``<crs>_<user_id>``) and
  whether each is among the converted conversations; the report counts votes by how many match.
"""

from __future__ import annotations

import csv
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from data_converters.base import CellRun, ConversionOutput, ConversionReport, Converter
from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.dialoguekit_io import read_dialoguekit_report
from usersimcrs.core.votes import CSV_COLUMNS, VOTES, VoteRecord, vote_from_row
from usersimcrs.errors import DataError

SIMULATOR = "human"
DATASET = "crsarena"
LABELS = {"satisfied": 1, "frustrated": 0}
_CRS_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


def human_reference(sentiment: object) -> dict[str, object] | None:
    """The reference record for a user's own label, or None when the label is missing or unknown."""
    label = str(sentiment).strip().lower() if sentiment is not None else ""
    if label not in LABELS:
        return None
    return {"satisfaction_label": label, "satisfied": LABELS[label]}


class CRSArenaDialConverter(Converter):
    """CRS Arena conversations (+ votes) -> one run folder per CRS, human labels as references."""

    name = "crsarena-dial"
    description = "CRSArena-Dial: real users' conversations with 9 CRSs, satisfaction labels and pairwise votes"

    def convert(self, inputs: list[Path], report: ConversionReport) -> ConversionOutput:
        dialogue_files = [p for p in inputs if p.suffix.lower() == ".json"]
        vote_files = [p for p in inputs if p.suffix.lower() == ".csv"]
        other = [p for p in inputs if p not in dialogue_files and p not in vote_files]
        if not dialogue_files or other:
            raise DataError(
                "crsarena-dial: give the DialogueKit .json file(s) of conversations and any votes .csv files, e.g. "
                "crs_arena_dial_open.json crs_arena_dial_closed.json votes_open.csv votes_closed.csv "
                f"(got {', '.join(p.name for p in inputs)})"
            )
        twice = sorted(name for name, n in Counter(p.name for p in inputs).items() if n > 1)
        if twice:
            raise DataError(f"crsarena-dial: {', '.join(twice)} given more than once; give each part once")
        kept: dict[str, tuple[str, dict[str, Any]]] = {}
        dialogues = [d for path in dialogue_files for d in self._dialogues(path, report, kept)]
        output = ConversionOutput(dialogues=dialogues, cells=self._cells(dialogues))
        if vote_files:
            known = {d.conversation_id for d in dialogues}
            output.jsonl_files[VOTES] = self._votes(vote_files, known, report)
        return output

    def _dialogues(
        self, path: Path, report: ConversionReport, kept: dict[str, tuple[str, dict[str, Any]]]
    ) -> list[Dialogue]:
        """The conversations of one part; an ID already kept (here or in an earlier part) is kept once:
        an identical copy is dropped and counted, a different conversation under that ID is a bad record."""
        read = read_dialoguekit_report(path)
        part = path.name
        out: list[Dialogue] = []
        for position, dialogue in enumerate(read.dialogues):
            where = f"{path}[{position}]"
            cid = dialogue.conversation_id
            report.count_in("dialogues")
            report.count_in("utterances", len(dialogue.utterances))
            report.count_part(part, "dialogues")
            counts = {"dialogues": 1, "utterances": len(dialogue.utterances)}
            if not _CRS_NAME.match(dialogue.agent_id) or "__" in dialogue.agent_id:
                self.bad(report, where, f"agent.id {dialogue.agent_id!r} is not a usable CRS name", cid, counts)
                report.count_part(part, "dropped")
                continue
            content = dialogue.model_dump(mode="json")
            if cid in kept:
                earlier, earlier_content = kept[cid]
                if content == earlier_content:
                    report.drop(
                        where, f"repeated conversation ID {cid!r}: the same conversation as {earlier}", cid, counts
                    )
                    report.count_part(part, "repeated")
                else:
                    self.bad(
                        report,
                        where,
                        f"repeated conversation ID {cid!r}: a different conversation than {earlier}",
                        cid,
                        counts,
                    )
                    report.count_part(part, "dropped")
                continue
            kept[cid] = (where, content)
            metadata = dict(dialogue.metadata)
            reference = human_reference(metadata.get("sentiment"))
            if reference is None:
                report.warn(
                    "no_satisfaction_label",
                    f"{where}: sentiment {metadata.get('sentiment')!r} is not satisfied/frustrated; no reference",
                )
            else:
                metadata["reference"] = reference
                report.count_in(f"labelled_{reference['satisfaction_label']}")
            metadata["source"] = self.name
            metadata["part"] = part
            out.append(dialogue.model_copy(update={"metadata": metadata, "end_reason": "human"}))
            report.count_part(part, "kept")
        return out

    def _cells(self, dialogues: list[Dialogue]) -> list[CellRun]:
        by_crs: dict[str, list[Dialogue]] = defaultdict(list)
        for dialogue in dialogues:
            by_crs[dialogue.agent_id].append(dialogue)
        cells = []
        for crs in sorted(by_crs):
            part = [d.model_copy(update={"index": i}) for i, d in enumerate(by_crs[crs])]
            manifest = {"config": {"simulator": {"type": SIMULATOR}, "crs": {"type": crs}, "seed": 0}, "human": True}
            cells.append(CellRun(simulator=SIMULATOR, crs=crs, dataset=DATASET, dialogues=part, manifest=manifest))
        return cells

    def _votes(self, paths: list[Path], known: set[str], report: ConversionReport) -> list[VoteRecord]:
        """The votes of every part; a row repeated (here or in an earlier part) is kept once and counted."""
        votes: list[VoteRecord] = []
        seen: dict[tuple[str | None, ...], str] = {}
        for path in paths:
            try:
                votes += self._read_votes(path, known, report, seen)
            except UnicodeDecodeError as exc:
                raise DataError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        report.counts_out["votes"] = len(votes)
        both = report.counts_out.get("votes_both_conversations", 0)
        if len(votes) - both:
            report.written_in_part(
                "votes with both conversations",
                len(votes),
                both,
                "every vote is kept in votes.jsonl; the counts say how many of its two conversations are in the input",
                both=both,
                one=report.counts_out.get("votes_one_conversation", 0),
                none=report.counts_out.get("votes_no_conversation", 0),
            )
        return votes

    def _read_votes(
        self, path: Path, known: set[str], report: ConversionReport, seen: dict[tuple[str | None, ...], str]
    ) -> list[VoteRecord]:
        votes: list[VoteRecord] = []
        part = path.name
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in CSV_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise DataError(
                    f"{path}: missing column(s) {', '.join(missing)} (header: {','.join(reader.fieldnames or [])})"
                )
            for line, row in enumerate(reader, start=2):
                report.count_in("votes")
                report.count_part(part, "votes")
                try:
                    vote = vote_from_row(row, f"{path.name}:{line}")
                except DataError as exc:
                    self.bad(report, f"{path}:{line}", str(exc), counts={"votes": 1})
                    report.count_part(part, "dropped")
                    continue
                key = (vote.session_id, vote.user_id, vote.crs_a, vote.crs_b, vote.outcome, vote.feedback)
                if key in seen:
                    report.drop(f"{path}:{line}", f"the same vote as {seen[key]}", counts={"votes": 1})
                    report.count_part(part, "repeated")
                    continue
                seen[key] = f"{path}:{line}"
                vote.in_corpus_a = vote.conversation_a in known
                vote.in_corpus_b = vote.conversation_b in known
                matched = int(vote.in_corpus_a) + int(vote.in_corpus_b)
                key_out = {2: "votes_both_conversations", 1: "votes_one_conversation", 0: "votes_no_conversation"}[
                    matched
                ]
                kind = "votes_tie" if vote.outcome == "tie" else "votes_decisive"
                for name in (key_out, kind):
                    report.counts_out[name] = report.counts_out.get(name, 0) + 1
                votes.append(vote)
                report.count_part(part, "kept")
        return votes
