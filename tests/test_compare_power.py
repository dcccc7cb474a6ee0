"""`compare` and the matrix report: the conversations needed for 80% power per adjacent pair of CRSs."""

from __future__ import annotations

import pandas as pd

from tests.test_report_headline import _paired
from usersimcrs.analysis.compare import compare
from usersimcrs.report.matrix_report import verdict_lines


def paired(cells: dict[str, list[float]]) -> pd.DataFrame:
    """The agenda user's success per CRS, paired by conversation index (the headline tests' table)."""
    return _paired({("agenda", crs): values for crs, values in cells.items()})


def test_each_crs_and_the_next_in_the_ranking_get_a_power_figure_or_a_reason():
    comparison = compare(
        paired({"good": [1.0] * 12, "close": [1.0] * 11 + [0.0], "same": [1.0] * 11 + [0.0]}),
        ["success"],
        n_resamples=2000,
    )
    power = comparison.power
    assert list(zip(power["crs"], power["next_crs"])) == [("good", "close"), ("close", "same")]
    first, second = power.to_dict("records")
    assert first["n_pairs"] == 12 and abs(first["mean_difference"] - 1 / 12) < 1e-12
    assert first["n_for_80_power"] > 12  # one difference in 12 conversations: a study needs more
    assert pd.isna(second["n_for_80_power"]) and second["power_notes"].startswith("no difference at all")


def test_a_no_significant_verdict_says_how_many_conversations_a_difference_of_this_size_needs():
    comparison = compare(paired({"good": [1.0] * 12, "close": [1.0] * 9 + [0.0] * 3}), ["success"], n_resamples=2000)
    line = verdict_lines(comparison, "success", "ml")[0]
    needed = int(comparison.power["n_for_80_power"].iloc[0])
    assert "no difference between CRSs is significant" in line
    assert f"n = 12 per cell; about {needed} would be needed to see a difference of this size (good vs close" in line
    assert needed > 12


def test_with_significant_pairs_the_verdict_names_what_the_others_would_need():
    comparison = compare(
        paired({"good": [1.0] * 12, "close": [1.0] * 11 + [0.0], "bad": [0.0] * 12}), ["success"], n_resamples=2000
    )
    line = verdict_lines(comparison, "success", "ml")[0]
    assert "significant: " in line and "good > bad" in line
    assert "the others are not; n = 12 per cell; about" in line and "(good vs close" in line


def test_without_tests_no_power_is_computed():
    assert compare(paired({"a": [1.0] * 5, "b": [0.0] * 5}), ["success"], tests=()).power.empty
