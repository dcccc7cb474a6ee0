"""The section pieces the fidelity and meta-eval reports share (report/sections.py)."""

from __future__ import annotations

import pandas as pd

from usersimcrs.analysis.left_out import LeftOut
from usersimcrs.report.html import Report
from usersimcrs.report.sections import add_interval_plot, add_left_out_notes


def test_interval_plot_only_when_there_are_rows():
    report = Report(title="t")
    rows = pd.DataFrame({"name": ["a", "b"], "score": [0.2, 0.6], "ci_low": [0.1, 0.5], "ci_high": [0.3, 0.7]})
    add_interval_plot(report, "none", rows.iloc[:0], label="name", xlabel="x", title="t", caption="c")
    add_interval_plot(report, "two", rows, label="name", value="score", xlabel="x", title="t", caption="c")
    assert list(report.plots) == ["two"] and report.plots["two"].startswith(b"\x89PNG")


def test_left_out_sentence_then_the_notes():
    report = Report(title="t")
    add_left_out_notes(report, [], ["first note"])
    left = [LeftOut(source="run", reason="failed", conversations=2, of=5)]
    add_left_out_notes(report, left)
    html = report.render()
    assert html.count('class="note"') >= 2 and "first note" in html and "2 of 5" in html
