"""Hostile input for the core readers (property-based): only DataError, never a traceback.

Covers the DialogueKit JSON reader and the JSON Lines reader: random bytes, random JSON, and
dialogue-shaped JSON with wrong types in every field; plus round trips of valid dialogues and the
torn-tail rule of the JSONL reader.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from usersimcrs.core.dialogue import Dialogue, DialogueAct, ItemRef, SlotValue, Utterance
from usersimcrs.core.dialoguekit_io import dialogue_from_dialoguekit, read_dialoguekit, write_dialoguekit
from usersimcrs.core.jsonl import JsonlWriter, iter_jsonl, read_models
from usersimcrs.errors import DataError

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# non-finite floats are repaired to null on write (docs/reliability.md), so they cannot round-trip
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=16,
)

UTTERANCE_KEYS = [
    "participant",
    "utterance",
    "text",
    "utterance_id",
    "utterance ID",
    "dialogue_acts",
    "annotations",
    "utterance_feedback",
    "feedback",
    "items",
    "latency_s",
    "metadata",
    "extra",
]
slot_like = st.lists(json_values, max_size=5) | st.dictionaries(
    st.sampled_from(["slot", "value", "start", "end"]), json_values
)
act_like = st.dictionaries(
    st.sampled_from(["intent", "slot_values", "slots"]), json_values | st.lists(slot_like, max_size=3)
)
field_value = {
    "participant": st.sampled_from(["USER", "AGENT", "user", "agent", "bot"]) | json_values,
    "dialogue_acts": st.lists(act_like | json_values, max_size=3) | json_values,
    "annotations": st.lists(
        st.lists(json_values, max_size=3) | st.dictionaries(st.sampled_from(["key", "value"]), json_values), max_size=3
    )
    | json_values,
    "items": st.lists(
        st.dictionaries(st.sampled_from(["id", "title", "score", "raw", "other"]), json_values) | json_values,
        max_size=3,
    )
    | json_values,
}
utterance_like = st.fixed_dictionaries(
    {},
    optional={key: field_value.get(key, json_values) for key in UTTERANCE_KEYS},
)
run_fields = st.dictionaries(
    st.sampled_from(["status", "error", "end_reason", "index", "seed", "profile", "timings"]), json_values, max_size=7
)
dialogue_like = st.fixed_dictionaries(
    {},
    optional={
        "conversation_id": json_values,
        "conversation ID": json_values,
        "agent": json_values | st.dictionaries(st.sampled_from(["id", "type"]), json_values),
        "user": json_values | st.dictionaries(st.sampled_from(["id", "type"]), json_values),
        "metadata": json_values | st.fixed_dictionaries({"usersimcrs": run_fields | json_values}),
        "conversation": st.lists(utterance_like | json_values, max_size=4) | json_values,
    },
)


def _write(data: bytes) -> Path:
    handle = tempfile.NamedTemporaryFile(delete=False, suffix=".json")
    handle.write(data)
    handle.close()
    return Path(handle.name)


def _read_only_data_errors(path: Path) -> list[Dialogue] | None:
    try:
        return read_dialoguekit(path)
    except DataError as exc:
        assert str(path) in str(exc) and "\n" not in str(exc)
        return None
    finally:
        path.unlink()


@SETTINGS
@given(st.binary(max_size=200))
def test_dialoguekit_reader_on_random_bytes(data):
    _read_only_data_errors(_write(data))


@SETTINGS
@given(json_values)
def test_dialoguekit_reader_on_random_json(value):
    _read_only_data_errors(_write(json.dumps(value).encode()))


@SETTINGS
@given(st.lists(dialogue_like, min_size=1, max_size=3))
def test_dialoguekit_reader_on_dialogue_shaped_json(value):
    dialogues = _read_only_data_errors(_write(json.dumps(value).encode()))
    if dialogues is not None:
        assert len(dialogues) == len(value)
        for dialogue, raw in zip(dialogues, value):
            assert dialogue.conversation_id == str(raw.get("conversation_id", raw.get("conversation ID")))
            assert len(dialogue.utterances) == len(raw["conversation"])


texts = st.text(min_size=0, max_size=30)
slot_values = st.builds(SlotValue, slot=st.text(min_size=1, max_size=8), value=st.none() | texts)
acts = st.builds(
    DialogueAct,
    intent=st.text(min_size=1, max_size=10).filter(str.strip),
    slot_values=st.lists(slot_values, max_size=3),
)
item_refs = st.builds(ItemRef, id=st.none() | st.text(max_size=6), title=st.none() | texts)
utterances = st.builds(
    Utterance,
    participant=st.sampled_from(["USER", "AGENT"]),
    text=texts,
    dialogue_acts=st.lists(acts, max_size=2),
    items=st.lists(item_refs, max_size=3),
    metadata=st.dictionaries(
        st.text(min_size=1, max_size=6).filter(lambda k: k != "usersimcrs"), json_scalars, max_size=2
    ),
)
dialogues = st.builds(
    Dialogue,
    conversation_id=st.text(min_size=1, max_size=20),
    utterances=st.lists(utterances, max_size=5),
    status=st.sampled_from(["ok", "failed"]),
    error=st.none() | texts,
    end_reason=st.none() | texts,
    index=st.none() | st.integers(0, 10**6),
    seed=st.none() | st.integers(0, 2**62),
)


@SETTINGS
@given(st.lists(dialogues, min_size=1, max_size=3))
def test_dialoguekit_round_trip_keeps_ids_acts_and_items(values):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "d.json"
        for d in values:
            for i, u in enumerate(d.utterances):
                u.utterance_id = f"{d.conversation_id}:{i}"
        write_dialoguekit(values, path)
        back = read_dialoguekit(path)
    assert [d.model_dump() for d in back] == [d.model_dump() for d in values]


@SETTINGS
@given(st.lists(st.binary(max_size=60).filter(lambda b: b"\n" not in b), min_size=1, max_size=6), st.booleans())
def test_jsonl_reader_on_random_lines(lines, newline_at_end):
    data = b"\n".join(lines) + (b"\n" if newline_at_end else b"")
    path = _write(data)
    try:
        records = list(iter_jsonl(path))
        assert all(isinstance(r, dict) for r in records)
        read_models(path, Dialogue)
    except DataError as exc:
        assert str(path) in str(exc)
    finally:
        path.unlink()


@SETTINGS
@given(st.lists(st.dictionaries(st.text(max_size=6), json_values, max_size=4), min_size=1, max_size=5), st.data())
def test_jsonl_torn_tail_is_dropped_and_appends_start_fresh(records, data):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "r.jsonl"
        with JsonlWriter(path) as writer:
            for rec in records:
                writer.write(rec)
        raw = path.read_bytes()
        last_start = raw.rstrip(b"\n").rfind(b"\n") + 1
        cut = data.draw(st.integers(last_start, len(raw) - 1), label="cut")
        path.write_bytes(raw[:cut])
        survivors = list(iter_jsonl(path))
        # a cut inside the last line loses exactly that record (a cut at its very start loses it too)
        assert survivors == [json.loads(json.dumps(r)) for r in records[:-1]] or (
            cut == len(raw) - 1 and survivors == [json.loads(json.dumps(r)) for r in records]
        )
        with JsonlWriter(path) as writer:
            writer.write({"after": "crash"})
        assert list(iter_jsonl(path))[-1] == {"after": "crash"}
        assert list(iter_jsonl(path))[:-1] == survivors


@SETTINGS
@given(dialogue_like)
def test_dialogue_from_dict_raises_only_data_errors(value):
    try:
        dialogue_from_dialoguekit(value, "d[0]")
    except DataError as exc:
        assert str(exc).startswith("d[0]")
