"""What the admin page shows: live progress per task, agreement so far, and every participant."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.studio.service import StudyService


def admin_overview(service: StudyService) -> dict[str, Any]:
    """Counts per task, per CRS, per battle pair; annotation coverage and alpha; Turing accuracy."""
    # lazy: pandas only when the admin page asks for the overview
    from usersimcrs.studio.aggregate import agreement, annotation_tables, turing_result

    state, study = service.state, service.study
    tasks = study.config.tasks
    out: dict[str, Any] = {
        "participants": len(state.participants),
        "completed": len(state.completions),
        "records": len(state.records),
    }
    crs: dict[str, dict[str, int]] = defaultdict(lambda: {"held": 0, "finished": 0, "turns": 0, "failures": 0})
    for conversation in state.conversations.values():
        row = crs[conversation.crs]
        row["held"] += 1
        row["finished"] += conversation.end is not None
        row["turns"] += conversation.user_turns
        row["failures"] += sum(1 for e in conversation.exchanges if e.error is not None)
    out["crs"] = dict(sorted(crs.items()))
    if tasks.battle is not None:
        pairs: dict[str, Counter[str]] = defaultdict(Counter)
        for assignment in state.assignments.values():
            if assignment.task == "battle":
                key = " vs ".join(sorted(assignment.crs))
                pairs[key]["assigned"] += 1
                vote = state.votes.get(assignment.assignment_id)
                if vote is not None:
                    winner = "tie" if vote.outcome == "tie" else assignment.crs[0 if vote.outcome == "a" else 1]
                    pairs[key][f"won by {winner}" if winner != "tie" else "tie"] += 1
        out["battles"] = {k: dict(v) for k, v in sorted(pairs.items())}
    if tasks.annotate is not None and study.rubric is not None:
        tables = annotation_tables(state, exclude_failed_gold=tasks.annotate.exclude_failed_gold)
        per_conversation = Counter(
            tables.table[tables.table["level"] == "dialogue"].groupby(["source", "conversation_id"])["rater"].nunique()
        )
        candidates = len(service.pools.candidates())
        rated = sum(per_conversation.values())
        coverage = {str(n): count for n, count in sorted(per_conversation.items())}
        coverage["0"] = candidates - rated
        out["annotate"] = {
            "conversations": candidates,
            "k": tasks.annotate.k,
            "coverage": dict(sorted(coverage.items(), key=lambda kv: int(kv[0]))),
            "gold_checks": tables.gold_checks,
            "gold_passed": tables.gold_passed,
            "excluded_annotators": tables.excluded_annotators,
            "agreement": agreement(tables.table, study.rubric).to_dict("records"),
        }
    if tasks.turing is not None:
        out["turing"] = turing_result(state, seed=study.config.seed, resamples=200).__dict__
    return out


def participant_rows(service: StudyService, base_url: str) -> list[dict[str, Any]]:
    """One row per participant: origin, steps done, gold checks, completion, personal link."""
    state = service.state
    steps = len(service.study.plan())
    gold: dict[str, list[bool]] = defaultdict(list)
    for annotation in state.annotations.values():
        if annotation.gold is not None and annotation.gold_passed is not None:
            gold[annotation.participant_id].append(annotation.gold_passed)
    rows = []
    for participant_id, record in state.participants.items():
        done = sum(1 for a in state.participant_assignments(participant_id) if state.is_done(a))
        checks = gold.get(participant_id, [])
        rows.append(
            {
                "participant_id": participant_id,
                "origin": record.origin,
                "external_id": record.external_id or "",
                "progress": f"{done}/{steps}",
                "gold": f"{sum(checks)}/{len(checks)} passed" if checks else "",
                "completed": participant_id in state.completions,
                "link": f"{base_url}/p/{service.keys.participant_token(participant_id)}/",
            }
        )
    return rows
