"""Write the self-contained HTML report of a run folder or a matrix folder."""

from __future__ import annotations

from pathlib import Path

from usersimcrs.analysis.compare import is_matrix_dir
from usersimcrs.core.run_folder import Run
from usersimcrs.metrics.config import MetricsConfig


def report(
    folder: Run | str | Path,
    config: MetricsConfig | None = None,
    *,
    metrics: list[str] | None = None,
    seed: int = 0,
    dedupe: bool = False,
) -> Path:
    """Write report.html (+ tables and plots) for a run or a matrix; returns the page's path.

    `config` recomputes the metrics with other options; `metrics` and `seed` apply to matrices
    (which metrics to compare, seed of the resampling). A run whose conversation IDs repeat is
    refused with the count unless `dedupe` (keep the first line of each ID).
    """
    path = folder.path if isinstance(folder, Run) else Path(folder)
    if is_matrix_dir(path):
        from usersimcrs.report.matrix_report import build_matrix_report

        return build_matrix_report(path, config=config, metrics=metrics, seed=seed)
    from usersimcrs.report.run_report import build_run_report

    return build_run_report(folder if isinstance(folder, Run) else path, config, dedupe=dedupe)
