"""The wheel installs cleanly: no generic top-level names (`benchmarks`, `rubrics`), the data it needs is inside."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_wheel_carries_the_bundled_data_and_no_generic_packages(tmp_path):
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if built.returncode != 0 and "Could not find a version" in built.stderr:
        pytest.skip("no package index reachable to build the wheel's build environment")
    assert built.returncode == 0, built.stderr[-2000:]
    wheel = next(tmp_path.glob("usersimcrs-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/", 1)[0] for name in names}
    assert top == {"usersimcrs", "crs_connectors", "data_converters", f"{wheel.name.split('-py')[0]}.dist-info"}
    for needed in (
        "usersimcrs/_bundled/rubrics/quality.yaml",
        "usersimcrs/_bundled/rubrics/core12.yaml",
        "usersimcrs/_bundled/configs/demo.yaml",
        "usersimcrs/_bundled/configs/data/tiny_movies.csv",
        "usersimcrs/_bundled/configs/data/tiny_ratings.csv",
        "usersimcrs/judges/rubrics.py",
    ):
        assert needed in names, needed
    assert not [n for n in names if n.endswith(".py") and n.startswith("usersimcrs/_bundled/")]


def test_bundled_folders_are_found_in_a_source_checkout():
    from usersimcrs.core.bundled import bundled_dir

    assert (bundled_dir("rubrics") / "quality.yaml").is_file()
    assert (bundled_dir("configs") / "demo.yaml").is_file()
