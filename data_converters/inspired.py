"""INSPIRED (Hayati et al., 2020): 19-column TSV, one row per utterance -> unified dialogues.

Quirks handled: the TSV is read with quoting off (a `"` is text); `*_dict` columns are Python
literals read with `ast.literal_eval`, and a literal with a missing quote is repaired by a tolerant
pattern (reported); the string `nan` means "no value"; the same speaker often sends several rows in
a row, and each row stays its own utterance; the authors wrote `QUOTATION_MARK` for `"` in the
text. Sociable strategies stay as annotations on recommender turns. The outcome comes from the
dialogue-level labels (coarse `accept_*`/`reject_*`, fine label kept); the accepted movie is taken
from the seeker's "accept" turn (the movie the recommender named last before it), else from the
recommender's last mention of a trailer, else the recommender's last-named movie.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from data_converters.base import ConversionOutput, ConversionReport, Converter, NeedRecord
from data_converters.metadata import clean_title, enrich_items, read_movielens_items
from data_converters.readers import clean, header_of, iter_tsv_rows
from usersimcrs.core.dialogue import AGENT, USER, Annotation, Dialogue, ItemRef, Utterance
from usersimcrs.core.items import Item, ItemCollection, split_year
from usersimcrs.core.profile import InformationNeed
from usersimcrs.errors import DataError

REQUIRED = ["dialog_id", "utt_id", "speaker", "text"]
DICT_COLUMNS = ["movie_dict", "genre_dict", "actor_dict", "director_dict", "others_dict"]
LIST_COLUMNS = {"movies": "movies", "genres": "genres", "people_names": "people"}
STRATEGY_COLUMNS = {"expert_label": "strategy", "first_label": "strategy", "second_label": "second_strategy"}
SPEAKERS = {"RECOMMENDER": AGENT, "SEEKER": USER}
_DICT_ENTRY = re.compile(r"""(?:^|,)\s*(['"])(.*?)\1?\s*:\s*(-?\d+)\s*(?=,|$)""")
_ACCEPT = re.compile(r"\baccept", re.I)
_TRAILER = re.compile(r"\btrailer", re.I)


def parse_dict_literal(raw: str | None, report: ConversionReport, where: str) -> dict[str, int]:
    """A `{'Title (Year)': 0, ...}` cell -> dict; a literal with a broken quote is repaired by pattern."""
    value = clean(raw)
    if value is None:
        return {}
    try:
        parsed = ast.literal_eval(value)
        if isinstance(parsed, dict):
            return {str(k): v for k, v in parsed.items()}
    except (ValueError, SyntaxError):
        pass
    inner = value.strip().removeprefix("{").removesuffix("}")
    repaired = {m.group(2): int(m.group(3)) for m in _DICT_ENTRY.finditer(inner)}
    report.warn("dict_literal_repaired", f"{where}: {value[:120]!r} -> {len(repaired)} entries")
    return repaired


def split_list(raw: str | None) -> list[str]:
    """`"Braveheart (1995);  Saving Private Ryan (1998)"` -> two cleaned titles."""
    value = clean(raw)
    return [clean_title(v) for v in value.split(";") if v.strip()] if value else []


def majority(values: Sequence[str | None]) -> str | None:
    """The most common non-empty value (first seen wins ties)."""
    counts = Counter(v for v in values if v)
    return counts.most_common(1)[0][0] if counts else None


def restore_quotes(text: str) -> str:
    return text.replace("QUOTATION_MARK", '"')


class InspiredConverter(Converter):
    """INSPIRED dialog TSV files (+ optional survey id list, + optional MovieLens movies.csv)."""

    name = "inspired"
    description = "INSPIRED dialog_data/*.tsv (19 columns), optional MovieLens movies.csv"

    def convert(self, inputs: list[Path], report: ConversionReport) -> ConversionOutput:
        dialogue_files, survey_files, metadata_files = [], [], []
        for path in inputs:
            header = header_of(path, "\t")
            if "utt_id" in header or "speaker" in header:
                dialogue_files.append(path)
            elif "rec_survey_id" in header:
                survey_files.append(path)
            elif "movieId" in header_of(path):
                metadata_files.append(path)
            else:
                raise DataError(f"{path}: not an INSPIRED file (expected a dialog TSV with {', '.join(REQUIRED)})")
        if not dialogue_files:
            raise DataError("inspired: no dialog TSV among the inputs")
        surveys = self._surveys(survey_files, report)
        groups: dict[str, list[tuple[str, dict[str, str]]]] = {}
        last_id: str | None = None
        for path in dialogue_files:
            header = header_of(path, "\t")
            for column in DICT_COLUMNS + ["fine_label", "coarse_label", "movie_id"]:
                if column not in header:
                    report.warn("optional_column_missing", f"{path}: no column {column!r}")
            for line, row in iter_tsv_rows(path, REQUIRED, self.bad_counted(report, "utterances")):
                report.count_in("utterances")
                did = row["dialog_id"].strip()
                if did in groups and did != last_id:
                    report.warn("dialogue_rows_not_contiguous", f"{path}:{line}: {did}")
                groups.setdefault(did, []).append((f"{path}:{line}", row))
                last_id = did
        report.count_in("dialogues", len(groups))
        items = ItemCollection()
        output = ConversionOutput(items=items)
        for did, rows in groups.items():
            try:
                dialogue, need = self._dialogue(did, rows, report)
            except ValueError as exc:
                self.bad(report, rows[0][0], str(exc), record_id=did, counts={"dialogues": 1, "utterances": len(rows)})
                continue
            if did in surveys:
                dialogue.metadata["survey"] = surveys[did]
            for title in dialogue.metadata["movie_titles"]:
                if title not in items:
                    items.add(Item(id=title, title=title, year=split_year(title)[1]))
            output.dialogues.append(dialogue)
            output.needs.append(need)
        for path in metadata_files:
            enrich_items(items, read_movielens_items(path, lambda w, r: self.bad(report, w, r)), report, str(path))
        return output

    def _surveys(self, paths: list[Path], report: ConversionReport) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for path in paths:
            for _, row in iter_tsv_rows(path, ["dialog_id"], lambda w, r: self.bad(report, w, r)):
                out[row["dialog_id"].strip()] = {k: clean(v) for k, v in row.items() if k != "dialog_id"}
        return out

    def _dialogue(
        self, did: str, rows: list[tuple[str, dict[str, str]]], report: ConversionReport
    ) -> tuple[Dialogue, NeedRecord]:
        dialogue = Dialogue(conversation_id=did, user_id="SEEKER", agent_id="RECOMMENDER")
        dicts: dict[str, list[str]] = {c: [] for c in DICT_COLUMNS}
        labels: dict[str, list[str | None]] = {"fine_label": [], "coarse_label": [], "movie_id": []}
        for where, row in rows:
            speaker = row["speaker"].strip().upper()
            if speaker not in SPEAKERS:
                raise ValueError(f"speaker must be RECOMMENDER or SEEKER, got {row['speaker']!r}")
            for column in dicts:
                if clean(row.get(column)):
                    dicts[column].append(row[column])
            for column in labels:
                value = clean(row.get(column))
                if row.get(column, "").strip() == "nan":
                    report.warn("nan_value", f"{where}: column {column!r} is the string 'nan'")
                labels[column].append(value)
            annotations = []
            for column, key in LIST_COLUMNS.items():
                values = split_list(row.get(column))
                if values:
                    annotations.append(Annotation(key=key, value=values))
            for column, key in STRATEGY_COLUMNS.items():
                value = clean(row.get(column))
                if value:
                    annotations.append(Annotation(key=key, value=value))
            text = row["text"]
            utterance = Utterance(
                participant=SPEAKERS[speaker],
                text=restore_quotes(text),
                utterance_id=f"{did}:{clean(row['utt_id']) or len(dialogue.utterances) + 1}",
                annotations=annotations,
                metadata={
                    "turn_id": clean(row.get("turn_id")),
                    "text_with_placeholder": clean(row.get("text_with_placeholder")),
                    **({"raw_text": text} if "QUOTATION_MARK" in text else {}),
                },
            )
            if utterance.participant == AGENT:
                utterance.items = [ItemRef(id=t, title=t) for t in split_list(row.get("movies"))]
            dialogue.add(utterance)
        parsed = {
            column: parse_dict_literal(majority(values), report, f"{rows[0][0]}: column {column!r}")
            for column, values in dicts.items()
        }
        fine, coarse, trailer = (majority(labels[c]) for c in ("fine_label", "coarse_label", "movie_id"))
        for column, given in labels.items():
            distinct = sorted({v for v in given if v})
            if len(distinct) > 1:
                report.warn("labels_disagree", f"{did}: column {column!r} has {distinct}")
        if coarse is None and fine is None:
            report.warn("no_outcome", f"{did}: no accept/reject label")
        accepted = (coarse or fine or "").startswith("accept") if (coarse or fine) else None
        recommended = accepted_movies(dialogue)
        titles = list(
            dict.fromkeys(
                [*parsed["movie_dict"], *(t for u in dialogue.utterances for t in u.annotation("movies", []))]
            )
        )
        dialogue.metadata = {
            "dataset": "inspired",
            "source": rows[0][0],
            "recommendation_outcome": fine,
            "outcome_coarse": coarse,
            "accepted": accepted,
            "trailer_id": trailer,
            "recommended_movies": recommended,
            "movie_titles": titles,
            **parsed,
        }
        targets = [ItemRef(id=t, title=t) for t in recommended] if accepted else []
        need = InformationNeed(constraints=seeker_constraints(dialogue, parsed), targets=targets)
        return dialogue, NeedRecord(conversation_id=did, need=need)


def accepted_movies(dialogue: Dialogue) -> list[str]:
    """The recommended movie(s): named by the recommender before each seeker "accept" turn.

    Fallbacks, in order: the recommender's movie named last before (or in) its last turn that
    mentions a trailer, then the recommender's last-named movie. INSPIRED stores only the trailer's
    YouTube ID, not the title, so this is a documented heuristic.
    """
    accepted: list[str] = []
    last_named: str | None = None
    trailer_pick: str | None = None
    for utt in dialogue.utterances:
        movies = utt.annotation("movies", [])
        if utt.participant == AGENT:
            if movies:
                last_named = movies[-1]
            if last_named and _TRAILER.search(utt.text):
                trailer_pick = last_named
        elif _ACCEPT.search(utt.text) and last_named and last_named not in accepted:
            accepted.append(last_named)
    if accepted:
        return accepted
    if trailer_pick:
        return [trailer_pick]
    return [last_named] if last_named else []


def seeker_constraints(dialogue: Dialogue, parsed: dict[str, dict[str, int]]) -> dict[str, str]:
    """Constraints from what the seeker said: first genre, first actor, first director it named."""
    constraints: dict[str, str] = {}
    actors, directors = set(parsed["actor_dict"]), set(parsed["director_dict"])
    for utt in dialogue.user_turns:
        for genre in utt.annotation("genres", []):
            constraints.setdefault("genres", genre)
        for person in utt.annotation("people", []):
            if person in actors:
                constraints.setdefault("actors", person)
            elif person in directors:
                constraints.setdefault("directors", person)
    return constraints
