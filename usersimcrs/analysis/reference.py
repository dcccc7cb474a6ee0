"""Judge scores against reference (e.g. human) ratings, per aspect or factor.

The reference CSV is long (``conversation_id,name,value`` with an optional ``rater`` column) or wide
(``conversation_id`` plus one column per aspect). Several raters are averaged for the comparison
with the judge, and their own agreement (Krippendorff's alpha, Randolph's kappa) is reported too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from usersimcrs.analysis.agreement import agreement_summary, krippendorff_alpha, randolph_kappa
from usersimcrs.analysis.anchor_judgments import read_anchor_judgments
from usersimcrs.analysis.aspect_tables import run_file_records
from usersimcrs.analysis.factors import inter_factor_matrix, mean_abs_off_diagonal
from usersimcrs.analysis.judgments import judgments_table
from usersimcrs.core.crsarena_eval import looks_like_run_file, parse_run_file
from usersimcrs.core.jsonl import iter_jsonl
from usersimcrs.errors import DataError
from usersimcrs.judges.base import JudgmentRecord


def read_reference(path: str | Path) -> pd.DataFrame:
    """Reference ratings as a long table (conversation_id, name, value, rater)."""
    path = Path(path)
    try:
        table = pd.read_csv(path, dtype={"conversation_id": str})
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise DataError(f"{path}: cannot read reference ratings ({exc})") from None
    if "conversation_id" not in table:
        raise DataError(f"{path}: missing column 'conversation_id' (header: {', '.join(map(str, table.columns))})")
    if {"name", "value"} <= set(table.columns):
        long = table
    else:
        value_columns = [c for c in table.columns if c not in ("conversation_id", "rater")]
        if not value_columns:
            raise DataError(f"{path}: expected columns name,value or one column per aspect")
        long = table.melt(
            id_vars=[c for c in ("conversation_id", "rater") if c in table],
            value_vars=value_columns,
            var_name="name",
            value_name="value",
        )
    long = long.copy()
    if "rater" not in long:
        long["rater"] = "reference"
    bad = pd.to_numeric(long["value"], errors="coerce").isna() & long["value"].notna()
    if bad.any():
        row = int(bad.idxmax()) + 2
        raise DataError(f"{path}:{row}: value {long.loc[bad.idxmax(), 'value']!r} is not a number")
    long["value"] = pd.to_numeric(long["value"], errors="coerce")
    long["name"] = long["name"].astype(str)
    return long[["conversation_id", "name", "value", "rater"]]


def read_judge_records(path: str | Path, name: str | None = None) -> list[JudgmentRecord]:
    """Judgments from our judgments.jsonl, an anchor-layout JSON file or a CRSArena-Eval run file
    (its predictions become records of judge `name`, default the file's stem)."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: file not found")
    if path.suffix == ".jsonl":
        return list(iter_jsonl(path))

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return list(iter_jsonl(path))

    if looks_like_run_file(data):
        return run_file_records(parse_run_file(data, str(path)), name or path.stem)
    return read_anchor_judgments(path)


def _categories(scale: Any) -> int | None:
    if isinstance(scale, (list, tuple)) and len(scale) == 2:
        low, high = float(scale[0]), float(scale[1])
        if high - low <= 20 and float(low).is_integer() and float(high).is_integer():
            return int(high - low + 1)
    return None


def judge_vs_reference(
    records: list[JudgmentRecord], reference: pd.DataFrame, *, judge: str | None = None
) -> pd.DataFrame:
    """One row per name (and 'total' = sum of names on fully rated conversations): every agreement statistic."""
    judged = judgments_table(records)
    if judge is not None:
        judged = judged[judged["judge"] == judge]
    if judged.empty:
        raise DataError("no judgments to compare" + (f" for judge {judge!r}" if judge else ""))
    judge_wide = judged.pivot_table(index="conversation_id", columns="name", values="value", aggfunc="mean")
    ref_wide = reference.pivot_table(index="conversation_id", columns="name", values="value", aggfunc="mean")
    names = [n for n in judge_wide.columns if n in ref_wide.columns]
    if not names:
        raise DataError(
            f"no aspect names in common: judge has {', '.join(map(str, judge_wide.columns))}; "
            f"reference has {', '.join(map(str, ref_wide.columns))}"
        )
    scales = {str(n): _categories(s) for n, s in zip(judged["name"], judged["scale"])}
    rows = []
    for name in names:
        joined = pd.concat([judge_wide[name].rename("judge"), ref_wide[name].rename("reference")], axis=1, join="inner")
        stats = agreement_summary(list(joined["judge"]), list(joined["reference"]), n_categories=scales.get(str(name)))
        stats.update(_rater_agreement(reference[reference["name"] == name], scales.get(str(name))))
        rows.append({"name": name, **stats})
    complete_j = judge_wide[names].dropna()
    complete_r = ref_wide[names].dropna()
    both = complete_j.index.intersection(complete_r.index)
    if len(names) > 1 and len(both) >= 2:
        total = agreement_summary(
            list(complete_j.loc[both].sum(axis=1)), list(complete_r.loc[both].sum(axis=1)), n_categories=None
        )
        for key in ("qwk", "cohen_kappa", "randolph_kappa", "percent_agreement", "agreement_within_1"):
            total[key] = float("nan")  # a sum of factors is not a category
        rows.append({"name": "total", **total})
    return pd.DataFrame(rows)


def _rater_agreement(part: pd.DataFrame, categories: int | None) -> dict[str, float]:
    """Agreement among the reference raters themselves (nan with a single rater)."""
    if part["rater"].nunique() < 2:
        return {
            "raters": int(part["rater"].nunique()),
            "raters_krippendorff_alpha": float("nan"),
            "raters_randolph_kappa": float("nan"),
        }
    wide = part.pivot_table(index="rater", columns="conversation_id", values="value", aggfunc="mean")
    matrix = [list(row) for row in wide.to_numpy(dtype=float)]
    k = categories or max(2, int(np.nanmax(wide.to_numpy()) - np.nanmin(wide.to_numpy()) + 1))
    return {
        "raters": int(len(wide)),
        "raters_krippendorff_alpha": krippendorff_alpha(matrix, "ordinal"),
        "raters_randolph_kappa": randolph_kappa(matrix, k),
    }


def inter_factor_comparison(
    records: list[JudgmentRecord], reference: pd.DataFrame, *, judge: str | None = None
) -> dict[str, float]:
    """Mean |Kendall tau-b| between factors, for the judge and for the reference (CoRE: LLMs ~0.28, humans ~0.22)."""
    judged = judgments_table(records)
    if judge is not None:
        judged = judged[judged["judge"] == judge]
    judge_wide = judged.pivot_table(index="conversation_id", columns="name", values="value", aggfunc="mean")
    ref_wide = reference.pivot_table(index="conversation_id", columns="name", values="value", aggfunc="mean")
    out = {}
    for label, wide in (("judge", judge_wide), ("reference", ref_wide)):
        out[f"{label}_mean_abs_tau"] = (
            mean_abs_off_diagonal(inter_factor_matrix(wide)) if wide.shape[1] >= 2 else float("nan")
        )
    return out
