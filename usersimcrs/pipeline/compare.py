"""Compare the CRSs of a matrix: means with n and CIs, ranks (uncertain ones marked), simulator agreement, tests."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from usersimcrs.analysis.compare import Comparison
from usersimcrs.core.matrix_folder import MatrixFolder
from usersimcrs.core.shared_resources import SharedResources
from usersimcrs.report.matrix_report import run_comparison


@dataclass
class MatrixComparison:
    """The comparison tables, the per-conversation table they came from, and where they were written."""

    comparison: Comparison
    table: pd.DataFrame
    folder: Path


def compare_matrix(
    matrix_dir: str | Path,
    *,
    metrics: list[str] | None = None,
    subset: str = "all",
    resamples: int = 10000,
    seed: int = 0,
) -> MatrixComparison:
    """Rank the CRSs per simulator and metric and test their differences; tables go to the matrix's comparison folder.

    `subset` "all" (default) compares every conversation each CRS took part in; "valid" is the
    sensitivity check without the flagged ones (docs/metrics.md).
    """
    matrix = MatrixFolder(matrix_dir)
    with matrix.lock("compare"):
        comparison, table, _ = run_comparison(
            matrix_dir,
            metrics=metrics,
            subset=subset,
            n_resamples=resamples,
            seed=seed,
            resources=SharedResources(),  # cells scored here read their item file once
        )
    return MatrixComparison(comparison=comparison, table=table, folder=matrix.comparison_dir)
