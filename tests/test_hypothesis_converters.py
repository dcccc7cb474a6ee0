"""Hostile raw records for every dataset converter (property-based): only clear UserErrors.

Each example starts from a few real records of the dataset (../shared/data/raw) and breaks them:
a field replaced by a value of another type, a cell filled with delimiters and quotes, a file cut
mid-record, a row with fields missing. The converter must either convert (with or without
--skip-bad) or stop with one DataError line naming the file; never an unhandled exception.
"""

from __future__ import annotations

import csv
import io
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from usersimcrs.errors import UserError

base = pytest.importorskip("data_converters.base")
run = pytest.importorskip("data_converters.run")

SETTINGS = settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)

# converter -> (file to break, files passed unchanged); paths relative to ../shared/data/raw
SAMPLES = {
    "redial": ("redial/test_data_first25.jsonl", []),
    "inspired": ("inspired/dev_first10dialogs.tsv", []),
    "opendialkg": ("opendialkg/dialogstudio_original_examples.json", []),
    "iard": ("iard/umap2020_IARD_Cai_first15.json", []),
    "movielens": ("movielens/ml-20m-sample_ratings.csv", ["movielens/ml-20m-sample_movies.csv"]),
}
RECORDS_KEPT = 3

json_scalars = (
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats(allow_nan=False) | st.text(max_size=10)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
nasty_cells = st.text(max_size=12) | st.sampled_from(
    ['"', '""', "\t", ",", "\n", "nan", "{'a': ", "[1,", "@", "@123", "-1", "1e999"]
)


def _paths(value: object, prefix: tuple = ()) -> list[tuple]:
    """Every path (tuple of keys/indices) into a JSON value."""
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value[:5]):
            out += _paths(item, prefix + (index,))
    return out


def _replace(value: object, path: tuple, new: object) -> object:
    if not path:
        return new
    value[path[0]] = _replace(value[path[0]], path[1:], new)  # type: ignore[index]
    return value


@st.composite
def broken_json(draw, records: list) -> list:
    """The records with a few values swapped for values of random types."""
    records = json.loads(json.dumps(records))
    for _ in range(draw(st.integers(1, 3))):
        index = draw(st.integers(0, len(records) - 1))
        path = draw(st.sampled_from(_paths(records[index])))
        records[index] = _replace(records[index], path, draw(json_values))
    return records


@st.composite
def broken_rows(draw, rows: list[list[str]]) -> list[list[str]]:
    """The rows (header first) with cells replaced, cut or extended."""
    rows = [list(r) for r in rows]
    for _ in range(draw(st.integers(1, 3))):
        r = draw(st.integers(0, len(rows) - 1))
        kind = draw(st.sampled_from(["cell", "cut", "extra"]))
        if kind == "cell" and rows[r]:
            rows[r][draw(st.integers(0, len(rows[r]) - 1))] = draw(nasty_cells)
        elif kind == "cut":
            rows[r] = rows[r][: draw(st.integers(0, len(rows[r])))]
        else:
            rows[r].append(draw(nasty_cells))
    return rows


def _read_records(path: Path) -> tuple[str, object]:
    """('jsonl'|'json'|'csv'|'tsv', the first few records)."""
    text = path.read_text(encoding="utf-8-sig")
    if path.suffix == ".jsonl":
        return "jsonl", [json.loads(line) for line in text.splitlines()[:RECORDS_KEPT]]
    if path.suffix == ".json":
        data = json.loads(text)
        return "json", data[:RECORDS_KEPT] if isinstance(data, list) else [data]
    delimiter = "\t" if path.suffix == ".tsv" else ","
    if delimiter == "\t":
        rows = [line.split("\t") for line in text.splitlines()]
    else:
        rows = list(csv.reader(io.StringIO(text)))
    return path.suffix[1:], rows[: 1 + 12]


def _write(kind: str, records: object, path: Path) -> None:
    if kind == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")  # type: ignore[union-attr]
    elif kind == "json":
        path.write_text(json.dumps(records), encoding="utf-8")
    elif kind == "tsv":
        path.write_text("\n".join("\t".join(r) for r in records) + "\n", encoding="utf-8")  # type: ignore[union-attr]
    else:
        buffer = io.StringIO()
        csv.writer(buffer).writerows(records)  # type: ignore[arg-type]
        path.write_text(buffer.getvalue(), encoding="utf-8")


def _convert_or_user_error(name: str, inputs: list[Path], skip_bad: bool) -> None:
    with tempfile.TemporaryDirectory() as out:
        try:
            run.convert(name, inputs, Path(out) / "o", base.ConvertOptions(skip_bad=skip_bad))
        except UserError as exc:
            assert "\n" not in str(exc).strip()


def _available(name: str) -> bool:
    try:
        base.converters.get(name)
    except Exception:  # noqa: BLE001 - not written yet / optional
        return False
    return True


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_converter_on_broken_records(name, shared_data):
    if not _available(name):
        pytest.skip(f"converter {name!r} is not available")
    target, others = SAMPLES[name]
    kind, records = _read_records(shared_data / "raw" / target)
    strategy = broken_json(records) if kind in ("json", "jsonl") else broken_rows(records)

    @SETTINGS
    @given(strategy, st.booleans(), st.integers(0, 400))
    def check(broken, skip_bad, cut):
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / Path(target).name
            _write(kind, broken, path)
            inputs = [path, *(shared_data / "raw" / o for o in others)]
            _convert_or_user_error(name, inputs, skip_bad)
            data = path.read_bytes()
            path.write_bytes(data[: max(0, len(data) - cut)])  # the same file cut mid-record
            _convert_or_user_error(name, inputs, skip_bad)

    check()
