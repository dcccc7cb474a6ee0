"""Judge scores against reference (human) ratings, and a judge's stability over repeated runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from usersimcrs.analysis.factors import stability
from usersimcrs.analysis.judgments import judgments_table
from usersimcrs.analysis.reference import (
    inter_factor_comparison,
    judge_vs_reference,
    read_judge_records,
    read_reference,
)
from usersimcrs.errors import UserError
from usersimcrs.report.tables import write_table

AGREEMENT_COLUMNS = [
    "name",
    "n",
    "spearman_r",
    "kendall_tau_b",
    "qwk",
    "cohen_kappa",
    "randolph_kappa",
    "krippendorff_alpha",
    "percent_agreement",
]


@dataclass
class AgreementResult:
    """Agreement per aspect/factor (with the inter-factor comparison) and stability, with the files written."""

    agreement: pd.DataFrame | None = None
    factors: dict[str, float] = field(default_factory=dict)
    stability: pd.DataFrame | None = None
    files: list[Path] = field(default_factory=list)


def agreement(
    judgments: str | Path,
    *,
    reference: str | Path | None = None,
    repeats: list[str | Path] | None = None,
    judge: str | None = None,
    output: str | Path | None = None,
) -> AgreementResult:
    """Compare `judgments` with `reference` ratings and/or their `repeats`; tables go to `output` (default: beside them)."""
    if reference is None and not repeats:
        raise UserError("give --reference (agreement with ratings) and/or --repeat FILE (stability over judge runs)")
    records = read_judge_records(judgments)
    folder = Path(output) if output else Path(judgments).parent
    result = AgreementResult()
    if reference is not None:
        ratings = read_reference(reference)
        result.agreement = judge_vs_reference(records, ratings, judge=judge)
        result.factors = inter_factor_comparison(records, ratings, judge=judge)
        result.files += write_table(result.agreement, folder, "agreement")
    if repeats:
        runs = [records] + [read_judge_records(path) for path in repeats]
        stacked = [{**r, "repeat": i} for i, run in enumerate(runs) for r in run]
        table = judgments_table(stacked)
        if judge:
            table = table[table["judge"] == judge]
        result.stability = stability(table)
        result.files += write_table(result.stability, folder, "stability")
    return result
