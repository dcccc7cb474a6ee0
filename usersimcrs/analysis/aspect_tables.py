"""Long tables of per-aspect human ratings and predictions, the input of the aspect meta-evaluation.

Gold: one row per rated (conversation, assistant turn, aspect) or (conversation, aspect) from the
references a converted corpus carries (`convert crsarena-eval`). Predictions: from a run file, from
judgment records (turn scores are named ``<aspect>@<turn_ind>``, see `core.crsarena_eval`), or from
the surface baselines computed here. Every table has the columns conversation_id, turn_ind
(-1 for a dialogue aspect), aspect and value (``gold`` or ``pred``).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from usersimcrs.core.crsarena_eval import (
    BY_NAME,
    RunFileConversation,
    canonical,
    dataset_of,
    split_score_name,
    system_of,
    turn_index,
    turn_score_name,
)
from usersimcrs.core.dialogue import AGENT, Dialogue
from usersimcrs.judges.base import JudgmentRecord
from usersimcrs.metrics.satisfaction import classify, load_classifier, on_scale

DIALOGUE_TURN = -1
GOLD_COLUMNS = ["conversation_id", "turn_ind", "aspect", "gold", "system", "group"]
PRED_COLUMNS = ["conversation_id", "turn_ind", "aspect", "pred"]


def assistant_turns(dialogue: Dialogue) -> list[tuple[int, int]]:
    """(position, turn index) of every assistant utterance."""
    return [(i, turn_index(i, u)) for i, u in enumerate(dialogue.utterances) if u.participant == AGENT]


def system_and_group(dialogue: Dialogue, crs: str | None = None, dataset: str | None = None) -> tuple[str, str]:
    """The conversation's system and group: ``<crs>_<dataset>`` and the dataset from a CRSArena ID
    (the official rule), else the run's CRS (or the dialogue's agent) and dataset (or 'all')."""
    cid = dialogue.conversation_id
    system, part = system_of(cid), dataset_of(cid)
    meta_dataset = dialogue.metadata.get("dataset")
    if system is not None and part is not None and (meta_dataset in (None, part)):
        return f"{system}_{part}", part
    return str(crs or dialogue.agent_id), str(dataset or meta_dataset or "all")


def _numeric(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def carries_ratings(dialogue: Dialogue) -> bool:
    """Whether the dialogue or one of its assistant turns carries a rating of a CRSArena-Eval aspect."""
    reference = dialogue.metadata.get("reference")
    if isinstance(reference, dict) and any(canonical(str(k)) in BY_NAME for k in reference):
        return True
    for utterance in dialogue.agent_turns:
        ref = utterance.metadata.get("reference")
        if isinstance(ref, dict) and any(canonical(str(k)) in BY_NAME for k in ref):
            return True
    return False


def gold_table(dialogues: Iterable[tuple[Dialogue, str | None, str | None]], aspects: Sequence[str]) -> pd.DataFrame:
    """Human ratings of `aspects` from (dialogue, run CRS, run dataset) triples."""
    wanted = set(aspects)
    rows = []
    for dialogue, crs, dataset in dialogues:
        system, group = system_and_group(dialogue, crs, dataset)
        cid = dialogue.conversation_id
        reference = dialogue.metadata.get("reference")
        if isinstance(reference, dict):
            for key, value in reference.items():
                name = canonical(str(key))
                number = _numeric(value)
                if name in wanted and BY_NAME[name].level == "dialogue" and number is not None:
                    rows.append((cid, DIALOGUE_TURN, name, number, system, group))
        for position, turn in assistant_turns(dialogue):
            ref = dialogue.utterances[position].metadata.get("reference")
            if not isinstance(ref, dict):
                continue
            for key, value in ref.items():
                name = canonical(str(key))
                number = _numeric(value)
                if name in wanted and BY_NAME[name].level == "turn" and number is not None:
                    rows.append((cid, turn, name, number, system, group))
    table = pd.DataFrame(rows, columns=GOLD_COLUMNS)
    return table.drop_duplicates(["conversation_id", "turn_ind", "aspect"], keep="first")


def run_file_predictions(conversations: Iterable[RunFileConversation], aspects: Sequence[str]) -> pd.DataFrame:
    """A run file's predictions of `aspects` (NaN kept: the official rule turns it into a NaN figure)."""
    wanted = set(aspects)
    rows = []
    for conversation in conversations:
        for turn in conversation.turns:
            for name, value in turn.turn_level_pred.items():
                if name in wanted and BY_NAME[name].level == "turn":
                    rows.append((conversation.conv_id, turn.turn_ind, name, float(value)))
        for name, value in conversation.dial_level_pred.items():
            if name in wanted and BY_NAME[name].level == "dialogue":
                rows.append((conversation.conv_id, DIALOGUE_TURN, name, float(value)))
    return pd.DataFrame(rows, columns=PRED_COLUMNS)


def judgment_predictions(records: Iterable[JudgmentRecord], aspects: Sequence[str]) -> dict[str, pd.DataFrame]:
    """Predictions per judge (and model, when a judge ran with several) from judgment records.

    A record counts when its name (``understanding``, ``relevance@3``, aliases allowed) is one of
    `aspects` at the right level; records without a value (failed judgments) are left out here and
    counted by `judgment_failures`.
    """
    wanted = set(aspects)
    by_key: dict[tuple[str, str], list[tuple[str, int, str, float]]] = {}
    for record in records:
        base, turn = split_score_name(str(record.get("name", "")))
        name = canonical(base)
        if name not in wanted or record.get("value") is None:
            continue
        level = BY_NAME[name].level
        if (level == "turn") != (turn is not None):
            continue
        key = (str(record.get("judge", "judge")), str(record.get("model") or ""))
        value = _numeric(record.get("value"))
        by_key.setdefault(key, []).append(
            (
                str(record["conversation_id"]),
                DIALOGUE_TURN if turn is None else turn,
                name,
                np.nan if value is None else value,
            )
        )
    models: dict[str, set[str]] = {}
    for judge, model in by_key:
        models.setdefault(judge, set()).add(model)
    out = {}
    for (judge, model), rows in by_key.items():
        label = judge if len(models[judge]) == 1 else f"{judge} ({model or 'unknown model'})"
        out[label] = pd.DataFrame(rows, columns=PRED_COLUMNS)
    return out


def judgment_failures(records: Iterable[JudgmentRecord], aspects: Sequence[str]) -> dict[str, int]:
    """Judgments of `aspects` without a value, per judge (they pair with nothing)."""
    wanted = set(aspects)
    out: dict[str, int] = {}
    for record in records:
        base, _ = split_score_name(str(record.get("name", "")))
        if canonical(base) in wanted and record.get("value") is None:
            judge = str(record.get("judge", "judge"))
            out[judge] = out.get(judge, 0) + 1
    return out


# ---------------------------------------------------------------- surface baselines


def _words(text: str) -> int:
    return len(text.split())


TurnScore = Callable[[Dialogue, int, int], float | None]
DialogueScore = Callable[[Dialogue], float | None]


def _length_turn(d: Dialogue, position: int, k: int) -> float:
    return float(len(d.utterances))


def _length_dialogue(d: Dialogue) -> float:
    return float(len(d.utterances))


def _words_turn(d: Dialogue, position: int, k: int) -> float:
    return float(_words(d.utterances[position].text))


def _words_dialogue(d: Dialogue) -> float | None:
    turns = [_words(u.text) for u in d.agent_turns]
    return float(np.mean(turns)) if turns else None


def _position_turn(d: Dialogue, position: int, k: int) -> float:
    return float(k)


SURFACE: dict[str, tuple[TurnScore | None, DialogueScore | None]] = {
    "conversation length": (_length_turn, _length_dialogue),
    "assistant utterance length": (_words_turn, _words_dialogue),
    "turn position": (_position_turn, None),
}
"""Surface baselines, name -> (score of an assistant turn, score of a dialogue). Conversation length:
utterances in the conversation (the same for each of its turns); assistant utterance length: words
of the turn, the mean over assistant turns for a dialogue; turn position: the assistant turn's
number (1 = first), no dialogue score. Each is taken as it is: a negative correlation is reported
as negative."""

SATISFACTION = "DialogueKit satisfaction"
CRS_IDENTITY = "CRS identity"
"""The baseline that knows only which CRS spoke: a conversation's (turn's) prediction is the mean rating of
the other conversations of its CRS (leave one conversation out), so it never sees its own rating."""


def identity_predictions(gold: pd.DataFrame) -> pd.DataFrame:
    """The CRS-identity baseline from the gold table (GOLD_COLUMNS): per (group, system, aspect), each
    conversation gets the mean rating of the same CRS's other conversations (their turns, for a turn
    aspect). A CRS with one rated conversation gives it no prediction."""
    if gold.empty:
        return pd.DataFrame(columns=PRED_COLUMNS)
    keys = ["group", "system", "aspect"]
    per_conversation = gold.groupby([*keys, "conversation_id"], as_index=False)["gold"].agg(["sum", "count"])
    totals = per_conversation.groupby(keys)[["sum", "count"]].transform("sum")
    rest = totals["count"] - per_conversation["count"]
    per_conversation["pred"] = (totals["sum"] - per_conversation["sum"]) / rest.where(rest > 0)
    table = gold.merge(per_conversation[[*keys, "conversation_id", "pred"]], on=[*keys, "conversation_id"])
    table = table[table["pred"].notna()]
    return table[PRED_COLUMNS].reset_index(drop=True)


def surface_predictions(dialogues: Sequence[Dialogue], aspects: Sequence[str]) -> dict[str, pd.DataFrame]:
    """The surface baselines' predictions of `aspects` for `dialogues`."""
    turn_aspects = [a for a in aspects if BY_NAME[a].level == "turn"]
    dial_aspects = [a for a in aspects if BY_NAME[a].level == "dialogue"]
    out = {}
    for name, (turn_score, dial_score) in SURFACE.items():
        rows = []
        for d in dialogues:
            if turn_score is not None:
                for k, (position, turn) in enumerate(assistant_turns(d), start=1):
                    value = turn_score(d, position, k)
                    rows += [(d.conversation_id, turn, a, value) for a in turn_aspects if value is not None]
            if dial_score is not None:
                value = dial_score(d)
                rows += [(d.conversation_id, DIALOGUE_TURN, a, value) for a in dial_aspects if value is not None]
        out[name] = pd.DataFrame(rows, columns=PRED_COLUMNS)
    return out


def satisfaction_predictions(dialogues: Sequence[Dialogue], aspects: Sequence[str]) -> pd.DataFrame | None:
    """DialogueKit's satisfaction classifier (1-5; the anchor toolkit's metric): a dialogue gets its
    score on the whole text, an assistant turn its score on the conversation up to that turn. None
    when the classifier cannot be loaded; an answer outside 1-5 is left out (never shifted)."""
    classifier = load_classifier()
    if classifier is None:
        return None
    turn_aspects = [a for a in aspects if BY_NAME[a].level == "turn"]
    dial_aspects = [a for a in aspects if BY_NAME[a].level == "dialogue"]
    keys: list[tuple[str, int, list[str]]] = []
    texts: list[str] = []
    for d in dialogues:
        texts_so_far = [u.text for u in d.utterances]
        if turn_aspects:
            for position, turn in assistant_turns(d):
                keys.append((d.conversation_id, turn, turn_aspects))
                texts.append(" .".join(texts_so_far[: position + 1]))
        if dial_aspects and d.utterances:
            keys.append((d.conversation_id, DIALOGUE_TURN, dial_aspects))
            texts.append(" .".join(texts_so_far))
    scores = classify(classifier, texts) if texts else []
    rows = []
    for (cid, turn, names), score in zip(keys, scores):
        value = on_scale(score)
        if value is not None:
            rows += [(cid, turn, a, value) for a in names]
    return pd.DataFrame(rows, columns=PRED_COLUMNS)


def run_file_records(conversations: Iterable[RunFileConversation], judge: str) -> list[JudgmentRecord]:
    """A run file as judgment records of `judge` (turn scores named ``<aspect>@<turn_ind>``), so outside
    predictions join every table judgments join. Only CRSArena-Eval aspects are kept."""
    records: list[JudgmentRecord] = []
    for conversation in conversations:
        for turn in conversation.turns:
            for name, value in turn.turn_level_pred.items():
                if name in BY_NAME and BY_NAME[name].level == "turn":
                    records.append(
                        _record(conversation.conv_id, judge, turn_score_name(name, turn.turn_ind), name, value)
                    )
        for name, value in conversation.dial_level_pred.items():
            if name in BY_NAME and BY_NAME[name].level == "dialogue":
                records.append(_record(conversation.conv_id, judge, name, name, value))
    return records


def _record(conversation_id: str, judge: str, name: str, aspect_name: str, value: float) -> JudgmentRecord:
    spec = BY_NAME[aspect_name]
    return {
        "conversation_id": conversation_id,
        "judge": judge,
        "name": name,
        "value": float(value),
        "scale": [spec.low, spec.high],
        "source": "run file",
    }
