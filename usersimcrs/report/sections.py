"""Report sections shared by the reports: validity, per-turn curves, judges, intervals, what was left out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Iterable

import numpy as np
import pandas as pd

from usersimcrs.analysis.factors import inter_factor_matrix, mean_abs_off_diagonal, stability
from usersimcrs.analysis.failures import summarize_failures
from usersimcrs.analysis.judgments import judgments_table
from usersimcrs.analysis.left_out import LeftOut, left_out_sentence
from usersimcrs.analysis.summary import describe
from usersimcrs.core.dialogue import Dialogue, ItemRef
from usersimcrs.judges.base import Judgment, JudgmentRecord
from usersimcrs.metrics.validity import FLAG_SPECS, FLAGS, SUMMARY_FLAGS, ValidityOptions, is_checked, is_set
from usersimcrs.report import plots
from usersimcrs.report.html import Report
from usersimcrs.report.tables import mean_with_ci

PER_TURN_FAMILIES = [
    ("pc@", "Preference Coverage PC_t@k", "PC_t"),
    ("recall@", "Recall@(t,k)", "Recall"),
    ("jaccard", "Jaccard distance to the previous list", "distance"),
]


ROLE = {
    "crs": "counts against the CRS",
    "simulator": "excluded (simulator broke it)",
    "toolkit": "excluded (toolkit broke it)",
    "judge": "that judgment left out",
    "design": "information",
    "any": "see the three sides below",
}


def validity_table(conversations: pd.DataFrame, options: ValidityOptions | None = None) -> pd.DataFrame:
    """Each flag with its side and what it does, the conversations with it, where it was checked, and the share.

    An unchecked flag says "not checked". `crs_failure`, `excluded` and `valid` close the table: the
    CRS's own failures (kept in "all"), what the simulator or toolkit broke (left out of everything),
    and the sensitivity subset.
    """
    options = options or ValidityOptions()
    rows = []
    for flag in [*FLAGS, *SUMMARY_FLAGS]:
        column = conversations[flag] if flag in conversations else pd.Series([], dtype=object)
        count, checked = int(is_set(column).sum()), int(is_checked(column).sum())
        spec = FLAG_SPECS.get(flag)
        if spec is None:
            side, role = "", {"crs_failure": "in 'all', counted", "excluded": "left out", "valid": "sensitivity"}[flag]
        else:
            side = spec.side
            role = ROLE[spec.side]
            if spec.side in ("simulator", "toolkit") and flag not in options.excluding:
                role = "kept (not excluding in this config)"
            if flag in options.invalidating:
                role += "; leaves 'valid'"
        rows.append(
            {
                "flag": flag,
                "side": side,
                "effect": role,
                "conversations": count,
                "checked": checked,
                "share": count / checked if checked else float("nan"),
                "note": "" if checked else "not checked",
            }
        )
    return pd.DataFrame(rows, columns=["flag", "side", "effect", "conversations", "checked", "share", "note"])


def metric_table(summary: pd.DataFrame, *, skip: Iterable[str] = (*FLAGS, *SUMMARY_FLAGS)) -> pd.DataFrame:
    """Rows = metrics; columns = 'all' and 'valid' as 'mean [95% CI]' and their n."""
    skip = set(skip)
    data = summary[~summary["metric"].isin(skip) & ~summary["metric"].str.startswith(("end_reason[", "items_"))].copy()
    data["value"] = mean_with_ci(data)
    wide = data.pivot(index="metric", columns="subset", values="value")
    counts = data.pivot(index="metric", columns="subset", values="n")
    order = list(dict.fromkeys(data["metric"]))
    out = pd.DataFrame({"metric": order})
    for subset in ("all", "valid"):
        if subset in wide:
            out[f"{subset}: mean [95% CI]"] = [wide.loc[m, subset] for m in order]
            out[f"{subset}: n"] = [int(counts.loc[m, subset]) for m in order]
    return out


def unmeasured_metrics(table: pd.DataFrame) -> list[str]:
    """Metrics of a `metric_table` with n = 0 in every subset: nobody could measure them."""
    counts = [c for c in table.columns if str(c).endswith(": n")]
    if not counts or table.empty:
        return []
    return [str(m) for m, zero in zip(table["metric"], (table[counts] == 0).all(axis=1)) if zero]


def end_reason_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Share of each end reason on all and on valid conversations."""
    data = summary[summary["metric"].str.startswith("end_reason[")]
    if data.empty:
        return pd.DataFrame(columns=["end_reason"])
    wide = data.pivot(index="metric", columns="subset", values="mean").reset_index()
    wide.columns.name = None
    wide["metric"] = wide["metric"].str.slice(len("end_reason["), -1)
    return wide.rename(columns={"metric": "end_reason"})


def per_turn_panels(by_turn: pd.DataFrame, prefix: str, *, group: str | None = None) -> dict[str, dict[str, pd.Series]]:
    """Panels of per-turn curves: one panel per metric (e.g. pc@10), one line per group (or one line)."""
    data = (
        by_turn[by_turn["metric"].str.startswith(prefix)]
        if prefix != "jaccard"
        else by_turn[by_turn["metric"] == "jaccard"]
    )
    panels: dict[str, dict[str, pd.Series]] = {}
    metrics = sorted(data["metric"].unique(), key=_metric_order)
    if group is None and metrics:  # one run: one panel, one line per cut-off k
        return {prefix.strip("@"): {m: data[data["metric"] == m].set_index("turn")["value"] for m in metrics}}
    for metric in metrics:
        part = data[data["metric"] == metric]
        panels[metric] = {str(g): p.set_index("turn")["value"] for g, p in part.groupby(group)}
    return panels


def _metric_order(metric: str) -> tuple[str, int]:
    name, _, k = metric.partition("@")
    return (name, int(k) if k.isdigit() else 0)


def informative_panels(
    panels: dict[str, dict[str, pd.Series]],
) -> tuple[dict[str, dict[str, pd.Series]], list[str]]:
    """Panels worth drawing, and notes on the rest.

    A panel identical to an earlier one (e.g. Recall@10 = @20 = @50 when no list is longer than 5)
    is merged into that panel's title; a panel where every line is 0 on every turn is dropped and
    said in a note (lines at zero hide each other).
    """
    kept: dict[str, dict[str, pd.Series]] = {}
    aliases: dict[str, list[str]] = {}
    notes = []
    zero = []
    for name, series in panels.items():
        values = [v for s in series.values() for v in s.dropna().tolist()]
        if values and all(v == 0 for v in values):
            zero.append(name)
            continue
        twin = next((k for k, other in kept.items() if _same_panel(other, series)), None)
        if twin is not None:
            aliases[twin].append(name)
            continue
        kept[name] = series
        aliases[name] = []
    if zero:
        notes.append(f"{', '.join(zero)}: 0 for every system on every turn (not drawn)")
    titled = {(f"{k} (= {', '.join(aliases[k])})" if aliases[k] else k): v for k, v in kept.items()}
    return titled, notes


def _same_panel(a: dict[str, pd.Series], b: dict[str, pd.Series]) -> bool:
    if set(a) != set(b):
        return False
    return all(a[k].sort_index().round(12).equals(b[k].sort_index().round(12)) for k in a)


BOUNDED = ("pc@", "recall@", "jaccard")  # metrics in [0, 1]


def _y_range(prefix: str, panels: dict[str, dict[str, pd.Series]]) -> tuple[float, float] | None:
    """From 0 to a little above the largest value (at most 1) for metrics in [0, 1]; small values stay visible."""
    if prefix not in BOUNDED:
        return None
    values = [v for panel in panels.values() for s in panel.values() for v in s.dropna().tolist()]
    top = max(values, default=0.0)
    return (0.0, 1.0 if prefix == "jaccard" else min(1.0, max(0.05, top * 1.15)))


def add_per_turn_plots(
    report: Report,
    by_turn: pd.DataFrame,
    *,
    group: str | None = None,
    label: str = "",
    styles: dict[str, dict[str, object]] | None = None,
    horizon: int | None = None,
) -> None:
    """PC, Recall and Jaccard per turn (one figure each, informative panels only), and the PC/PCIR table."""
    notes = []
    for prefix, title, ylabel in PER_TURN_FAMILIES:
        panels, dropped = informative_panels(per_turn_panels(by_turn, prefix, group=group))
        notes += dropped
        if not panels:
            continue
        if len(panels) > 4:  # keep the figure readable: the cut-offs reported most often
            keep = [m for m in panels if m.split(" ")[0].endswith(("@5", "@10", "@20", "@50"))][:4] or list(panels)[:4]
            panels = {m: panels[m] for m in keep}
        name = prefix.strip("@").replace("@", "") + "_per_turn" + (f"_{label}" if label else "")
        report.plot(
            name,
            plots.curves_per_turn(
                panels,
                ylabel=ylabel,
                title=title + (f" — {label}" if label else ""),
                styles=styles,
                horizon=horizon,
                ylim=_y_range(prefix, panels),
            ),
            caption=f"{title} per system turn" + (f" ({label})" if label else "") + ".",
        )
    if notes:
        report.text("Not drawn: " + "; ".join(notes) + ".")
    coverage = coverage_table(by_turn, group=group)
    if not coverage.empty:
        report.table(
            "coverage_per_turn" + (f"_{label}" if label else ""),
            coverage,
            digits=4,
            caption="PC_t@k and PCIR_t@k = PC_t - PC_(t-1) per turn; the last row is PCIR_avg.",
        )


def coverage_table(by_turn: pd.DataFrame, *, group: str | None = None) -> pd.DataFrame:
    """PC_t@k and PCIR_t@k per turn as columns (one row per turn, and group), with PCIR_avg as a last row."""
    data = by_turn[by_turn["metric"].str.startswith(("pc@", "pcir@"))]
    if data.empty:
        return pd.DataFrame()
    index = ([group] if group else []) + ["turn"]
    wide = data.pivot_table(index=index, columns="metric", values="value").reset_index()
    columns = sorted([c for c in wide.columns if c not in index], key=lambda m: (m.split("@")[0], _metric_order(m)[1]))
    wide = wide[index + columns]
    if "n" in data:  # users behind each turn's mean (the same for every cut-off k)
        counts = data[data["metric"].str.startswith("pc@")].groupby(index)["n"].max().rename("n").reset_index()
        wide = wide.merge(counts, on=index, how="left")
        columns = [*columns, "n"]
    averages = []
    for key, part in wide.groupby(group) if group else [(None, wide)]:
        row = {c: part[c].mean() for c in columns if c.startswith("pcir@")}
        if "n" in part:
            row["n"] = part["n"].max()
        row.update({"turn": "PCIR_avg", **({group: key} if group else {})})
        averages.append(row)
    return pd.concat([wide.astype({"turn": object}), pd.DataFrame(averages)], ignore_index=True)


def judgment_summary(
    table: pd.DataFrame, *, group: str | None = None, seed: int = 0, by_model: bool = False
) -> pd.DataFrame:
    """Mean [95% CI] per judge and name (and group, and judge model when `by_model`), with counts of
    scored and missing values."""
    keys = ["judge", "name"] + ([group] if group else []) + (["model"] if by_model else [])
    rows = []
    per_conversation = table.groupby(keys + ["conversation_id"], dropna=False)["value"].mean().reset_index()
    for key, part in per_conversation.groupby(keys, dropna=False):
        stats = describe(part["value"], seed=seed, n_resamples=1000)
        row = dict(zip(keys, key if isinstance(key, tuple) else (key,)))
        row.update(
            {
                "mean": stats["mean"],
                "ci_low": stats["ci_low"],
                "ci_high": stats["ci_high"],
                "n": stats["n"],
                "missing": int(part["value"].isna().sum()),
            }
        )
        rows.append(row)
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    out["mean [95% CI]"] = mean_with_ci(out)
    return out[keys + ["mean [95% CI]", "n", "missing", "mean"]]


def several_models(table: pd.DataFrame) -> bool:
    """Whether some judge's aspect was scored by more than one model (then scores are shown per model)."""
    if table.empty or "model" not in table:
        return False
    return bool(table.groupby(["judge", "name"])["model"].nunique().max() > 1)


def _record_dict(record: Judgment | JudgmentRecord) -> JudgmentRecord:
    """A judgment as a plain dict (records come as dicts or as `Judgment` models)."""
    return record if isinstance(record, dict) else record.model_dump()


def has_rounds(record: JudgmentRecord) -> bool:
    """Whether a judgment carries per-round scores (``raw.rounds``, as a debate's does)."""
    raw = record.get("raw")
    return isinstance(raw, dict) and isinstance(raw.get("rounds"), list) and bool(raw["rounds"])


def debate_rounds(records: list[JudgmentRecord]) -> pd.DataFrame:
    """Long table (conversation_id, role, round, score) from the debate judge's per-round scores.

    A debate that stopped early (all roles agreed) keeps its last scores in the later rounds, so
    every conversation contributes to every round's mean.
    """
    rows = []
    for record in map(_record_dict, records):
        given = record.get("raw")
        raw: dict[str, Any] = given if isinstance(given, dict) else {}
        rounds = raw.get("rounds") or []
        limit = int(raw.get("max_rounds") or len(rounds) or 0)
        last: dict[str, float | None] = {}
        for number in range(1, max(limit, len(rounds)) + 1):
            if number <= len(rounds) and isinstance(rounds[number - 1], dict):
                for role, score in rounds[number - 1].items():
                    if score is not None:
                        last[role] = float(score)
            for role, score in last.items():
                rows.append(
                    {"conversation_id": record.get("conversation_id"), "role": role, "round": number, "score": score}
                )
    return pd.DataFrame(rows, columns=["conversation_id", "role", "round", "score"])


SCOPES = {
    "valid": "valid conversations",
    "invalid": "invalid conversations",
    "counted": "conversations the CRS took part in",
}


def add_judgment_sections(
    report: Report,
    records: list[JudgmentRecord],
    *,
    valid_ids: set[str] | None = None,
    groups: pd.Series | None = None,
    group_label: str = "crs",
    seed: int = 0,
    scope: str = "valid",
    folded: bool = False,
) -> None:
    """Judge tables, factor profiles, inter-factor heatmaps, debate trajectories and stability.

    `valid_ids` are the conversations the scores are given on and `scope` names them ("valid", or
    "counted" for every conversation the CRS took part in).
    """
    if not records:
        return
    table = judgments_table(records)
    if valid_ids is not None:
        kept = table[table["conversation_id"].isin(valid_ids)]
        if kept.empty and not table.empty:  # e.g. a crashed run: show its judgments, marked, rather than nothing
            scope, valid_ids = "invalid", None
        else:
            table = kept
    if table.empty:
        return
    if groups is not None:
        table = table.assign(**{group_label: table["conversation_id"].map(groups)})
    group = group_label if groups is not None else None
    report.section("Judges", folded=folded)
    if scope == "invalid":
        report.text(
            "No valid conversation was judged: the judgments below are on INVALID conversations (failed, too "
            "short, looping or leaking) and are shown to diagnose the run, not to score the CRS.",
            note=True,
        )
    failures = int(table["value"].isna().sum())
    what = SCOPES.get(scope, f"{scope} conversations")
    report.text(
        f"{len(table)} judgments on {table['conversation_id'].nunique()} {what}; "
        f"{failures} could not be parsed and are left out of the means (never counted as 0).",
        note=failures > 0,
    )
    by_model = several_models(table)
    summary = judgment_summary(table, group=group, seed=seed, by_model=by_model)
    report.table(
        "judge_scores",
        summary.drop(columns=["mean"]),
        caption=f"Judge scores on {what}" + (", per judge model." if by_model else "."),
    )
    for judge, part in summary.groupby("judge"):
        names = part["name"].unique()
        if len(names) >= 2:
            series = [c for c in (group, "model" if by_model else None) if c]
            if series:
                labels = part[series].astype(str).agg(" / ".join, axis=1)
                profile = part.assign(series=labels).pivot(index="name", columns="series", values="mean")
            else:
                profile = part.set_index("name")[["mean"]].rename(columns={"mean": str(judge)})
            scale = _scale(table[table["judge"] == judge])
            report.plot(
                f"profile_{judge}",
                plots.grouped_bars(profile, title=f"{judge}: score profile", ylabel="mean score", ylim=scale),
                caption=f"Mean {judge} score per aspect/factor" + "".join(f" and {c}" for c in series) + ".",
            )
        scores = table[table["judge"] == judge].pivot_table(
            index="conversation_id", columns="name", values="value", aggfunc="mean"
        )
        if scores.shape[1] >= 3 and scores.dropna().shape[0] >= 3:
            matrix = inter_factor_matrix(scores)
            report.plot(
                f"correlation_{judge}",
                plots.heatmap(matrix, title=f"{judge}: Kendall tau-b between factors"),
                caption=f"Inter-factor Kendall tau-b ({judge}); mean |tau| over pairs = {mean_abs_off_diagonal(matrix):.3f}.",
            )
            report.table(f"correlation_{judge}", matrix.reset_index().rename(columns={"index": "factor"}))
        repeats = table[table["judge"] == judge]["repeat"]
        if repeats.nunique() > 1:
            report.table(
                f"stability_{judge}",
                stability(table[table["judge"] == judge]),
                caption=f"{judge}: std over repeated judge runs (per factor, and of the total).",
            )
    debate = [
        r
        for r in map(_record_dict, records)
        if has_rounds(r) and (valid_ids is None or r.get("conversation_id") in valid_ids)
    ]
    rounds = debate_rounds(debate)
    if not rounds.empty:
        if groups is not None:
            rounds[group_label] = rounds["conversation_id"].map(groups)
            lines = {f"{g} / {role}": _round_means(p) for (g, role), p in rounds.groupby([group_label, "role"])}
            overall = {f"{g} / mean": _round_means(p) for g, p in rounds.groupby(group_label)}
        else:
            lines = {role: _round_means(p) for role, p in rounds.groupby("role")}
            overall = {"mean of roles": _round_means(rounds)}
        report.plot(
            "debate_trajectories",
            plots.trajectories({**lines, **overall}, title="Debate: score per round", ylabel="score (0-100)"),
            caption="Mean score of each debate role per round (a debate that ended early keeps its last scores).",
        )
        table_rounds = (
            rounds.groupby(["round"] + ([group_label] if groups is not None else []) + ["role"])["score"]
            .mean()
            .reset_index()
        )
        report.table("debate_rounds", table_rounds, caption="Debate scores per round and role.")


def _round_means(part: pd.DataFrame) -> list[float | None]:
    means = part.groupby("round")["score"].mean()
    return [None if np.isnan(means.get(r, np.nan)) else float(means[r]) for r in range(1, int(means.index.max()) + 1)]


def _scale(table: pd.DataFrame) -> tuple[float, float] | None:
    for scale in table["scale"]:
        if isinstance(scale, (list, tuple)) and len(scale) == 2:
            return (float(scale[0]), float(scale[1]))
    return None


def failure_reasons(dialogues: Iterable[Dialogue], *, examples: int = 3) -> pd.DataFrame:
    """One row per reason of the failed conversations: count and the first example IDs (by index), most frequent first."""
    summary = summarize_failures(dialogues, examples=examples)
    rows = [{"reason": r.reason, "count": r.count, "examples": ", ".join(r.conversation_ids)} for r in summary.reasons]
    return pd.DataFrame(rows, columns=["reason", "count", "examples"])


def _position(dialogue: Dialogue) -> tuple[int, str]:
    return (dialogue.index if dialogue.index is not None else 1 << 30, dialogue.conversation_id)


TRANSCRIPT_TEXT_CHARS = 600
TRANSCRIPT_TURNS = 40


def transcript_table(dialogue: Dialogue) -> pd.DataFrame:
    """One row per utterance: position, speaker, text (shortened) and, for agent turns, the recommended items."""
    rows = []
    for position, u in enumerate(dialogue.utterances[:TRANSCRIPT_TURNS], start=1):
        text = " ".join(u.text.split())
        if len(text) > TRANSCRIPT_TEXT_CHARS:
            text = text[: TRANSCRIPT_TEXT_CHARS - 1] + "…"
        items = "; ".join(_item_label(i) for i in u.items) if u.participant == "AGENT" else ""
        rows.append({"#": position, "speaker": u.participant, "text": text, "recommended": items})
    return pd.DataFrame(rows, columns=["#", "speaker", "text", "recommended"])


def _item_label(item: ItemRef) -> str:
    """A recommended item as text; one the toolkit could not match to its collection says so."""
    label = item.title or item.raw or item.id or "?"
    if item.id is None:
        label += " [ambiguous]" if item.resolution == "ambiguous" else " [not in the collection]"
    return str(label)


def pick_transcripts(
    dialogues: list[Dialogue], flags: pd.DataFrame, *, valid: int = 2, other: int = 3
) -> list[tuple[Dialogue, str]]:
    """The first `valid` valid conversations and the first `other` invalid ones (failed first), by index, with labels.

    A valid conversation may still carry a non-invalidating flag (e.g. truncated by the turn limit);
    its label names it.
    """
    by_id = (
        flags.assign(_id=flags["conversation_id"].astype(str)).drop_duplicates("_id", keep="last").set_index("_id")
        if len(flags)
        else flags
    )
    good: list[tuple[Dialogue, str]] = []
    bad: list[tuple[Dialogue, str]] = []
    for d in sorted(dialogues, key=_position):
        row = by_id.loc[d.conversation_id] if d.conversation_id in by_id.index else None
        set_flags = [f for f in FLAGS if row is not None and f in row and is_set(pd.Series([row[f]])).iloc[0]]
        is_valid = bool(row["valid"]) if row is not None and "valid" in row else d.status != "failed"
        label = ("valid" if is_valid else "invalid") + (", flags: " + ", ".join(set_flags) if set_flags else "")
        (good if is_valid else bad).append((d, label))
    bad.sort(key=lambda pair: (pair[0].status != "failed", _position(pair[0])))
    return good[:valid] + bad[:other]


def add_transcripts(
    report: Report, dialogues: list[Dialogue], flags: pd.DataFrame, *, valid: int = 2, other: int = 3
) -> None:
    """A few readable conversations: the first valid ones and the first failed or flagged ones."""
    picked = pick_transcripts(dialogues, flags, valid=valid, other=other)
    if not picked:
        return
    report.section("Transcripts", folded=True)
    shown_valid = sum(1 for _, label in picked if label.startswith("valid"))
    shown_other = len(picked) - shown_valid
    parts = []
    if shown_valid:
        parts.append(f"the first {shown_valid} valid conversation{'s' if shown_valid != 1 else ''}")
    if shown_other:
        parts.append(f"the first {shown_other} flagged or failed one{'s' if shown_other != 1 else ''} (failed first)")
    report.text(
        f"{' and '.join(parts).capitalize()}, in run order "
        f"(at most {TRANSCRIPT_TURNS} utterances each, long texts shortened)."
    )
    for d, label in picked:
        report.heading(f"{d.conversation_id} ({label})")
        ending = f"status {d.status}; end reason {d.end_reason or '–'}"
        if d.error:
            ending += f"; error: {' '.join(str(d.error).split())[:300]}"
        report.text(ending, note=d.status == "failed")
        report.table(f"transcript_{d.conversation_id}", transcript_table(d))


def add_interval_plot(
    report: Report,
    name: str,
    rows: pd.DataFrame,
    *,
    label: str,
    xlabel: str,
    title: str,
    caption: str,
    value: str = "value",
    reference: float | None = None,
) -> None:
    """A plot of one point per `label` with its CI whiskers (`ci_low` to `ci_high`); none when `rows` is empty."""
    if rows.empty:
        return
    report.plot(
        name,
        plots.interval_bars(
            rows,
            label=label,
            value=value,
            low="ci_low",
            high="ci_high",
            xlabel=xlabel,
            title=title,
            reference=reference,
        ),
        caption=caption,
    )


def add_left_out_notes(report: Report, left_out: Sequence[LeftOut], notes: Iterable[str] = ()) -> None:
    """Notes naming the conversations a comparison left out and why (when any were), then the result's notes."""
    sentence = left_out_sentence(left_out)
    if sentence is not None:
        report.text(sentence, note=True)
    for note in notes:
        report.text(note, note=True)
