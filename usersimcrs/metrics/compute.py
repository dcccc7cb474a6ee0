"""Run every metric family over a set of dialogues: one row per conversation, one curve per turn."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import pandas as pd

from usersimcrs.core.dialogue import Dialogue
from usersimcrs.metrics.base import MetricContext
from usersimcrs.metrics.options import MetricOptions
from usersimcrs.metrics.registry import family_names, metric_families

ID_COLUMNS = ["conversation_id", "agent_id", "user_id", "index", "status"]


@dataclass
class MetricTables:
    """`conversations`: one row per conversation; `turns`: long table (conversation_id, turn, metric, value)."""

    conversations: pd.DataFrame
    turns: pd.DataFrame
    horizon: int


def profile_user(dialogue: Dialogue) -> str:
    """The simulated user's ID (profile.user_id), which pairs conversations across CRSs."""
    return dialogue.profile.user_id if dialogue.profile is not None else dialogue.user_id


def corpus_horizon(dialogues: Iterable[Dialogue], options: MetricOptions) -> int:
    """T for the per-turn curves: the configured horizon, else the most system turns of any dialogue."""
    if options.horizon is not None:
        return options.horizon
    return max([len(d.agent_turns) for d in dialogues] + [1])


def compute_metrics(dialogues: list[Dialogue], options: MetricOptions | None = None) -> MetricTables:
    """Every registered (or selected) family on every dialogue."""
    options = options or MetricOptions()
    ctx = MetricContext(options=options, horizon=corpus_horizon(dialogues, options))
    families = [metric_families.get(name)() for name in family_names(options.families)]
    rows = []
    turn_rows = []
    for dialogue in dialogues:
        row: dict[str, object] = {
            "conversation_id": dialogue.conversation_id,
            "agent_id": dialogue.agent_id,
            "user_id": profile_user(dialogue),
            "index": dialogue.index,
            "status": dialogue.status,
        }
        for family in families:
            row.update(family.per_conversation(dialogue, ctx))
            for metric, curve in family.per_turn(dialogue, ctx).items():
                for turn, value in enumerate(curve, start=1):
                    if value is not None:
                        turn_rows.append(
                            {
                                "conversation_id": dialogue.conversation_id,
                                "turn": turn,
                                "metric": metric,
                                "value": value,
                            }
                        )
        rows.append(row)
    conversations = pd.DataFrame(rows, columns=_column_order(rows))
    turns = pd.DataFrame(turn_rows, columns=["conversation_id", "turn", "metric", "value"])
    return MetricTables(conversations=conversations, turns=turns, horizon=ctx.horizon)


def _column_order(rows: list[dict[str, object]]) -> list[str]:
    seen: dict[str, None] = {c: None for c in ID_COLUMNS}
    for row in rows:
        for key in row:
            seen.setdefault(key, None)
    return list(seen)


def turn_curves(turns: pd.DataFrame, conversation_ids: Iterable[str] | None = None) -> pd.DataFrame:
    """Per-turn means (PC_t, Recall@(t,k), Jaccard) with PCIR_t added for each coverage curve.

    Returns a long table (metric, turn, value, n); coverage rows are PC_t, `pcir@k` rows are PCIR_t.
    """
    data = turns if conversation_ids is None else turns[turns["conversation_id"].isin(set(conversation_ids))]
    if data.empty:
        return pd.DataFrame(columns=["metric", "turn", "value", "n"])
    grouped = data.groupby(["metric", "turn"])["value"].agg(["mean", "count"]).reset_index()
    grouped.columns = ["metric", "turn", "value", "n"]
    extra = []
    for metric, part in grouped[grouped["metric"].str.startswith("pc@")].groupby("metric"):
        part = part.sort_values("turn")
        previous = part["value"].shift(1, fill_value=0.0)
        rate = part.assign(metric="pcir@" + metric.split("@", 1)[1], value=part["value"] - previous)
        extra.append(rate)
    out = pd.concat([grouped, *extra], ignore_index=True) if extra else grouped
    return out.sort_values(["metric", "turn"]).reset_index(drop=True)
