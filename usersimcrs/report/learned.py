"""The learned evaluator in a run's or a matrix's report: each CRS's predicted dialogue_overall beside its
success, with the model's agreement with human ratings on CRSs it never saw, never a bare number.

The agreement is what the model recorded at training (its leave-one-CRS-out selection figures, with CIs;
`usersimcrs evaluator cv` gives the nested estimate). A model whose within-CRS CI contains 0 is said,
in words, to rank systems, not conversations. Conversations the model was trained on are counted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd

from usersimcrs.analysis.aspect_agreement import SYSTEMS_NOT_CONVERSATIONS
from usersimcrs.analysis.summary import describe
from usersimcrs.core.dialogue import Dialogue
from usersimcrs.judges.learned.model import Evaluator, LearnedModel, RunStats
from usersimcrs.report.html import Report

ASPECT = "dialogue_overall"


def learned_table(
    model: str | Path, dialogues: Sequence[Dialogue], table: pd.DataFrame, by: Sequence[str], *, seed: int = 0
) -> tuple[pd.DataFrame, LearnedModel, int, list[str]]:
    """Per group of `by` (columns of `table`, the counted conversations with `success`): success (mean, n)
    and the predicted dialogue_overall (mean, 95% bootstrap CI, n); with the loaded model, how many of the
    conversations it was trained on and its drift warnings (conversations unlike its training data)."""
    evaluator = Evaluator.load(model)
    counted = set(table["conversation_id"].astype(str))
    scored = [d for d in dialogues if d.conversation_id in counted]
    stats = RunStats()
    batch = evaluator.score(scored, stats) if scored else None
    predicted: dict[str, float] = {}
    if batch is not None and ASPECT in batch.dialogue_names:
        column = batch.dialogue_names.index(ASPECT)
        predicted = dict(zip(batch.conversation_ids, batch.dialogue_values[:, column].tolist()))
    trained = sum(evaluator.in_training(predicted))
    frame = table.assign(predicted=table["conversation_id"].astype(str).map(predicted))
    rows = []
    for key, part in frame.groupby(list(by), sort=True):
        keys = key if isinstance(key, tuple) else (key,)
        success = describe(part["success"], seed=seed) if "success" in part else {"n": 0, "mean": float("nan")}
        pred = describe(part["predicted"], seed=seed)
        rows.append(
            {
                **dict(zip(by, keys)),
                "success": _mean(success),
                f"predicted {ASPECT} (0-4)": _mean(pred, ci=True),
            }
        )
    return pd.DataFrame(rows), evaluator.model, trained, evaluator.drift(stats) if scored else []


def _mean(figures: dict[str, float], *, ci: bool = False) -> str:
    if not figures["n"] or pd.isna(figures["mean"]):
        return "not measured (n=0)"
    text = f"{figures['mean']:.2f}"
    if ci and not pd.isna(figures.get("ci_low")):
        text += f" [{figures['ci_low']:.2f}, {figures['ci_high']:.2f}]"
    return f"{text} (n={figures['n']})"


def agreement_sentences(model: LearnedModel) -> list[str]:
    """What the model's recorded agreement on dialogue_overall says, in words (with its CIs)."""
    figures = (model.cv.get("aspects") or {}).get(ASPECT)
    kind = model.cv.get("kind", "cross-validation at training")
    if not figures:
        return [f"The model records no agreement figure for {ASPECT}: treat its scores as not validated."]
    pooled = _figure(figures.get("pearson"), figures.get("pearson_ci"))
    within = _figure(figures.get("within_pearson"), figures.get("within_pearson_ci"))
    out = [
        f"Agreement of this model's {ASPECT} with human ratings ({kind}; n={figures.get('n')}): "
        f"pooled Pearson r {pooled}, within-CRS r {within}."
    ]
    ci = figures.get("within_pearson_ci")
    if ci is None or ci[0] is None or ci[0] <= 0.0 <= ci[1]:
        out.append(
            f"It {SYSTEMS_NOT_CONVERSATIONS}: its within-CRS CI contains 0 (or was not measured), so it may order "
            "CRSs but says little about which conversations of one CRS went better."
        )
    return out


def _figure(value: float | None, ci: Sequence[float | None] | None) -> str:
    if value is None:
        return "not measured"
    interval = f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci and ci[0] is not None and ci[1] is not None else ""
    return f"{value:.2f}{interval}"


def add_learned_section(
    report: Report,
    model: str | Path,
    dialogues: Sequence[Dialogue],
    table: pd.DataFrame,
    by: Sequence[str],
    *,
    seed: int = 0,
) -> None:
    """The report's section on the learned evaluator (see the module docstring)."""
    rows, loaded, trained, drift = learned_table(model, dialogues, table, by, seed=seed)
    report.section("Learned evaluator")
    facts = loaded.training
    source = f", converted from {', '.join(facts.corpus)}" if facts.corpus else ""
    report.text(
        f"Model {model} (trained {loaded.created}): trained on {facts.n_conversations} human-rated conversations of {', '.join(facts.systems)}"
        f"{source}. Its scores are predictions of human ratings, not measurements."
    )
    for line in agreement_sentences(loaded):
        report.text(line, note=SYSTEMS_NOT_CONVERSATIONS in line)
    for warning in drift:
        report.text(f"Unlike its training data: {warning}.", note=True)
    if trained:
        report.text(
            f"{trained} of these conversations are in the model's training data: their scores are in-sample.",
            note=True,
        )
    report.table(
        "learned_evaluator",
        rows,
        caption=f"Per {' · '.join(by)}: success (share of conversations with an accepted recommendation) and the "
        f"learned evaluator's predicted {ASPECT} (0-4, mean with 95% bootstrap CI), on the counted conversations.",
    )
