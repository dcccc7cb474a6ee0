"""Renders the figures of docs/benchmarks.md from the one committed results file, and the learned
evaluator's agreement tables of docs/meta-evaluation.md from the committed `evaluator cv` report, so
neither page quotes a number those files do not hold::

    usersimcrs bench --output benchmarks --replace-committed   # on an idle machine: the full run
    usersimcrs evaluator cv ... --output out/evaluator-cv      # the command in docs/meta-evaluation.md;
    cp out/evaluator-cv/cv_report.md benchmarks/evaluator_cv_report.md
    python -m benchmarks.docs_figures                         # rewrites the blocks between the markers
    python -m benchmarks.docs_figures --check                 # exit 1 when a page and its file disagree
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.real_workload import cpu_ceiling

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results.json"
PAGE = ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- figures:begin (python -m benchmarks.docs_figures) -->", "<!-- figures:end -->"
CV_REPORT = ROOT / "benchmarks" / "evaluator_cv_report.md"
CV_PAGE = ROOT / "docs" / "meta-evaluation.md"
CV_BEGIN = "<!-- evaluator-cv:begin (benchmarks/evaluator_cv_report.md; python -m benchmarks.docs_figures) -->"
CV_END = "<!-- evaluator-cv:end -->"
MISSING = "not in the committed results"


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return " / ".join(_fmt(v) for v in value)
    return str(value)


def _load(values: Any) -> str:
    return " / ".join(f"{v:.2f}" for v in values) if values else "not recorded"


def _speed(speed: Any) -> str:
    """The machine-speed reference of the run (benchmarks/reference.py), when the results hold one."""
    if not isinstance(speed, dict):
        return ""
    return (
        f"Machine speed ({speed.get('reference')}): {_fmt(speed.get('cpu_s_at_start'))} s at the start, "
        f"{_fmt(speed.get('cpu_s_at_end'))} s at the end. "
    )


def headline_table(scenarios: dict[str, Any]) -> list[str]:
    lines = ["| | headline | value | target | met |", "|---|---|---|---|---|"]
    for key, row in scenarios.items():
        met = {True: "yes", False: "**no**", None: "–"}[row.get("passed")]
        lines.append(f"| {key} | {row['headline']} | {_fmt(row.get('value'))} | {row['target']} | {met} |")
    return lines


def real_table(figures: dict[str, Any]) -> list[str]:
    lines = [
        "| C | conversations | LLM calls / conv. | efficiency | mean LLM call (ms) | CRS turns' ms / conv. (share of its time) "
        "| toolkit CPU ms / LLM call | / conversation "
        "| servers' CPU ms / conv. (LLM + CRS) | toolkit share of CPU "
        "| efficiency ceiling on 2 idle cores (servers' CPU alone) | load average before / after |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in ("C=128", "C=256"):
        at = figures.get(c)
        if not at:
            continue
        runs = at.get("efficiency_runs")
        eff = _fmt(at["efficiency"]) + (f" (runs {_fmt(runs)})" if runs else "")
        lines.append(
            f"| {c[2:]} | {at['conversations']} | {_fmt(at['llm_calls_per_conversation'])} | {eff} "
            f"| {_fmt(at.get('mean_call_ms'))} | {_crs_wait(at)} "
            f"| {_fmt(at['cpu_ms_per_llm_call'])} | {_fmt(at['cpu_ms_per_conversation'])} "
            f"| {_fmt(at['server_cpu_ms_per_conversation'])} | {_fmt(at['toolkit_share_of_cpu'])} "
            f"| {_ceiling(at)} | {_load(at.get('load_average_before'))} / {_load(at.get('load_average_after'))} |"
        )
    return lines


def _ceiling(at: dict[str, Any]) -> str:
    """The efficiency the CPU of the toolkit and servers allows on 2 idle cores, and the servers' alone
    (runs before it was recorded: derived from their CPU figures by the same function)."""
    if at.get("efficiency_ceiling_on_two_cores") is None:
        at = {**at, **cpu_ceiling(at["cpu_ms_per_conversation"], at.get("server_cpu_ms_per_conversation"),
                                  at["llm_calls_per_conversation"], at["ideal_calls_per_s"])}  # fmt: skip
    if at.get("efficiency_ceiling_on_two_cores") is None:
        return MISSING
    return f"{_fmt(at['efficiency_ceiling_on_two_cores'])} ({_fmt(at['servers_efficiency_ceiling_on_two_cores'])})"


def _crs_wait(at: dict[str, Any]) -> str:
    """A conversation's time in CRS turns, and its share (runs before it was recorded: not recorded)."""
    if at.get("crs_ms_per_conversation") is None:
        return "not recorded"
    return f"{_fmt(at['crs_ms_per_conversation'])} ({_fmt(at.get('crs_share_of_conversation_time'))})"


def render(results: dict[str, Any]) -> str:
    """The markdown block of docs/benchmarks.md for one results file."""
    scenarios = results["scenarios"]
    machine = results.get("machine", {})
    out = [
        f"Run `{results.get('mode')}` of {results.get('created')}: {machine.get('cpus')} CPU cores "
        f"({machine.get('processor')}), {machine.get('memory_gb')} GB, Python {machine.get('python')}, "
        f"event loop {results.get('event_loop')}; load average {_load(results.get('load_average_at_start'))} "
        f"at the start, {_load(results.get('load_average_at_end'))} at the end; {results.get('wall_s')} s. "
        + _speed(results.get("machine_speed"))
        + "Every figure below is from this one run (`benchmarks/results.json`).",
        "",
        *headline_table(scenarios),
        "",
        '**The real workload** (R rows; its definition under "Workloads"):',
        "",
    ]
    real = scenarios.get("R1", {}).get("figures")
    if real and "C=128" in real:
        workload = real.get("workload", {})
        if workload.get("fallback_catalogue"):
            out += ["**These figures used the bundled 40-movie FALLBACK, not the MovieLens sample.**", ""]
        out += real_table(real)
        items = real["C=128"].get("recommended_items", {})
        out += [
            "",
            f"Recommended items at C = 128 ({items.get('items')}): "
            + ", ".join(f"{k} {_fmt(v)}" for k, v in items.items() if k != "items")
            + " (shares, as the titles resolved against the collection).",
        ]
    else:
        out += [f"The real workload is {MISSING} (a run older than the R rows): regenerate them."]
    first = scenarios.get("R7", {}).get("figures")
    if first:
        parts = first.get("startup_parts", {})
        out += [
            "",
            "Start-up of a fresh `usersimcrs run` of the real workload (medians): "
            + ", ".join(f"{k.removesuffix('_s')} {_fmt(v)} s" for k, v in parts.items())
            + f"; first LLM call {_fmt(scenarios.get('R7-start', {}).get('value'))} s, first record "
            f"{_fmt(scenarios['R7'].get('value'))} s (six 200 ms calls before it).",
        ]
    out += ["", "**The fixed-length workload** (B1-B7, as before issue #22):", ""]
    out += _fixed_table(scenarios)
    return "\n".join(out)


def _fixed_table(scenarios: dict[str, Any]) -> list[str]:
    b1, high = scenarios.get("B1", {}).get("figures", {}), scenarios.get("B1-128", {}).get("figures", {})
    lines = [
        "| client | C | LLM calls | wall (s) | efficiency | mean call (ms) | CPU ms / LLM call | CPU ms / conversation |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for client in ("official", "lean", "aiohttp"):  # "aiohttp": the lean client of runs before issue #22
        for c, at in (b1.get(client) or {}).items():
            if c.startswith("C="):
                lines.append(
                    f"| {client} | {c[2:]} (50 ms, echo CRS) | {at['calls']} | {_fmt(at['wall_s'])} "
                    f"| {_fmt(at['efficiency'])} | {_fmt(at['mean_call_ms'])} | {_fmt(at['cpu_ms_per_call'])} | – |"
                )
        for c, at in (high.get(client) or {}).items():
            lines.append(
                f"| {client} | {c[2:]} (200 ms, keep-alive iEvaLM CRS, {at['conversations']} conv.) "
                f"| {at['llm_calls']} | {_fmt(at['wall_s'])} | {_fmt(at['efficiency'])} | {_fmt(at['mean_call_ms'])} "
                f"| {_fmt(at['cpu_ms_per_llm_call'])} | {_fmt(at['cpu_ms_per_conversation'])} |"
            )
    return lines


def rewrite(page: str, block: str, begin: str = BEGIN, end_marker: str = END) -> str:
    """`page` with the text between the markers replaced by `block`."""
    start, end = page.index(begin) + len(begin), page.index(end_marker)
    return page[:start] + "\n" + block + "\n" + page[end:]


def render_cv(report: str) -> str:
    """The block of docs/meta-evaluation.md: the `evaluator cv` report with its captions as headings."""
    return "\n".join(
        f"#### {line[2:-2]}" if line.startswith("**") and line.endswith("**") else line
        for line in report.rstrip("\n").splitlines()
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--results", default=str(RESULTS))
    parser.add_argument("--page", default=str(PAGE))
    parser.add_argument("--cv-report", default=str(CV_REPORT))
    parser.add_argument("--cv-page", default=str(CV_PAGE))
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when a page is stale")
    args = parser.parse_args(argv)
    results = json.loads(Path(args.results).read_text(encoding="utf-8"))
    cv_report = Path(args.cv_report).read_text(encoding="utf-8")
    pages = [
        (args.page, args.results, lambda page: rewrite(page, render(results))),
        (args.cv_page, args.cv_report, lambda page: rewrite(page, render_cv(cv_report), CV_BEGIN, CV_END)),
    ]
    stale = 0
    for path, source, update in pages:
        page = Path(path).read_text(encoding="utf-8")
        updated = update(page)
        if args.check:
            if updated != page:
                print(f"{path}: figures differ from {source}; run python -m benchmarks.docs_figures")
                stale += 1
            continue
        Path(path).write_text(updated, encoding="utf-8")
        print(f"wrote the figures of {path} from {source}")
    return 1 if stale else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
