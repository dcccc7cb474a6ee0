"""Convert a benchmark dataset from its original files into the toolkit's unified format."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from data_converters.base import ConversionReport, ConvertOptions
from data_converters.run import convert
from usersimcrs.core.validation import validate


def convert_dataset(dataset: str, inputs: list[str], output: str | Path, **options: Any) -> ConversionReport:
    """Run the converter registered as `dataset` on `inputs` into `output`; options are `ConvertOptions` keys
    (skip_bad, domain, seed, holdout), checked first with one-line errors named as command-line flags."""
    settings = validate(ConvertOptions, options, source=None, flags=True)
    return convert(dataset, inputs, output, settings)
