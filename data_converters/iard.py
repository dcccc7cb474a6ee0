"""IARD (Cai & Chen, 2020): intent-annotated ReDial dialogues -> dialogues with dialogue acts.

Each utterance's sub-intent codes become dialogue acts through the documented mapping in
iard_codes.yaml (the released data writes CLQ, RESP and R-ANS where the README says CLA, RES and
ANS); the top-level codes stay as an annotation. `@id <Title (Year)>` mentions become titles with
item annotations and TITLE slots. `accepted_recommendation` lists the positions of the seeker's
accepting turns; which movies were accepted is inferred (see `accepted_items`) and they become the
information need's targets.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from data_converters.base import ConversionOutput, ConversionReport, Converter, ConvertOptions, NeedRecord
from data_converters.mentions import replace_mentions
from data_converters.metadata import clean_title, enrich_items, read_movielens_items
from data_converters.readers import header_of, read_json
from data_converters.redial import read_redial_movies
from usersimcrs.core.dialogue import AGENT, USER, Annotation, Dialogue, DialogueAct, ItemRef, SlotValue, Utterance
from usersimcrs.core.items import Item, ItemCollection, split_year
from usersimcrs.core.profile import InformationNeed, UserProfile
from usersimcrs.core.yaml_io import read_yaml
from usersimcrs.errors import DataError

CODES_FILE = Path(__file__).with_name("iard_codes.yaml")
MENTION = re.compile(r"@(\d+)(?:\s*<([^>]*)> ?)?")
ROLES = {"seeker": USER, "recommender": AGENT}
RECOMMENDING = {"REC-S", "REC-E", "EXP-I", "EXP-P", "EXP-S"}


def code_mapping() -> dict[str, dict[str, dict[str, Any]]]:
    """role -> code -> {intent, top_level, item_slots, description}, read from iard_codes.yaml."""
    data = read_yaml(CODES_FILE)
    return {"seeker": data["seeker"], "recommender": data["recommender"]}


def resolve_mentions(text: str, catalogue: ItemCollection) -> tuple[str, list[dict[str, Any]]]:
    """`@123 <Title  (Year)>` -> `Title (Year)`, with one {id,title,start,end} per mention."""

    def title_of(match: re.Match[str]) -> str | None:
        known = catalogue.get(match.group(1))
        return clean_title(match.group(2) or "") or (known.title if known else "") or None

    return replace_mentions(text, MENTION, title_of)


def acts_for(
    codes: list[str],
    table: dict[str, dict[str, Any]],
    mentions: list[dict[str, Any]],
    report: ConversionReport,
    where: str,
) -> list[DialogueAct]:
    """Sub-intent codes -> dialogue acts via one role's `table`; unknown codes are kept verbatim and reported."""
    acts = []
    for code in codes:
        entry = table.get(code)
        if entry is None:
            report.warn("unknown_code", f"{where}: code {code!r} kept as is")
            entry = {"intent": code, "item_slots": True}
        slots = (
            [SlotValue(slot="TITLE", value=m["title"], start=m["start"], end=m["end"]) for m in mentions]
            if entry.get("item_slots")
            else []
        )
        acts.append(DialogueAct(intent=str(entry["intent"]), slot_values=slots))
    return acts


class IARDConverter(Converter):
    """umap2020_IARD.json (+ optional movies_with_mentions.csv and MovieLens movies.csv)."""

    name = "iard"
    description = "IARD umap2020_IARD.json, optional ReDial movies_with_mentions.csv / MovieLens movies.csv"

    def __init__(self, options: ConvertOptions | None = None) -> None:
        super().__init__(options)
        self.codes = code_mapping()

    def convert(self, inputs: list[Path], report: ConversionReport) -> ConversionOutput:
        json_files = [p for p in inputs if p.suffix == ".json"]
        csv_files = [p for p in inputs if p.suffix != ".json"]
        if not json_files:
            raise DataError("iard: no IARD JSON file among the inputs")
        catalogue = ItemCollection()
        metadata_files = []
        for path in csv_files:
            if "movieName" in header_of(path):
                for item in read_redial_movies(path, self, report):
                    catalogue.add(item)
            else:
                metadata_files.append(path)
        items = ItemCollection()
        output = ConversionOutput(items=items)
        for path in json_files:
            data = read_json(path)
            if not isinstance(data, dict):
                raise DataError(f"{path}: expected an object of conversation id -> dialogue")
            for cid, record in data.items():
                where = f"{path}: conversation {cid}"
                info = record.get("dialogue_info") if isinstance(record, dict) else None
                counts = {"dialogues": 1, "utterances": len(info) if isinstance(info, dict) else 0}
                for key, n in counts.items():
                    report.count_in(key, n)
                try:
                    dialogue, need, profile = self._dialogue(str(cid), record, catalogue, report, where)
                except ValueError as exc:
                    self.bad(report, where, str(exc), record_id=str(cid), counts=counts)
                    continue
                for utt in dialogue.utterances:
                    for mention in utt.annotation("items", []):
                        if mention["id"] not in items:
                            known = catalogue.get(mention["id"])
                            items.add(
                                known
                                or Item(id=mention["id"], title=mention["title"], year=split_year(mention["title"])[1])
                            )
                output.dialogues.append(dialogue)
                output.needs.append(need)
                output.profiles.append(profile)
        for path in metadata_files:
            enrich_items(items, read_movielens_items(path, lambda w, r: self.bad(report, w, r)), report, str(path))
        if len(catalogue):
            from_catalogue = sum(item.id in catalogue for item in items)
            report.written_in_part(
                "movies",
                read=len(catalogue),
                written=len(items),
                reason="only movies mentioned in the converted dialogues are written",
                from_movie_list=from_catalogue,
                mentioned_but_not_in_movie_list=len(items) - from_catalogue,
            )
        return output

    def _dialogue(
        self, cid: str, record: Any, catalogue: ItemCollection, report: ConversionReport, where: str
    ) -> tuple[Dialogue, NeedRecord, UserProfile]:
        if not isinstance(record, dict) or not isinstance(record.get("dialogue_info"), dict):
            raise ValueError("missing key 'dialogue_info'")
        accepted_positions = record.get("accepted_recommendation", [])
        if not isinstance(accepted_positions, list):
            raise ValueError("'accepted_recommendation' must be a list of utterance positions")
        rows = []
        for key, raw in record["dialogue_info"].items():
            if not isinstance(raw, dict):
                raise ValueError(f"utterance {key}: not an object")
            for field in ("utterance_pos", "role", "utterance_text"):
                if field not in raw:
                    raise ValueError(f"utterance {key}: missing key {field!r}")
            if raw["role"] not in ROLES:
                raise ValueError(f"utterance {key}: role must be seeker or recommender, got {raw['role']!r}")
            if key[:1] != raw["role"][:1].upper():
                report.warn("id_role_mismatch", f"{where}: utterance {key} has role {raw['role']}")
            rows.append((int(raw["utterance_pos"]), key, raw))
        rows.sort(key=lambda r: r[0])
        dialogue = Dialogue(conversation_id=cid)
        workers: dict[str, str] = {}
        by_position: dict[int, Utterance] = {}
        for position, key, raw in rows:
            role = raw["role"]
            workers.setdefault(role, str(raw.get("worker_id")))
            text, mentions = resolve_mentions(str(raw["utterance_text"]), catalogue)
            codes = [str(c) for c in raw.get("sub-intent/action") or []]
            utterance = Utterance(
                participant=ROLES[role],
                text=text.strip(),
                utterance_id=f"{cid}:{key}",
                dialogue_acts=acts_for(codes, self.codes[role], mentions, report, f"{where}: {key}"),
                annotations=[
                    Annotation(key="iard_top_level", value=list(raw.get("top-level intent/action") or [])),
                    Annotation(key="iard_codes", value=codes),
                    *([Annotation(key="items", value=mentions)] if mentions else []),
                ],
                metadata={"utterance_pos": position, "worker_id": raw.get("worker_id")},
            )
            if utterance.participant == AGENT and RECOMMENDING & {a.intent for a in utterance.dialogue_acts}:
                utterance.items = [ItemRef(id=m["id"], title=m["title"]) for m in mentions]
            by_position[position] = utterance
            dialogue.add(utterance)
        dialogue.user_id = workers.get("seeker", "USER")
        dialogue.agent_id = workers.get("recommender", "CRS")
        accepted = accepted_items(dialogue, accepted_positions, by_position, report, where)
        dialogue.metadata = {
            "dataset": "iard",
            "source": where,
            "accepted_positions": accepted_positions,
            "accepted_recommendations": [split_year(a.title or "")[0] for a in accepted],
        }
        need = InformationNeed(targets=accepted)
        profile = UserProfile(user_id=dialogue.user_id, need=need, metadata={"dataset": "iard", "conversation_id": cid})
        return dialogue, NeedRecord(conversation_id=cid, need=need), profile


def accepted_items(
    dialogue: Dialogue, positions: list[Any], by_position: dict[int, Utterance], report: ConversionReport, where: str
) -> list[ItemRef]:
    """The movies accepted at each accepting seeker turn (a documented heuristic; IARD gives positions only).

    Take the recommender's last recommending turn (REC-S/REC-E) with movies before the accepting
    turn, drop movies the seeker had named earlier (unless none remain), and if the seeker named
    some of the remaining ones between that turn and the acceptance, keep only those.
    """
    out: dict[str, ItemRef] = {}
    for raw_position in positions:
        try:
            position = int(raw_position)
        except (TypeError, ValueError):
            report.warn("accepted_position_malformed", f"{where}: {raw_position!r}")
            continue
        if position not in by_position:
            report.warn("accepted_position_missing", f"{where}: no utterance at position {position}")
            continue
        picked = _accepted_at(position, by_position)
        if not picked:
            report.warn("accepted_without_movie", f"{where}: no recommended movie before position {position}")
        for mention in picked:
            out.setdefault(mention["id"], ItemRef(id=mention["id"], title=mention["title"]))
    return list(out.values())


def _accepted_at(position: int, by_position: dict[int, Utterance]) -> list[dict[str, Any]]:
    earlier = [by_position[p] for p in sorted(by_position) if p < position]
    turns = [i for i, u in enumerate(earlier) if u.participant == AGENT and u.annotation("items")]
    recommending = [i for i in turns if {"REC-S", "REC-E"} & {a.intent for a in earlier[i].dialogue_acts}]
    chosen = recommending[-1] if recommending else turns[-1] if turns else None
    if chosen is None:
        return []
    candidates = earlier[chosen].annotation("items", [])
    seeker_before = {m["id"] for u in earlier[:chosen] if u.participant == USER for m in u.annotation("items", [])}
    fresh = [m for m in candidates if m["id"] not in seeker_before] or candidates
    later = [*earlier[chosen + 1 :], by_position[position]]
    named_after = {m["id"] for u in later if u.participant == USER for m in u.annotation("items", [])}
    return [m for m in fresh if m["id"] in named_after] or fresh
