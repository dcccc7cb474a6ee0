"""Run one converter by name: read the inputs, write the output folder, return the report."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from data_converters.base import ConversionOutput, ConversionReport, ConvertOptions, converters
from data_converters.writer import write_output
from usersimcrs.errors import DataError


def convert(
    name: str, inputs: Sequence[str | Path], output_dir: str | Path, options: ConvertOptions | None = None
) -> ConversionReport:
    """Convert `inputs` with the converter registered as `name` into `output_dir`."""
    output, report = read_dataset(name, inputs, options)
    write_output(output, report, output_dir)
    return report


def read_dataset(
    name: str, inputs: Sequence[str | Path], options: ConvertOptions | None = None
) -> tuple[ConversionOutput, ConversionReport]:
    """Read `inputs` with the converter registered as `name`, in memory (nothing written)."""
    options = options or ConvertOptions()
    converter = converters.get(name)(options)
    paths = [Path(p) for p in inputs]
    for path in paths:
        if not path.is_file():
            raise DataError(f"{path}: no such file")
    report = ConversionReport(dataset=name, inputs=[str(p) for p in paths], options=options.model_dump(mode="json"))
    return converter.convert(paths, report), report
