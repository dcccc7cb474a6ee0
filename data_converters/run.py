"""Run one converter by name: read the inputs, write the output folder, return the report."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from data_converters.base import ConversionReport, ConvertOptions, converters
from data_converters.writer import write_output
from usersimcrs.errors import DataError


def convert(
    name: str, inputs: Sequence[str | Path], output_dir: str | Path, options: ConvertOptions | None = None
) -> ConversionReport:
    """Convert `inputs` with the converter registered as `name` into `output_dir`."""
    options = options or ConvertOptions()
    converter = converters.get(name)(options)
    paths = [Path(p) for p in inputs]
    for path in paths:
        if not path.is_file():
            raise DataError(f"{path}: no such file")
    report = ConversionReport(dataset=name, inputs=[str(p) for p in paths], options=options.model_dump(mode="json"))
    output = converter.convert(paths, report)
    write_output(output, report, output_dir)
    return report
