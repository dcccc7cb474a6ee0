"""Judgment records (judgments.jsonl) as typed `Judgment` models and as tables."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import pandas as pd

from usersimcrs.core.jsonl import iter_jsonl
from usersimcrs.core.validation import validate
from usersimcrs.errors import DataError
from usersimcrs.judges.base import Judgment, JudgmentRecord

JUDGMENT_COLUMNS = ["conversation_id", "judge", "name", "value", "scale", "status", "model", "rationale"]


def read_judgments(path: str | Path) -> list[Judgment]:
    """Every record of a judgments.jsonl file as a `Judgment` (a missing file gives an empty list).

    Imported records (e.g. the anchor's, with `raw_value`, `agent_id`, `source`) are read too; a
    record that is not a judgment at all is a DataError naming the file and line.
    """

    out = []
    for line, record in enumerate(iter_jsonl(path), start=1):
        out.append(validate(Judgment, record, source=f"{path}: record {line}", error=DataError))
    return out


def judgments_table(records: Iterable[Judgment | JudgmentRecord]) -> pd.DataFrame:
    """A table with the common columns first (value as float, None -> NaN) and a `repeat` column."""
    rows = []
    for record in records:
        row = record.model_dump() if isinstance(record, Judgment) else dict(record)
        if "repeat" not in row:  # which judge run this is, for stability over repeated runs
            metadata = row.get("metadata") or (row.get("provenance") or {}).get("metadata")
            metadata = metadata if isinstance(metadata, dict) else {}
            row["repeat"] = metadata.get("repeat", 0)
        rows.append(row)
    table = pd.DataFrame(
        rows, columns=list(dict.fromkeys([*JUDGMENT_COLUMNS, "repeat", *(k for r in rows for k in r)]))
    )
    table["value"] = pd.to_numeric(table["value"], errors="coerce")
    table["repeat"] = table["repeat"].fillna(0)
    table["conversation_id"] = table["conversation_id"].astype(str)
    extra = [c for c in table.columns if c not in JUDGMENT_COLUMNS]
    return table[JUDGMENT_COLUMNS + extra]


def wide_scores(table: pd.DataFrame, *, judge: str | None = None) -> pd.DataFrame:
    """Conversations x judgment names, averaged over repeats (missing values stay missing)."""
    data = table if judge is None else table[table["judge"] == judge]
    if data.empty:
        return pd.DataFrame()
    return data.pivot_table(index="conversation_id", columns="name", values="value", aggfunc="mean")
