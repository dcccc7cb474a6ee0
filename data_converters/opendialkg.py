"""OpenDialKG (Moon et al., 2019): `Messages,User Rating,Assistant Rating` rows -> unified dialogues.

`Messages` is a JSON list of chat messages and actions. Chat messages become utterances;
`kgwalk/choose_path` actions become a `kg_path` annotation on the next chat message of the same
sender (the walk the speaker chose before writing it); `meta_thread/send_meta_message` actions are
notes between crowd workers and go to the dialogue metadata, not into the conversation. Entities
on KG paths are annotated; the ones that are subjects of item relations (starred_actors,
directed_by, ...) become items, with the related values as attributes. The domain (movie, book,
music, sport) comes from the opening user message, then from all chat text and relations; only
movie dialogues are kept by default (`--domain all` keeps all). Ratings stay in the metadata.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator

from data_converters.base import ConversionOutput, ConversionReport, Converter, NeedRecord
from data_converters.readers import iter_csv_rows, read_json
from usersimcrs.core.dialogue import AGENT, USER, Annotation, Dialogue, ItemRef, Utterance
from usersimcrs.core.items import Item, ItemCollection
from usersimcrs.core.profile import InformationNeed
from usersimcrs.errors import DataError

COLUMNS = ["Messages", "User Rating", "Assistant Rating"]
SENDERS = {"user": USER, "assistant": AGENT}
# Relations whose subject is an item (the WikiMovies-style relations of OpenDialKG), -> slot name.
ITEM_RELATIONS = {
    "starred_actors": "actors",
    "directed_by": "directors",
    "written_by": "writers",
    "has_genre": "genres",
    "release_year": "year",
    "in_language": "language",
    "has_tags": "keywords",
    "has_imdb_rating": "imdb_rating",
    "has_imdb_votes": "imdb_votes",
}
DOMAIN_WORDS = {
    "movie": r"movies?|films?|watch(?:ed|ing)?|actors?|actress|directors?|starr(?:ed|ing)|cinema|trailer",
    "book": r"books?|novels?|read(?:ing)?|authors?|wr[io]te|writers?|series of books",
    "music": r"music|songs?|albums?|bands?|singers?|sing|lyrics|rapper|musician",
    "sport": r"sports?|teams?|players?|football|soccer|basketball|baseball|hockey|league|athletes?",
}
MOVIE_RELATIONS = {"starred_actors", "directed_by", "release_year", "has_imdb_rating", "has_imdb_votes"}


def forward_triples(path: list) -> Iterator[tuple[str, str, str]]:
    """Each [s, r, o] of a KG path, with inverse relations (`~r`) turned around into (o, r, s)."""
    for triple in path:
        if not isinstance(triple, (list, tuple)) or len(triple) != 3:
            continue
        s, r, o = (str(x) for x in triple)
        yield (o, r[1:], s) if r.startswith("~") else (s, r, o)


def classify_domain(messages: list[dict[str, Any]]) -> str:
    """movie/book/music/sport: keywords of the opening user message decide, else all text and relations."""
    chats = [m for m in messages if m.get("type") == "chat" and isinstance(m.get("message"), str)]
    opening = next((m["message"] for m in chats if m.get("sender") == "user"), "")
    scores = _keyword_scores(opening)
    if max(scores.values()) > 0:
        return max(scores, key=lambda d: scores[d])
    scores = _keyword_scores(" ".join(m["message"] for m in chats))
    for message in messages:
        for _, relation, _ in forward_triples(_path_of(message).get("triples", [])):
            if relation in MOVIE_RELATIONS:
                scores["movie"] += 2
    best = max(scores, key=lambda d: scores[d])
    return best if scores[best] > 0 else "unknown"


def _keyword_scores(text: str) -> dict[str, int]:
    lowered = text.lower()
    return {d: len(re.findall(rf"\b(?:{words})\b", lowered)) for d, words in DOMAIN_WORDS.items()}


def _path_of(message: dict[str, Any]) -> dict[str, Any]:
    """The {score, triples, text} of a kgwalk action (empty for other messages)."""
    if message.get("action_id") != "kgwalk/choose_path":
        return {}
    raw = (message.get("metadata") or {}).get("path")
    if not isinstance(raw, list) or len(raw) < 2:
        return {}
    return {
        "score": raw[0],
        "triples": raw[1] if isinstance(raw[1], list) else [],
        "text": raw[2] if len(raw) > 2 else None,
    }


def introduced_by(dialogue: Dialogue, path_items: list[list[str]]) -> dict[str, str]:
    """Item -> the participant who brought it up first, by name in the text or on a KG path."""
    names = {i: re.sub(r"\s*\([^)]*\)\s*$", "", i).lower() for items in path_items for i in items}
    first_by: dict[str, str] = {}
    for utterance, items in zip(dialogue.utterances, path_items):
        lowered = utterance.text.lower()
        for item_id, name in names.items():
            if name and re.search(rf"(?<!\w){re.escape(name)}(?!\w)", lowered):
                first_by.setdefault(item_id, utterance.participant)
        for item_id in items:
            first_by.setdefault(item_id, utterance.participant)
    return first_by


def parse_rating(raw: Any, report: ConversionReport, where: str) -> dict[str, Any] | None:
    """`'{"dialog_rating": "5", ...}'` -> {"dialog_rating": 5, ...}; numbers kept as numbers."""
    if raw in (None, ""):
        return None
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        report.warn("rating_not_json", f"{where}: {str(raw)[:80]!r}")
        return {"raw": raw}
    if not isinstance(value, dict):
        return {"raw": value}
    return {k: _number(v) for k, v in value.items()}


def _number(value: Any) -> Any:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return value
    return int(number) if number.is_integer() else number


class OpenDialKGConverter(Converter):
    """opendialkg.csv (or the same rows as a JSON list of objects)."""

    name = "opendialkg"
    description = "OpenDialKG opendialkg.csv or a JSON list of its rows"

    def convert(self, inputs: list[Path], report: ConversionReport) -> ConversionOutput:
        items = ItemCollection()
        output = ConversionOutput(items=items)
        for path in inputs:
            for where, index, row in self._rows(path, report):
                report.count_in("dialogues")
                cid = f"{path.stem}-{index}"
                try:
                    messages = json.loads(row["Messages"]) if isinstance(row["Messages"], str) else row["Messages"]
                    if not isinstance(messages, list):
                        raise ValueError("'Messages' must be a JSON list")
                except (ValueError, TypeError) as exc:
                    self.bad(report, f"{where}: column 'Messages'", f"not valid JSON ({exc})", cid, {"dialogues": 1})
                    continue
                chats = [m for m in messages if isinstance(m, dict) and m.get("type") == "chat"]
                report.count_in("utterances", len(chats))
                domain = classify_domain([m for m in messages if isinstance(m, dict)])
                counts = {"dialogues": 1, "utterances": len(chats)}
                if self.options.domain != "all" and domain != self.options.domain:
                    report.drop(where, f"domain {domain} (filter: {self.options.domain})", cid, counts)
                    continue
                try:
                    dialogue, need = self._dialogue(cid, messages, row, domain, items, report, where)
                except ValueError as exc:
                    self.bad(report, where, str(exc), cid, counts)
                    continue
                output.dialogues.append(dialogue)
                output.needs.append(need)
        return output

    def _rows(self, path: Path, report: ConversionReport) -> Iterator[tuple[str, int, dict[str, Any]]]:
        if path.suffix == ".json":
            data = read_json(path)
            if not isinstance(data, list):
                raise DataError(f"{path}: expected a JSON list of rows with {', '.join(COLUMNS)}")
            for index, row in enumerate(data):
                where = f"{path}[{index}]"
                if not isinstance(row, dict) or "Messages" not in row:
                    report.count_in("dialogues")
                    self.bad(report, where, "missing key 'Messages'", counts={"dialogues": 1})
                    continue
                yield where, index, row
            return

        def on_bad(where: str, reason: str) -> None:
            report.count_in("dialogues")
            self.bad(report, where, reason, counts={"dialogues": 1})

        for index, (line, row) in enumerate(iter_csv_rows(path, ["Messages"], on_bad)):
            yield f"{path}:{line}", index, row

    def _dialogue(
        self,
        cid: str,
        messages: list[Any],
        row: dict[str, Any],
        domain: str,
        items: ItemCollection,
        report: ConversionReport,
        where: str,
    ) -> tuple[Dialogue, NeedRecord]:
        dialogue = Dialogue(conversation_id=cid, user_id="user", agent_id="assistant")
        pending: dict[str, list[dict[str, Any]]] = {"user": [], "assistant": []}
        meta_messages: list[dict[str, Any]] = []
        path_items: list[list[str]] = []
        for position, message in enumerate(messages):
            if not isinstance(message, dict):
                raise ValueError(f"Messages[{position}] is not an object")
            sender = str(message.get("sender", ""))
            if sender not in SENDERS:
                raise ValueError(f"Messages[{position}]: unknown sender {message.get('sender')!r}")
            if message.get("type") == "chat":
                text = message.get("message")
                if not isinstance(text, str):
                    raise ValueError(f"Messages[{position}]: chat without a 'message' string")
                utterance = Utterance(participant=SENDERS[sender], text=text)
                paths, pending[sender] = pending[sender], []
                path_items.append(self._attach_paths(utterance, paths, items, domain))
                dialogue.add(utterance)
            elif message.get("action_id") == "kgwalk/choose_path":
                path = _path_of(message)
                if path:
                    pending[sender].append(path)
                else:
                    report.warn("kg_path_malformed", f"{where}: Messages[{position}]")
            else:
                text = (message.get("metadata") or {}).get("text")
                meta_messages.append(
                    {"sender": sender, "action_id": message.get("action_id"), "text": text, "position": position}
                )
        unattached = [p for paths in pending.values() for p in paths]
        if unattached:
            report.warn("kg_path_without_message", f"{where}: {len(unattached)} path(s) after the last message")
        dialogue.metadata = {
            "dataset": "opendialkg",
            "source": where,
            "domain": domain,
            "user_rating": parse_rating(row.get("User Rating"), report, f"{where}: User Rating"),
            "assistant_rating": parse_rating(row.get("Assistant Rating"), report, f"{where}: Assistant Rating"),
            "meta_messages": meta_messages,
            "unattached_kg_paths": unattached,
        }
        first_by = introduced_by(dialogue, path_items)
        targets = [ItemRef(id=i, title=i) for i, who in first_by.items() if who == AGENT]
        constraints = {}
        mentioned_by_user = [i for i, who in first_by.items() if who == USER]
        if mentioned_by_user:
            constraints["similar_to"] = mentioned_by_user[0]
        need = InformationNeed(constraints=constraints, targets=targets)
        return dialogue, NeedRecord(conversation_id=cid, need=need)

    def _attach_paths(
        self, utterance: Utterance, paths: list[dict[str, Any]], items: ItemCollection, domain: str
    ) -> list[str]:
        """KG paths -> annotations; item subjects -> items (with attributes) and the turn's item list."""
        entities: list[str] = []
        turn_items: list[str] = []
        for path in paths:
            utterance.annotations.append(Annotation(key="kg_path", value=path))
            for triple in path["triples"]:
                if isinstance(triple, (list, tuple)) and len(triple) == 3:
                    entities += [str(triple[0]), str(triple[2])]
            for subject, relation, value in forward_triples(path["triples"]):
                is_item = relation in ITEM_RELATIONS or (relation == "is-a" and value.lower() == "film")
                if not is_item:
                    continue
                item = items.get(subject)
                if item is None:
                    item = Item(id=subject, title=subject, attributes={"domain": [domain]})
                    items.add(item)
                slot = ITEM_RELATIONS.get(relation)
                if slot and value not in item.attributes.setdefault(slot, []):
                    item.attributes[slot].append(value)
                if slot == "year" and value.isdigit():
                    item.year = int(value)
                turn_items.append(subject)
        if entities:
            utterance.annotations.append(Annotation(key="entities", value=list(dict.fromkeys(entities))))
        turn_items = list(dict.fromkeys(turn_items))
        if utterance.participant == AGENT:
            utterance.items = [ItemRef(id=i, title=i) for i in turn_items]
        return turn_items
