"""Report wording that read wrong: "1 CRS failures", "Holm p 0.000" (a p-value is never 0: "< 0.001"),
and per-turn curves drawn past the last turn any conversation had (a simulator's max_turns)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tests.metrics_fixtures import dialogue, ref
from usersimcrs.analysis.compare import compare
from usersimcrs.metrics.compute import compute_metrics
from usersimcrs.metrics.options import MetricOptions
from usersimcrs.report.matrix_report import ranking_table, verdict_lines
from usersimcrs.report.tables import html_table, markdown_table


def _clear_winner() -> pd.DataFrame:
    """40 paired users; one CRS succeeds for every one of them, the other for none."""
    rows = []
    for crs, value in (("good", 1.0), ("bad", 0.0)):
        for i in range(40):
            rows.append(
                {
                    "dataset": "ml",
                    "simulator": "agenda",
                    "crs": crs,
                    "conversation_id": f"{crs}-{i}",
                    "index": i,
                    "user_id": f"u{i}",
                    "valid": True,
                    "success": value,
                }
            )
    return pd.DataFrame(rows)


def test_a_tiny_p_value_reads_below_0_001_never_0_000():
    comparison = compare(_clear_winner(), ["success"], tests=("permutation",), n_resamples=5000, seed=0)
    assert comparison.significance["p_holm"].iloc[0] < 0.001
    verdict = " ".join(verdict_lines(comparison, "success", "ml", agreement=False))
    assert "Holm p < 0.001" in verdict and "0.000" not in verdict, verdict
    table = ranking_table(comparison, "success")
    assert table["vs next (Holm p)"].iloc[0] == "< 0.001 *"
    significance = comparison.significance.drop(columns=["test"])
    assert "< 0.001" in markdown_table(significance) and "&lt; 0.001" in html_table(significance)
    assert "| 0.000 |" not in markdown_table(significance[["p_value", "p_holm"]])


def test_one_crs_failure_is_singular():
    from usersimcrs.report.matrix_report import ranking_label

    assert ranking_label("llm_crs", 12, 1) == "llm_crs (n=12, 1 CRS failure)"
    assert ranking_label("llm_crs", 12, 3) == "llm_crs (n=12, 3 CRS failures)"
    assert ranking_label("popularity", 12, 0) == "popularity (n=12)"


def test_per_turn_curves_end_at_the_last_turn_a_conversation_reached():
    """A horizon of 6 for a simulator with max_turns 3: the coverage curve went flat to turn 6."""
    dialogues = [
        dialogue("a", ["1"], [[ref("5")], [ref("1")], [ref("2")]]),
        dialogue("b", ["2"], [[ref("2")]]),
    ]
    tables = compute_metrics(dialogues, MetricOptions(horizon=6, satisfaction=False))
    assert int(tables.turns["turn"].max()) == 3
    rows = tables.conversations.set_index("conversation_id")
    assert np.isclose(rows.loc["a", "pcir_avg@10"], 1 / 6)  # PC_T / T still over the configured T = 6
