"""`usersimcrs quickstart [--output DIR]`: the offline demo comparison of the built-in CRSs, with its report."""

from __future__ import annotations

import argparse
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "quickstart",
        help="run the offline demo (agenda and LLM users x the three built-in CRSs) and write its report",
        description="Runs the bundled configs/demo.yaml matrix on the embedded model (no network, no API key) and "
        "writes DIR/report.html. A second call resumes and reuses what is done.",
    )
    parser.add_argument("--output", "-o", default="runs/demo", help="matrix folder (default runs/demo)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from usersimcrs.pipeline.quickstart import demo_data_files, quickstart  # lazy: keeps `usersimcrs --help` fast

    for line in data_lines(demo_data_files(args.output)):
        print(line)
    summary = quickstart(args.output, progress=not args.no_progress)
    for name, status in summary.cells.items():
        print(f"  {name}: {status}")
    report = summary.output_dir / "report.html"
    print(f"{summary.output_dir}: {len(summary.cells)} cells in {summary.wall_s:.1f}s; report: {report}")
    for name, messages in summary.gate.items():
        for message in messages:
            print(f"error: {name}: {message}", file=sys.stderr)
    failed = any(status.startswith("failed") for status in summary.cells.values())
    return 1 if failed or summary.gate else 0


def data_lines(files: dict[str, dict[str, str]]) -> list[str]:
    """One line per data file the demo uses, saying whether it is the primary file or the fallback."""
    lines = []
    for key, found in files.items():
        if found["used"] == "path":
            lines.append(f"data: {key} {found['path']} (the MovieLens-25m sample)")
        else:
            lines.append(
                f"data: {key} {found['path']} (fallback: the bundled 40-movie sample, as {found.get('missing')} "
                "does not exist; rankings on it differ from the MovieLens-25m sample's)"
            )
    return lines
