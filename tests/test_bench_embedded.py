"""B8 of the benchmark harness (issue #36): eager and lazy grammar sampling on the same prompts in one run."""

from __future__ import annotations

import pytest

from benchmarks import scenarios as sc


@pytest.mark.embedded
def test_b8_times_both_grammar_modes_on_the_same_prompts_and_leaves_the_demo_to_larger_sizes(
    embedded_model_path, tmp_path
):
    speed_row, demo_row = sc.b8_embedded(sc.TINY, tmp_path)
    figures = speed_row.figures
    assert speed_row.key == "B8" and speed_row.value == figures["speedup"] > 0
    assert speed_row.passed == (figures["speedup"] >= 2.5 and figures["same_text"] == "4/4")
    eager, lazy = figures["totals"]["eager"], figures["totals"]["lazy"]
    assert eager["calls"] == lazy["calls"] == 4 and eager["tokens"] == lazy["tokens"] > 0
    assert figures["same_text"] == "4/4"  # temperature 0: the lazy path writes the eager path's text
    assert figures["totals"]["unconstrained"]["calls"] == 4 and figures["ceiling"] > 0  # the model's own speed
    assert figures["lazy_rejections"]["resampled"] > 0  # Gemma 270M's favourite is often not JSON
    assert f"same text {figures['same_text']}" in speed_row.headline
    assert demo_row.key == "B8-demo" and demo_row.value is None and demo_row.passed is None  # not measured at --tiny
