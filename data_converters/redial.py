"""ReDial (Li et al., 2018): JSONL dialogues + movies_with_mentions.csv -> unified dialogues and needs.

Roles come from worker IDs (the initiator is the seeker, the respondent the recommender) because
the respondent often sends the first message. `@<id>` mentions become titles in the text and stay
as item annotations with character spans. The post-dialogue questions become per-item feedback:
each party is trusted on what it knows best (the recommender on what it suggested, the seeker on
what it has seen and liked), falling back to the other party's answers; an empty list means the
party gave no answers. Information need: targets are the suggested movies the seeker liked;
the seeker's own liked mentions become a `similar_to` constraint.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from data_converters.base import ConversionOutput, ConversionReport, Converter, NeedRecord
from data_converters.mentions import replace_mentions
from data_converters.metadata import clean_title, enrich_items, read_movielens_items
from data_converters.readers import header_of, iter_csv_rows, iter_json_lines
from usersimcrs.core.dialogue import AGENT, USER, Annotation, Dialogue, ItemRef, Utterance
from usersimcrs.core.items import Item, ItemCollection, split_year
from usersimcrs.core.profile import InformationNeed, Preferences, SeenItem, UserProfile
from usersimcrs.errors import DataError

MENTION = re.compile(r"@(\d+)")
_REQUIRED = ("conversationId", "messages", "initiatorWorkerId", "respondentWorkerId")
_ANSWERS = {0: False, 1: True}


def read_redial_movies(path: Path, converter: Converter, report: ConversionReport) -> ItemCollection:
    """movies_with_mentions.csv (`movieId,movieName,nbMentions`, CRLF) -> items with cleaned titles."""
    items = ItemCollection()
    for line, row in iter_csv_rows(path, ["movieId", "movieName"], lambda w, r: converter.bad(report, w, r)):
        movie_id, name = row["movieId"].strip(), clean_title(row["movieName"])
        if not movie_id or not name:
            converter.bad(report, f"{path}:{line}", "empty movieId or movieName")
            continue
        _, year = split_year(name)
        if year is None:
            report.warn("movie_without_year", f"{path}:{line}: {name!r}")
        items.add(Item(id=movie_id, title=name, year=year))
        report.count_in("movies")
    return items


def resolve_mentions(text: str, titles: dict[str, str], report: ConversionReport, where: str) -> tuple[str, list[dict]]:
    """Replace each `@id` by its title; return the new text and one {id,title,start,end} per mention."""

    def title_of(match: re.Match[str]) -> str | None:
        title = titles.get(match.group(1))
        if title is None:
            report.warn("unknown_mention", f"{where}: @{match.group(1)} has no title; kept as written")
        return title

    return replace_mentions(text, MENTION, title_of)


def item_feedback(record: dict[str, Any], report: ConversionReport, where: str) -> dict[str, dict[str, Any]]:
    """Per-movie {suggested, seen, liked} merged from both question sets (None = not answered)."""
    seeker = _answers(record.get("initiatorQuestions"), report, f"{where}: initiatorQuestions")
    recommender = _answers(record.get("respondentQuestions"), report, f"{where}: respondentQuestions")
    feedback: dict[str, dict[str, Any]] = {}
    for movie_id in dict.fromkeys([*seeker, *recommender]):
        mine, theirs = seeker.get(movie_id, {}), recommender.get(movie_id, {})
        entry = {
            "suggested": _first(theirs.get("suggested"), mine.get("suggested")),
            "seen": _first(mine.get("seen"), theirs.get("seen")),
            "liked": _first(mine.get("liked"), theirs.get("liked")),
            "answered_by": [who for who, src in (("seeker", mine), ("recommender", theirs)) if src],
        }
        for key in ("suggested", "seen", "liked"):
            a, b = mine.get(key), theirs.get(key)
            if a is not None and b is not None and a != b:
                report.warn("answers_disagree", f"{where}: movie {movie_id} {key}: seeker {a}, recommender {b}")
        feedback[movie_id] = entry
    return feedback


def _answers(raw: Any, report: ConversionReport, where: str) -> dict[str, dict[str, bool | None]]:
    if raw in (None, [], {}):
        if isinstance(raw, list):
            report.warn("questions_empty_list", f"{where}: [] instead of an object (no answers)")
        return {}
    if not isinstance(raw, dict):
        report.warn("questions_malformed", f"{where}: expected an object, got {type(raw).__name__}")
        return {}
    out: dict[str, dict[str, bool | None]] = {}
    for movie_id, answers in raw.items():
        if not isinstance(answers, dict):
            report.warn("questions_malformed", f"{where}: movie {movie_id}: {answers!r}")
            continue
        out[str(movie_id)] = {k: _answer(answers.get(k)) for k in ("suggested", "seen", "liked")}
    return out


def _answer(value: object) -> bool | None:
    """ReDial's 0/1/2 answer codes; anything else (a list, an object, an unknown code) is no answer."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return _ANSWERS.get(value)


def _first(*values: bool | None) -> bool | None:
    for value in values:
        if value is not None:
            return value
    return None


def convert_dialogue(
    record: dict[str, Any], catalogue: ItemCollection, report: ConversionReport, where: str
) -> tuple[Dialogue, NeedRecord, UserProfile]:
    """One ReDial record -> (dialogue, information need, seeker profile); raises ValueError if malformed."""
    for key in _REQUIRED:
        if key not in record:
            raise ValueError(f"missing key {key!r}")
    if not isinstance(record["messages"], list):
        raise ValueError("'messages' must be a list")
    cid = str(record["conversationId"])
    seeker, recommender = str(record["initiatorWorkerId"]), str(record["respondentWorkerId"])
    mentions = record.get("movieMentions") or {}
    if not isinstance(mentions, dict):
        report.warn("mentions_malformed", f"{where}: movieMentions is {type(mentions).__name__}")
        mentions = {}
    titles = {str(k): clean_title(v) for k, v in mentions.items() if isinstance(v, str) and v.strip()}
    for movie_id in mentions:
        if str(movie_id) not in titles:
            item = catalogue.get(str(movie_id))
            if item is not None:
                titles[str(movie_id)] = item.title
    feedback = item_feedback(record, report, where)
    dialogue = Dialogue(conversation_id=cid, user_id=seeker, agent_id=recommender)
    first_by: dict[str, str] = {}
    for index, message in enumerate(record["messages"]):
        if not isinstance(message, dict) or "text" not in message or "senderWorkerId" not in message:
            raise ValueError(f"messages[{index}]: needs 'text' and 'senderWorkerId'")
        sender = str(message["senderWorkerId"])
        if sender not in (seeker, recommender):
            raise ValueError(f"messages[{index}]: sender {sender} is neither initiator nor respondent")
        participant = USER if sender == seeker else AGENT
        text, found = resolve_mentions(str(message["text"]), titles, report, f"{where}: messages[{index}]")
        for mention in found:
            first_by.setdefault(mention["id"], participant)
        utterance = Utterance(
            participant=participant,
            text=text,
            utterance_id=str(message.get("messageId", f"{cid}:{index}")),
            annotations=[Annotation(key="items", value=found)] if found else [],
            metadata={"time_offset": message.get("timeOffset"), "sender_worker_id": sender},
        )
        if participant == AGENT:
            utterance.items = [
                ItemRef(id=m["id"], title=m["title"])
                for m in found
                if feedback.get(m["id"], {}).get("suggested") is not False
            ]
        dialogue.add(utterance)
    if dialogue.utterances and dialogue.utterances[0].participant == AGENT:
        report.warn("recommender_speaks_first", f"{where}: conversation {cid}")
    for movie_id, entry in feedback.items():
        entry["title"] = titles.get(movie_id)
        entry["first_mentioned_by"] = first_by.get(movie_id)
    dialogue.metadata = {
        "dataset": "redial",
        "source": where,
        "movie_mentions": titles,
        "item_feedback": feedback,
        "initiator_questions": record.get("initiatorQuestions"),
        "respondent_questions": record.get("respondentQuestions"),
    }
    need, profile = need_and_profile(cid, seeker, feedback, first_by)
    return dialogue, NeedRecord(conversation_id=cid, need=need), profile


def need_and_profile(
    cid: str, seeker: str, feedback: dict[str, dict[str, Any]], first_by: dict[str, str]
) -> tuple[InformationNeed, UserProfile]:
    """Targets = suggested movies the seeker liked; constraint = the seeker's first liked own mention."""
    targets = [
        ItemRef(id=mid, title=f["title"])
        for mid, f in feedback.items()
        if f["suggested"] is True and f["liked"] is True
    ]
    target_ids = {t.id for t in targets}
    own_liked = [mid for mid in first_by if first_by[mid] == USER and feedback.get(mid, {}).get("liked") is True] or [
        mid for mid, f in feedback.items() if f["suggested"] is False and f["liked"] is True
    ]
    constraints = (
        {"similar_to": feedback[own_liked[0]]["title"]} if own_liked and feedback[own_liked[0]]["title"] else {}
    )
    need = InformationNeed(constraints=constraints, targets=targets)
    preferences = Preferences(
        items={
            mid: (1.0 if f["liked"] else -1.0)
            for mid, f in feedback.items()
            if f["liked"] is not None and mid not in target_ids
        }
    )
    seen = [
        SeenItem(item=ItemRef(id=mid, title=f["title"]), rating=None)
        for mid, f in feedback.items()
        if f["seen"] is True and mid not in target_ids
    ]
    profile = UserProfile(
        user_id=seeker,
        need=need,
        preferences=preferences,
        seen_items=seen,
        metadata={"dataset": "redial", "conversation_id": cid},
    )
    return need, profile


class ReDialConverter(Converter):
    """ReDial JSONL (+ movies_with_mentions.csv, + optional MovieLens movies.csv for genres)."""

    name = "redial"
    description = "ReDial JSONL dialogues, movies_with_mentions.csv, optional MovieLens movies.csv"

    def convert(self, inputs: list[Path], report: ConversionReport) -> ConversionOutput:
        dialogue_files, catalogue_files, metadata_files = classify_inputs(inputs)
        if not dialogue_files:
            raise DataError("redial: no dialogue file among the inputs (expected *.jsonl)")
        catalogue = ItemCollection()
        for path in catalogue_files:
            for item in read_redial_movies(path, self, report):
                catalogue.add(item)
        if not catalogue_files:
            report.warn("no_catalogue", "no movies_with_mentions.csv given; items come from the mentions only")
        output = ConversionOutput(items=catalogue)
        seen_ids: set[str] = set()
        for path in dialogue_files:
            # a line that cannot be parsed is one dialogue in and one dropped (utterances unknown)
            for line, record in iter_json_lines(path, self.bad_counted(report, "dialogues")):
                where = f"{path}:{line}"
                messages = record.get("messages")
                counts = {"dialogues": 1, "utterances": len(messages) if isinstance(messages, list) else 0}
                for key, n in counts.items():
                    report.count_in(key, n)
                cid = str(record.get("conversationId"))
                try:
                    dialogue, need, profile = convert_dialogue(record, catalogue, report, where)
                except ValueError as exc:
                    self.bad(report, where, str(exc), record_id=cid, counts=counts)
                    continue
                if dialogue.conversation_id in seen_ids:
                    self.bad(report, where, f"duplicate conversationId {cid}", record_id=cid, counts=counts)
                    continue
                seen_ids.add(dialogue.conversation_id)
                for movie_id, title in dialogue.metadata["movie_mentions"].items():
                    if movie_id not in catalogue:
                        report.warn("movie_not_in_catalogue", f"{where}: {movie_id} {title!r}")
                        catalogue.add(Item(id=movie_id, title=title, year=split_year(title)[1]))
                output.dialogues.append(dialogue)
                output.needs.append(need)
                output.profiles.append(profile)
        for path in metadata_files:
            enrich_items(catalogue, read_movielens_items(path, lambda w, r: self.bad(report, w, r)), report, str(path))
        return output


def classify_inputs(inputs: list[Path]) -> tuple[list[Path], list[Path], list[Path]]:
    """Split inputs into dialogue JSONL, ReDial movie catalogues and MovieLens metadata files."""
    dialogues, catalogues, metadata = [], [], []
    for path in inputs:
        if path.suffix in (".jsonl", ".json"):
            dialogues.append(path)
            continue
        header = header_of(path)
        if "movieName" in header:
            catalogues.append(path)
        elif "title" in header and "movieId" in header:
            metadata.append(path)
        else:
            raise DataError(
                f"{path}: not a ReDial file (expected *.jsonl, movies_with_mentions.csv or a MovieLens movies.csv)"
            )
    return dialogues, catalogues, metadata
