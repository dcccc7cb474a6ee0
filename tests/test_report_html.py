"""`usersimcrs report` writes one self-contained report.html that references every plot and table."""

from __future__ import annotations

import base64
import re

from tests.metrics_fixtures import write_run
from usersimcrs.cli import main


def _check_page(page, folder):
    html = page.read_text(encoding="utf-8")
    plots = sorted((folder / "plots").glob("*.png"))
    tables = sorted((folder / "tables").glob("*.csv"))
    assert plots and tables
    for png in plots:
        assert f'data-file="plots/{png.name}"' in html, png.name
        assert base64.b64encode(png.read_bytes()).decode() in html, f"{png.name} not embedded"
        assert png.read_bytes().startswith(b"\x89PNG")
    for csv in tables:
        assert f'data-file="tables/{csv.name}"' in html, csv.name
        assert csv.with_suffix(".md").exists()
    # readable offline: nothing fetched from elsewhere
    assert not re.search(r"<script|<link|src=\"http|url\(http|@import", html)
    return html


def test_run_report_references_every_plot_and_table(tmp_path, capsys):
    run_dir = tmp_path / "run"
    write_run(run_dir)
    assert main(["metrics", str(run_dir), "--no-satisfaction"]) == 0
    assert main(["report", str(run_dir)]) == 0
    html = _check_page(run_dir / "report.html", run_dir / "report")
    names = {p.stem for p in (run_dir / "report" / "plots").glob("*.png")}
    assert {
        "pc_per_turn",
        "recall_per_turn",
        "jaccard_per_turn",
        "profile_core12",
        "profile_quality",
        "correlation_core12",
        "debate_trajectories",
    } <= names
    assert "could not be parsed" in html  # the quality judgment with value None
    tables = {p.stem for p in (run_dir / "report" / "tables").glob("*.csv")}
    assert {"metrics_summary", "item_coverage", "evaluators", "validity"} <= tables
    summary = (run_dir / "report" / "tables" / "metrics_summary.md").read_text()
    assert "all: n" in summary and "valid: n" in summary and "items unresolved" in summary


def test_matrix_report_has_agreement_and_per_crs_curves(tmp_path):
    matrix = tmp_path / "matrix"
    for sim in ("target_biased", "target_free"):
        for crs in ("popularity", "retrieval"):
            write_run(matrix / "cells" / f"{sim}__{crs}__ml", crs=crs, simulator=sim, n=5, name=f"{sim}__{crs}__ml")
    assert main(["compare", str(matrix), "--resamples", "200"]) == 0
    for name in ("means", "ranks", "agreement", "significance"):
        assert (matrix / "comparison" / f"{name}.csv").exists()
    assert main(["report", str(matrix)]) == 0
    html = _check_page(matrix / "report.html", matrix / "report")
    names = {p.stem for p in (matrix / "report" / "plots").glob("*.png")}
    # 2 CRSs and cells of n=5: an agreement figure would say nothing, so it is withheld and says why
    assert "simulator_agreement_ml" not in names
    assert "Simulator agreement" in html and "every pair is withheld" in html and "cells with n&lt;10" in html
    assert any(n.startswith("pc_per_turn_") for n in names) and any(n.startswith("recall_per_turn_") for n in names)
    assert {"profile_core12", "correlation_core12", "debate_trajectories"} <= names


def test_report_on_a_folder_without_dialogues_is_one_line(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "no dialogues.jsonl" in capsys.readouterr().err
