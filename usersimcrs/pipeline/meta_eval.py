"""`meta_eval`: how far automatic scores (rule metrics, judges) agree with human references and votes.

Input: a run folder or matrix whose conversations carry a human reference in
``Dialogue.metadata["reference"]`` (e.g. a `convert crsarena-dial` output), or references from a CSV.
Scores: rule metric names (computed here, nothing is written into the input folder), judge columns
``<judge>:<name>`` from the runs' judgments.jsonl, or from outside judgment files. The human ranking
of systems comes from the votes (votes.jsonl next to the matrix, or a given file) when there are
any, else from the mean reference per system. Failed or empty conversations are left out, counted
per input and reason (`MetaEvalResult.left_out`, left_out.csv). Writes meta_eval.csv,
meta_eval_systems.csv, human_ranking.csv (with votes), left_out.csv and report.html into the output
folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from usersimcrs.analysis.aspect_agreement import SYSTEMS_NOT_CONVERSATIONS
from usersimcrs.analysis.battles import (
    DEFAULT_ALPHA,
    BattleRanking,
    battles_from_votes,
    rank_systems,
)
from usersimcrs.analysis.compare import judge_columns
from usersimcrs.analysis.left_out import LEFT_OUT_CSV, LeftOut, completed, left_out_line, left_out_table
from usersimcrs.analysis.meta_eval import (
    DEFAULT_REFERENCE_KEYS,
    HUMAN_RANKING_CSV,
    META_EVAL_CSV,
    SYSTEMS_CSV,
    HumanSource,
    MetaEvalResult,
    StatRow,
    SystemScore,
    conversation_stats,
    label_kind,
    ranks_systems_only,
    system_stats,
)
from usersimcrs.analysis.reference import read_judge_records, read_reference
from usersimcrs.core.dialogue import AGENT
from usersimcrs.core.votes import VOTES, read_votes
from usersimcrs.errors import DataError, UserError
from usersimcrs.judges.base import JudgmentRecord
from usersimcrs.metrics.compute import compute_metrics
from usersimcrs.metrics.options import MetricOptions
from usersimcrs.pipeline.aspect_meta_eval import TRAINED_REASON, judgment_spec, training_notes, training_overlap
from usersimcrs.pipeline.sources import RunSource, load_sources


def _reference_value(dialogue_metadata: dict[str, Any], key: str | None) -> float | None:
    if key is None:
        return None
    reference = dialogue_metadata.get("reference")
    if not isinstance(reference, dict):
        return None
    value = reference.get(key)
    if isinstance(value, bool):
        return float(value)
    return float(value) if isinstance(value, (int, float)) else None


def _reference_keys(sources: Sequence[RunSource]) -> list[str]:
    keys: dict[str, None] = {}
    for source in sources:
        for dialogue in source.run.dialogues:
            reference = dialogue.metadata.get("reference")
            if isinstance(reference, dict):
                for key, value in reference.items():
                    if isinstance(value, (int, float)):
                        keys.setdefault(str(key), None)
    return list(keys)


def choose_reference_key(available: Sequence[str], requested: str | None) -> str:
    """The reference to compare with: the requested key, else the first of the usual names, else the only one."""
    if requested:
        if available and requested not in available:
            raise DataError(f"no reference {requested!r} on the conversations; available: {', '.join(available)}")
        return requested
    for key in DEFAULT_REFERENCE_KEYS:
        if key in available:
            return key
    if len(available) == 1:
        return available[0]
    if not available:
        raise DataError(
            "no human reference on the conversations (metadata.reference) and no --reference file; "
            "convert a human corpus (e.g. `usersimcrs convert crsarena-dial`), pass --reference CSV, or "
            "give pairwise votes (--votes FILE) to compare the systems' ranking only"
        )
    raise DataError(f"several references ({', '.join(available)}); choose one with --reference-key")


def _conversation_table(
    sources: Sequence[RunSource],
    scores: Sequence[str],
    reference_key: str | None,
    outside: list[JudgmentRecord],
    reference_csv: pd.DataFrame | None,
    left_out: list[LeftOut],
) -> pd.DataFrame:
    """One row per completed conversation: system, reference and every requested score (the others are
    counted into `left_out`)."""
    rule_scores = [s for s in scores if ":" not in s]
    options = MetricOptions.model_validate({"satisfaction": "satisfaction" in rule_scores})
    frames = []
    for source in sources:
        dialogues, dropped = completed(source.run.dialogues, source.name)
        left_out += dropped
        if not dialogues:
            continue
        base = pd.DataFrame(
            {
                "conversation_id": [d.conversation_id for d in dialogues],
                "system": [source.crs or d.agent_id for d in dialogues],
                "reference": [_reference_value(d.metadata, reference_key) for d in dialogues],
            }
        )
        if rule_scores:
            metrics = compute_metrics(dialogues, options).conversations
            missing = [s for s in rule_scores if s not in metrics.columns]
            if missing:
                known = [
                    c for c in metrics.columns if c not in ("conversation_id", "agent_id", "user_id", "index", "status")
                ]
                raise DataError(
                    f"unknown score(s) {', '.join(missing)}; rule metrics: {', '.join(map(str, known))}; "
                    "judge scores are named <judge>:<name>"
                )
            base = base.merge(metrics[["conversation_id", *rule_scores]], on="conversation_id", how="left")
        judged = judge_columns(list(source.run.judgments) + outside)
        if not judged.empty:
            base = base.merge(judged, on="conversation_id", how="left")
        frames.append(base)
    if not frames:
        raise DataError(
            "no completed conversations to evaluate" + (f" ({left_out_line(left_out)})" if left_out else "")
        )
    table = pd.concat(frames, ignore_index=True)
    if reference_csv is not None:
        part = reference_csv[reference_csv["name"] == reference_key]
        values = part.groupby("conversation_id")["value"].mean()
        table["reference"] = table["conversation_id"].map(values).astype(float)
    for score in scores:
        if score not in table.columns:
            available = sorted(c for c in table.columns if ":" in str(c))
            raise DataError(f"no judge score {score!r} in the judgments; available: {', '.join(available) or 'none'}")
        table[score] = pd.to_numeric(table[score], errors="coerce").astype(float)
    return table


LENGTH_BASELINE = "conversation length"
WORDS_BASELINE = "assistant words per turn"
IDENTITY_BASELINE = "CRS identity"
BASELINES = (LENGTH_BASELINE, WORDS_BASELINE, IDENTITY_BASELINE)
"""Scores any evaluator must beat to be worth its cost: utterances in the conversation, mean words per
assistant turn, and the mean reference of the other labelled conversations of the same CRS (leave one
conversation out: it knows only which CRS spoke)."""


def _baseline_columns(sources: Sequence[RunSource], table: pd.DataFrame) -> pd.DataFrame:
    """`table` with the three baseline scores added (see BASELINES)."""
    length: dict[str, float] = {}
    words: dict[str, float] = {}
    for source in sources:
        for d in source.run.dialogues:
            length[d.conversation_id] = float(len(d.utterances))
            replies = [len(u.text.split()) for u in d.utterances if u.participant == AGENT]
            if replies:
                words[d.conversation_id] = sum(replies) / len(replies)
    table = table.copy()
    table[LENGTH_BASELINE] = table["conversation_id"].map(length).astype(float)
    table[WORDS_BASELINE] = table["conversation_id"].map(words).astype(float)
    known = table["reference"].notna()
    sums = table["reference"].where(known, 0.0).groupby(table["system"]).transform("sum")
    counts = known.astype(int).groupby(table["system"]).transform("sum")
    own = table["reference"].where(known, 0.0)
    rest = counts - known.astype(int)
    table[IDENTITY_BASELINE] = ((sums - own) / rest.where(rest > 0)).astype(float)
    return table


def _system_rows(
    name: str, table: pd.DataFrame, score: dict[str, float], human: dict[str, float], ranking: BattleRanking | None
) -> list[SystemScore]:
    battles = {s.system: s.battles for s in ranking.systems} if ranking else {}
    rows = []
    for system in sorted(set(table["system"]) | set(human)):
        part = table[table["system"] == system]
        n = int(pd.to_numeric(part[name], errors="coerce").notna().sum())
        human_n = battles.get(system, 0) if ranking else int(part["reference"].notna().sum())
        rows.append(
            SystemScore(
                score=name, system=str(system), mean=score.get(system), n=n, human=human.get(system), human_n=human_n
            )
        )
    return rows


def _global_notes(
    rows: list[StatRow], table: pd.DataFrame, ranking: BattleRanking | None, n_labelled: int | None
) -> list[str]:
    """Caveats of the whole result; `n_labelled` None: no per-conversation reference (system level only)."""
    notes = []
    if n_labelled is None:
        notes.append(
            "conversation level not checked: the conversations carry no per-conversation reference "
            "(metadata.reference, or --reference CSV); only the systems' ranking is compared with the votes"
        )
    elif n_labelled < 30:
        notes.append(
            f"only {n_labelled} labelled conversations: conversation-level CIs are wide; "
            "treat every figure here as a rough indication, not evidence"
        )
    if any(r.level == "system" and r.n < 5 for r in rows):
        notes.append(
            "fewer than 5 systems have both a score and a human score: system-level statistics are "
            "close to uninformative"
        )
    for row in rows:
        if ranks_systems_only(row):
            notes.append(
                f"{row.score} {SYSTEMS_NOT_CONVERSATIONS}: its {row.statistic.replace('_', '-')} CI "
                f"[{row.ci_low:.2f}, {row.ci_high:.2f}] contains the chance value"
            )
    spanning = sorted({r.score for r in rows if any("spans the chance" in c for c in r.caveats())})
    if spanning:
        notes.append(
            f"some CIs span the chance value (0.5 for AUC and pairwise accuracy, 0 for correlations) for "
            f"{', '.join(spanning)}: no evidence of agreement with humans there"
        )
    if ranking is not None:
        if ranking.components > 1:
            notes.append(
                f"the votes form {ranking.components} unconnected groups of systems; BT scores across groups "
                f"are tied together only by the regularisation (alpha {ranking.alpha:g})"
            )
        unscored = sorted({s.system for s in ranking.systems} - set(table["system"]))
        if unscored:
            notes.append(
                f"systems with votes but no conversations here (not in the system-level figures): {', '.join(unscored)}"
            )
    return notes


def meta_eval(
    path: str | Path,
    scores: Sequence[str],
    output: str | Path | None = None,
    *,
    seed: int = 0,
    resamples: int = 1000,
    reference_key: str | None = None,
    reference_csv: str | Path | None = None,
    votes: str | Path | None = None,
    judgments: Sequence[str | Path] = (),
    human: HumanSource = "auto",
    alpha: float = DEFAULT_ALPHA,
    report: bool = True,
    dedupe: bool = False,
    baselines: bool = True,
    model: str | Path | None = None,
    include_training: bool = False,
) -> MetaEvalResult:
    """Agreement of each score with the human reference (conversation level, pooled and within each CRS)
    and ranking (system level), beside the baselines (conversation length, assistant words per turn, CRS
    identity) unless `baselines=False`.

    A run whose conversation IDs repeat is refused with the count unless `dedupe` (first line of each ID).
    `model`: a learned evaluator's model file; the conversations it was trained on are left out of every
    figure unless `include_training`.
    """
    scores = [s.strip() for s in scores if s.strip()]
    if not scores:
        raise UserError("give at least one score (e.g. --scores satisfaction,turns)")
    if resamples < 0:
        raise UserError("--resamples must be 0 or more")
    sources = load_sources(path, dedupe=dedupe)
    ref_table = read_reference(reference_csv) if reference_csv else None
    available = sorted(set(ref_table["name"])) if ref_table is not None else _reference_keys(sources)
    votes_path = Path(votes) if votes else Path(path) / VOTES
    if human == "votes" and not votes_path.exists():
        raise DataError(f"{votes_path}: no votes file (needed for --human votes)")
    vote_records = read_votes(votes_path) if human != "labels" and votes_path.exists() else []
    # no per-conversation reference (a simulated matrix): the votes alone give the system level
    system_only = not available and not reference_key and bool(vote_records)
    if human == "votes" and not vote_records:
        raise DataError(f"{votes_path}: no votes in the file (needed for --human votes)")
    key = None if system_only else choose_reference_key(available, reference_key)

    specs = [judgment_spec(str(spec)) for spec in judgments]
    outside = [r for name, file in specs for r in read_judge_records(file, name)]
    left_out: list[LeftOut] = []
    table = _conversation_table(sources, scores, key, outside, ref_table, left_out)
    trained = training_overlap(model, table["conversation_id"].tolist())
    total = len(table)
    if trained and not include_training:
        table = table[~table["conversation_id"].isin(trained)].reset_index(drop=True)
        left_out.append(LeftOut(source=str(model), reason=TRAINED_REASON, conversations=len(trained), of=total))
    if baselines:  # the CRS-identity baseline needs per-conversation references
        table = _baseline_columns(sources, table)
        wanted = BASELINES if key is not None else (LENGTH_BASELINE, WORDS_BASELINE)
        scores = [*scores, *(b for b in wanted if b not in scores)]
    labelled = table[table["reference"].notna()]
    if labelled.empty and key is not None:
        raise DataError(f"no conversation carries the reference {key!r}")
    kind = label_kind(labelled["reference"].tolist()) if key is not None else None

    ranking = None
    battles = None
    if vote_records:
        battles = battles_from_votes(vote_records)
        ranking = rank_systems(battles, resamples=resamples, seed=seed, alpha=alpha)
    rows: list[StatRow] = []
    systems: list[SystemScore] = []
    for i, score in enumerate(scores):
        if key is not None:
            rows += conversation_stats(
                score,
                list(labelled[score]),
                list(labelled["reference"]),
                resamples=resamples,
                seed=seed + 1000 * i,
                systems=list(labelled["system"].astype(str)),
                within=score != IDENTITY_BASELINE,
            )
        # the score side of the system ranking uses every conversation with the score, labelled or not
        sys_rows, means, human_scores = system_stats(
            score, table, battles=battles, resamples=resamples, seed=seed + 1000 * i + 500, alpha=alpha
        )
        rows += sys_rows
        systems += _system_rows(score, table, means, human_scores, ranking)
    result = MetaEvalResult(
        path=str(path),
        scores=list(scores),
        reference_key=key,
        reference_kind=kind,
        human_source="votes" if ranking else "labels",
        n_conversations=len(table),
        n_labelled=len(labelled),
        rows=rows,
        systems=systems,
        human_ranking=ranking,
        notes=_global_notes(rows, table, ranking, len(labelled) if key is not None else None)
        + training_notes(len(trained), total, model, include_training),
        resamples=resamples,
        seed=seed,
        left_out=left_out,
    )
    if output is not None:
        write_meta_eval(result, output, report=report)
    return result


def write_meta_eval(result: MetaEvalResult, output: str | Path, *, report: bool = True) -> None:
    """meta_eval.csv (+ systems, human ranking) and report.html in `output`; file names go to `result.files`."""
    folder = Path(output)
    folder.mkdir(parents=True, exist_ok=True)
    result.table().to_csv(folder / META_EVAL_CSV, index=False)
    result.systems_table().to_csv(folder / SYSTEMS_CSV, index=False)
    left_out_table(result.left_out).to_csv(folder / LEFT_OUT_CSV, index=False)
    files = [META_EVAL_CSV, SYSTEMS_CSV, LEFT_OUT_CSV]
    if result.human_ranking is not None:
        ranking = pd.DataFrame([s.model_dump() for s in result.human_ranking.systems])
        ranking.to_csv(folder / HUMAN_RANKING_CSV, index=False)
        files.append(HUMAN_RANKING_CSV)
    if report:
        # lazy: matplotlib only when a report is written
        from usersimcrs.report.meta_eval_report import build_meta_eval_report

        build_meta_eval_report(result).write(folder)
        files.append("report.html")
    result.output = str(folder)
    result.files = files
