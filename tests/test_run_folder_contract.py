"""One owner of the run folder: only `RunFolder` / `MatrixFolder` name the run files.

The issue's check, kept: the file names of a run or matrix folder, written as string literals,
occur in the package, the connectors and the converters only inside the two owner modules.
Every other module asks `RunFolder` / `MatrixFolder` for paths and writes through them.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("usersimcrs", "crs_connectors", "data_converters")
OWNERS = {Path("usersimcrs/core/run_folder.py"), Path("usersimcrs/core/matrix_folder.py")}
NAMES = re.compile(r"""["'](dialogues\.jsonl|manifest\.json|matrix\.json|judgments\.jsonl)["']""")


def test_only_the_run_folder_modules_name_the_run_files():
    offenders = []
    for package in SCANNED:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if relative in OWNERS:
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if NAMES.search(line):
                    offenders.append(f"{relative}:{number}: {line.strip()}")
    assert not offenders, "run-folder file names outside core/run_folder.py and core/matrix_folder.py:\n" + "\n".join(
        offenders
    )


def test_the_owners_do_name_them():
    """The check above would pass vacuously if the names moved elsewhere or were spelled differently."""
    text = "".join((ROOT / owner).read_text(encoding="utf-8") for owner in OWNERS)
    assert sorted(set(NAMES.findall(text))) == ["dialogues.jsonl", "judgments.jsonl", "manifest.json", "matrix.json"]
