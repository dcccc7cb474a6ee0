"""Run every metric family over a set of dialogues: one row per conversation, one curve per turn."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import pandas as pd

from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.shared_resources import SharedResources
from usersimcrs.metrics.base import MetricContext, MetricFamily, happened
from usersimcrs.metrics.options import MetricOptions
from usersimcrs.metrics.registry import family_names, metric_families

ID_COLUMNS = ["conversation_id", "agent_id", "user_id", "index", "status"]


@dataclass
class MetricTables:
    """`conversations`: one row per conversation; `turns`: long table (conversation_id, turn, metric, value);
    `metrics`: the metric columns of `conversations` (everything but the IDs)."""

    conversations: pd.DataFrame
    turns: pd.DataFrame
    horizon: int
    metrics: list[str]


def profile_user(dialogue: Dialogue) -> str:
    """The simulated user's ID (profile.user_id), which pairs conversations across CRSs."""
    return dialogue.profile.user_id if dialogue.profile is not None else dialogue.user_id


def corpus_horizon(dialogues: Iterable[Dialogue], options: MetricOptions) -> int:
    """T for the per-turn curves: the configured horizon, else the most system turns of any dialogue."""
    if options.horizon is not None:
        return options.horizon
    return max([len(d.agent_turns) for d in dialogues] + [1])


def compute_metrics(
    dialogues: list[Dialogue], options: MetricOptions | None = None, resources: SharedResources | None = None
) -> MetricTables:
    """Every registered (or selected) family on every dialogue (`resources`: the command's loaded models).

    On a conversation that did not happen (failed, or no system turn) only the families' outcome
    metrics are kept (`MetricFamily.kept_on_failure`; on one that ended without an error before any
    system turn, `kept_without_system_turn`: its length too); the rest is missing, never a number that
    describes a conversation nobody had. A family's `failure_outcomes` then fill such conversations
    where the set measures the metric elsewhere (success 0: a broken conversation did not succeed).
    """
    options = options or MetricOptions()
    ctx = MetricContext(
        options=options,
        horizon=corpus_horizon(dialogues, options),
        shared=resources if resources is not None else SharedResources(),
    )
    families = [metric_families.get(name)() for name in family_names(options.families)]
    rows = []
    turn_rows = []
    broken: list[dict[str, object]] = []
    # per-turn curves end at the last turn any conversation reached: a configured horizon past it (the
    # demo's 6 for a simulator with max_turns 3) would draw coverage carried over turns nobody had
    reached = max((len(d.agent_turns) for d in dialogues), default=0)
    for dialogue in dialogues:
        row: dict[str, object] = {
            "conversation_id": dialogue.conversation_id,
            "agent_id": dialogue.agent_id,
            "user_id": profile_user(dialogue),
            "index": dialogue.index,
            "status": dialogue.status,
        }
        took_place = happened(dialogue)
        if not took_place:
            broken.append(row)
        for family in families:
            kept = family.kept_on_failure if dialogue.status == "failed" else family.kept_without_system_turn
            values = family.per_conversation(dialogue, ctx)
            if not took_place:
                values = {m: (v if kept(m) else None) for m, v in values.items()}
            row.update(values)
            for metric, curve in family.per_turn(dialogue, ctx).items():
                if not took_place and not kept(metric):
                    continue
                for turn, value in enumerate(curve[:reached], start=1):
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
    _fill_failure_outcomes(rows, broken, families)
    columns = _column_order(rows)
    conversations = pd.DataFrame(rows, columns=columns)
    turns = pd.DataFrame(turn_rows, columns=["conversation_id", "turn", "metric", "value"])
    metrics = [c for c in columns if c not in ID_COLUMNS]
    return MetricTables(conversations=conversations, turns=turns, horizon=ctx.horizon, metrics=metrics)


def _fill_failure_outcomes(
    rows: list[dict[str, object]], broken: list[dict[str, object]], families: list[MetricFamily]
) -> None:
    """Give conversations that did not happen their families' failure outcome where the set measures it."""
    if not broken:
        return
    broken_ids = {id(row) for row in broken}
    for family in families:
        for metric, value in family.failure_outcomes.items():
            measured = any(row.get(metric) is not None for row in rows if id(row) not in broken_ids)
            if not measured:
                continue
            for row in broken:
                if row.get(metric) is None:
                    row[metric] = value


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
