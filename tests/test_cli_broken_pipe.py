"""`usersimcrs metrics RUN | head`: a reader that closes early must not cause a BrokenPipeError traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# `metrics` stands in for any command with long output: its handler prints far more than a pipe holds
FLOODING_METRICS = """
import sys
import usersimcrs.cli.metrics as metrics
from usersimcrs.cli import main

def flood(args):
    for i in range(200_000):
        print("row", i, args.run_dir)
    return 0

metrics.handle = flood
sys.exit(main(["metrics", "RUN"]))
"""


def test_output_into_a_pipe_closed_early_exits_quietly():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", FLOODING_METRICS], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT
    )
    assert proc.stdout.readline().startswith(b"row 0")
    proc.stdout.close()  # what `head -1` does after its first line
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err
    assert proc.returncode == 141  # what a shell reports for a writer stopped by SIGPIPE (128 + 13)
