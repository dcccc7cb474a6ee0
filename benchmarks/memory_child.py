"""B5's and R5's child process: run n conversations (agenda user, or the real workload against running
servers) into a folder and print peak RSS and line sizes as JSON."""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

from benchmarks.setups import agenda_config, real_workload_config
from usersimcrs.engine.runner import run


def peak_rss_kb() -> float:
    """This process's peak RSS in KiB: VmHWM where /proc has it, else ru_maxrss.

    On Linux ru_maxrss survives fork + exec, so a child started by a big harness process would
    report the harness's size, not its own; VmHWM belongs to the child's own address space.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return float(line.split()[1])
    except OSError:
        pass
    return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)  # KiB on Linux


def line_bytes(path: Path) -> dict[str, float]:
    """Bytes per line of a JSONL file (mean, max; newline included), streamed so the check adds no memory."""
    count = total = largest = 0
    with path.open("rb") as handle:
        for line in handle:
            count, total, largest = count + 1, total + len(line), max(largest, len(line))
    return {"mean": round(total / count, 1) if count else 0.0, "max": largest}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--conversations", type=int, required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument(
        "--llm-url", help="with --crs-url: the real workload against these servers (else the agenda user)"
    )
    parser.add_argument("--crs-url")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.llm_url and args.crs_url:
        config = real_workload_config(
            args.llm_url, args.crs_url, conversations=args.conversations, concurrency=args.concurrency
        )
    else:
        config = agenda_config(conversations=args.conversations, concurrency=args.concurrency)
    summary = run(config, Path(args.output), overwrite=True)
    peak_kb = peak_rss_kb()
    wall_s = time.perf_counter() - started
    out = Path(args.output)
    profiles = out / "profiles.jsonl"
    print(
        json.dumps(
            {
                "conversations": summary.completed + summary.failed,
                "peak_rss_mb": round(peak_kb / 1024, 1),
                "wall_s": round(wall_s, 2),
                "file_mb": round((out / "dialogues.jsonl").stat().st_size / 2**20, 2),
                "line_bytes": line_bytes(out / "dialogues.jsonl"),
                "profiles": {
                    "lines": sum(1 for _ in profiles.open("rb")),
                    "file_mb": round(profiles.stat().st_size / 2**20, 2),
                }
                if profiles.exists()
                else None,
            }
        )
    )


if __name__ == "__main__":
    main()
