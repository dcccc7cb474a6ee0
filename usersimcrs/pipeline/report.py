"""Write the self-contained HTML report of a run folder or a matrix folder."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from usersimcrs.analysis.compare import is_matrix_dir
from usersimcrs.core.run_folder import Run
from usersimcrs.metrics.config import MetricsConfig

if TYPE_CHECKING:  # pragma: no cover - the report layer is imported only when a report is written
    from usersimcrs.report.evaluators import HumanAgreement


def report(
    folder: Run | str | Path,
    config: MetricsConfig | None = None,
    *,
    metrics: list[str] | None = None,
    seed: int = 0,
    dedupe: bool = False,
    human_agreement: Mapping[str, Sequence[HumanAgreement]] | None = None,
    learned_model: str | Path | None = None,
) -> Path:
    """Write report.html (+ tables and plots) for a run or a matrix; returns the page's path.

    `config` recomputes the metrics with other options; `metrics` and `seed` apply to matrices
    (which metrics to compare, seed of the resampling). A run whose conversation IDs repeat is
    refused with the count unless `dedupe` (keep the first line of each ID). `human_agreement` maps
    an evaluator (a metric or '<judge>:<name>') to its measured agreement with human judgments (the
    meta-evaluation's figures), shown beside its scores; without it the figures measured in this
    project are shown and every other evaluator reads "not measured". `learned_model`: a learned
    evaluator's model file; the report then shows each CRS's predicted dialogue_overall beside its success,
    with the model's agreement on CRSs it never saw.
    """
    path = folder.path if isinstance(folder, Run) else Path(folder)
    if is_matrix_dir(path):
        # lazy: matplotlib only when a report is written
        from usersimcrs.report.matrix_report import build_matrix_report

        return build_matrix_report(
            path,
            config=config,
            metrics=metrics,
            seed=seed,
            human_agreement=human_agreement,
            learned_model=learned_model,
        )
    from usersimcrs.report.run_report import build_run_report  # lazy: matplotlib only when a report is written

    return build_run_report(
        folder if isinstance(folder, Run) else path,
        config,
        dedupe=dedupe,
        human_agreement=human_agreement,
        learned_model=learned_model,
    )
