"""Shared checks for the converter tests: run the CLI, reload every output file, balance the counts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from usersimcrs.cli import main
from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.dialoguekit_io import read_dialoguekit
from usersimcrs.core.items import ItemCollection
from usersimcrs.core.jsonl import iter_jsonl, read_models
from usersimcrs.core.profile import InformationNeed, UserProfile


def run_convert(dataset: str, inputs: list[Path | str], out: Path, *flags: str) -> dict[str, Any]:
    """Run `usersimcrs convert` like a user would; return the parsed conversion report."""
    code = main(["convert", dataset, "--input", *map(str, inputs), "--output", str(out), *flags])
    assert code == 0
    return json.loads((out / "conversion_report.json").read_text(encoding="utf-8"))


def reload(out: Path) -> dict[str, Any]:
    """Every output file read back through the core readers."""
    loaded: dict[str, Any] = {}
    if (out / "dialogues.jsonl").exists():
        loaded["dialogues"] = read_models(out / "dialogues.jsonl", Dialogue)
        loaded["dialoguekit"] = read_dialoguekit(out / "dialogues.dialoguekit.json")
    if (out / "items.yaml").exists():
        mapping = yaml.safe_load((out / "items.yaml").read_text(encoding="utf-8"))
        path = out / mapping.pop("path")
        loaded["items"] = ItemCollection.from_csv(path, **mapping)
    if (out / "profiles.jsonl").exists():
        loaded["profiles"] = read_models(out / "profiles.jsonl", UserProfile)
    if (out / "information_needs.jsonl").exists():
        records = list(iter_jsonl(out / "information_needs.jsonl"))
        for record in records:
            record["need"] = InformationNeed.model_validate(record["need"])
        loaded["needs"] = records
    return loaded


def assert_balanced(report: dict[str, Any], keys: list[str]) -> None:
    """Every record that went in came out, unless it is listed as dropped with a reason."""
    for key in keys:
        assert report["counts_in"].get(key, 0) == report["counts_out"].get(key, 0) + report["counts_dropped"].get(
            key, 0
        ), key
    for dropped in report["dropped"]:
        assert dropped["reason"] and dropped["where"]


def assert_same_dialogues(jsonl: list[Dialogue], dialoguekit: list[Dialogue]) -> None:
    """The DialogueKit file carries the same IDs, texts, acts and annotations as the JSONL file."""
    assert [d.conversation_id for d in jsonl] == [d.conversation_id for d in dialoguekit]
    for a, b in zip(jsonl, dialoguekit):
        assert [u.utterance_id for u in a.utterances] == [u.utterance_id for u in b.utterances]
        assert [u.text for u in a.utterances] == [u.text for u in b.utterances]
        assert [u.dialogue_acts for u in a.utterances] == [u.dialogue_acts for u in b.utterances]
        assert [u.participant for u in a.utterances] == [u.participant for u in b.utterances]
        assert a.metadata == b.metadata
