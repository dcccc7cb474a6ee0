"""HTTP body JSON: orjson for speed, the standard library's reading for what Python servers send."""

from __future__ import annotations

import json
import math

import pytest

from usersimcrs.core import wire_json


def test_round_trip_and_non_string_keys_as_json_dumps_writes_them():
    value = {"text": "Amélie (2001) – 🎬", "items": [1, 2.5, None, True], 7: "seven"}
    assert wire_json.decode(wire_json.encode(value)) == json.loads(json.dumps(value))


def test_what_python_servers_emit_beyond_strict_json_still_reads():
    flask_like = json.dumps({"score": float("nan"), "text": "\ud83c half a pair"}).encode()  # Python writes both
    decoded = wire_json.decode(flask_like)
    assert math.isnan(decoded["score"]) and decoded["text"] == "\ud83c half a pair"


@pytest.mark.parametrize("body", [b"<html>502 Bad Gateway</html>", b'{"text": "cut', b"\xff\xfe{}"])
def test_a_body_neither_reader_accepts_is_a_value_error(body):
    with pytest.raises(ValueError):
        wire_json.decode(body)
