"""One handler for a record a reader cannot read (data_converters/base.py `Converter.bad_counted`)."""

from __future__ import annotations

import pytest

from data_converters.base import ConversionReport, ConvertOptions
from data_converters.inspired import InspiredConverter
from data_converters.redial import ReDialConverter
from usersimcrs.errors import DataError


@pytest.mark.parametrize("converter", [InspiredConverter, ReDialConverter])
def test_a_bad_record_is_counted_in_and_dropped_or_refused(converter):
    report = ConversionReport(dataset="x")
    on_bad = converter(ConvertOptions(skip_bad=True)).bad_counted(report, "dialogues")
    on_bad("f.jsonl:3", "not JSON")
    assert report.counts_in == {"dialogues": 1} and report.counts_dropped == {"dialogues": 1}
    assert report.dropped[0].where == "f.jsonl:3"
    with pytest.raises(DataError, match="f.jsonl:4: not JSON"):
        converter().bad_counted(ConversionReport(dataset="x"), "dialogues")("f.jsonl:4", "not JSON")
