"""`fidelity`: compare simulated conversations (a run or every cell of a matrix) with human ones.

One row group per simulated run folder (cell): feature distances with bootstrap CIs and the
discriminator AUC. The human side pools every completed conversation under HUMAN (a run folder or
a converted corpus such as `convert crsarena-dial`'s output), or, without HUMAN, the human-human
populations of the bundled human reference (usersimcrs/core/human_reference.py). Beside them, the
context baselines: the same figures between two human populations that differ only in context. Failed or
empty conversations on either side are left out, counted per input and reason (`FidelityResult.left_out`,
left_out.csv). Writes fidelity.csv, fidelity_features.csv (the per-conversation features), left_out.csv and
report.html into the output folder.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from usersimcrs.analysis.fidelity import (
    ACTS,
    FEATURES_CSV,
    FIDELITY_CSV,
    HUMAN,
    NUMERIC_FEATURES,
    FidelityResult,
    FidelityRow,
    act_distance,
    context_baseline,
    context_readings,
    conversation_features,
    discriminator_auc,
    feature_distances,
)
from usersimcrs.analysis.human_reference import population_table
from usersimcrs.analysis.left_out import LEFT_OUT_CSV, LeftOut, completed, left_out_line, left_out_table
from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.holdout import held_out
from usersimcrs.core.human_reference import HUMAN_CRS, HUMAN_HUMAN, REFERENCE_PATH, HumanReference, load_reference
from usersimcrs.errors import DataError, UserError
from usersimcrs.pipeline.sources import load_sources


def features_table(dialogues: list[Dialogue], group: str) -> pd.DataFrame:
    """One row per conversation: its group (simulator or 'human'), ID and numeric features."""
    rows = [{"group": group, "conversation_id": d.conversation_id, **conversation_features(d)} for d in dialogues]
    return pd.DataFrame(rows, columns=["group", "conversation_id", *NUMERIC_FEATURES])


def _human_human(reference: HumanReference) -> tuple[str, pd.DataFrame]:
    """The reference's human-human populations pooled: their label and features table."""
    populations = reference.of_context(HUMAN_HUMAN)
    if not populations:
        raise DataError("the human reference holds no human-human population")
    label = " + ".join(p.label for p in populations)
    return label, pd.concat([population_table(p, HUMAN) for p in populations], ignore_index=True)


def context_baselines(
    reference: HumanReference,
    human: tuple[str, pd.DataFrame] | None,
    *,
    seed: int,
    resamples: int,
) -> list[FidelityRow]:
    """The same figures between human populations that differ only in context.

    With a human corpus: the reference's human-human seekers vs that corpus. Always: ReDial vs INSPIRED
    seekers when the reference has both. Without a corpus: human-human seekers vs the reference's CRS users.
    """
    hh_label, hh = _human_human(reference)
    rows: list[FidelityRow] = []
    if human is not None:
        rows += context_baseline(
            hh_label,
            hh,
            human[0],
            human[1],
            why="people talking to a human recommender vs the given human corpus",
            seed=seed,
            resamples=resamples,
        )
    names = {p.name: p for p in reference.populations}
    if "redial_seekers" in names and "inspired_seekers" in names:
        a, b = names["redial_seekers"], names["inspired_seekers"]
        rows += context_baseline(
            a.label,
            population_table(a, a.name),
            b.label,
            population_table(b, b.name),
            why="two human-human corpora (other crowd, instructions and recommenders)",
            seed=seed,
            resamples=resamples,
        )
    crs = reference.of_context(HUMAN_CRS)
    if human is None and crs:
        rows += context_baseline(
            hh_label,
            hh,
            " + ".join(p.label for p in crs),
            pd.concat([population_table(p, p.name) for p in crs], ignore_index=True),
            why="people talking to a human recommender vs people talking to CRSs: the partner",
            seed=seed,
            resamples=resamples,
        )
    return rows


def fidelity(
    simulated: str | Path,
    human: str | Path | None = None,
    output: str | Path | None = None,
    *,
    seed: int = 0,
    resamples: int = 1000,
    report: bool = True,
    human_holdout: float = 0.0,
    reference: str | Path | None = None,
) -> FidelityResult:
    """Distances between each simulated run and the human conversations (the bundled reference when `human` is
    None), the discriminator AUC, and the context baselines beside them.

    `human_holdout` keeps only the human conversations a corpus NLG with that `nlg_corpus_holdout` left out of
    its pool, so a run whose users speak with that corpus's messages is compared with messages it never used.
    """
    if resamples < 0:
        raise UserError("--resamples must be 0 or more")
    if not 0.0 <= human_holdout < 1.0:
        raise UserError("--human-holdout must be at least 0 and below 1")
    reference_path = str(reference) if reference is not None else str(REFERENCE_PATH)
    human_reference = load_reference(reference_path)
    left_out: list[LeftOut] = []
    human_dialogues: list[Dialogue] = []
    if human is None:
        if human_holdout:
            raise UserError("--human-holdout needs a human corpus to split")
        label, human_table = _human_human(human_reference)
        human_name = f"bundled human reference: {label}"
    else:
        for source in load_sources(human):
            kept, dropped = completed(source.run.dialogues, f"{HUMAN} ({source.name})")
            # the held-out part is a choice, not a loss: the other conversations are not counted as left out
            human_dialogues += [d for d in kept if not human_holdout or held_out(d.conversation_id, human_holdout)]
            left_out += dropped
        if len(human_dialogues) < 2:
            raise DataError(
                f"{human}: fewer than 2 completed human conversations"
                + (f" held out at share {human_holdout:g}" if human_holdout else "")
                + (f" ({left_out_line(left_out)})" if left_out else "")
            )
        human_table = features_table(human_dialogues, HUMAN)
        human_name = str(human) + (f" (held-out share {human_holdout:g})" if human_holdout else "")
    rows: list[FidelityRow] = []
    frames = [human_table]
    groups = []
    for source in load_sources(simulated):
        name = source.name if source.name != HUMAN else f"{HUMAN}_simulated"
        dialogues, dropped = completed(source.run.dialogues, name)
        left_out += dropped
        if not dialogues:
            rows.append(
                FidelityRow(
                    simulator=name,
                    feature="all",
                    statistic="discriminator_auc",
                    value=None,
                    n_simulated=0,
                    n_human=len(human_table),
                    note="no completed conversations",
                )
            )
            continue
        groups.append(name)
        table = features_table(dialogues, name)
        frames.append(table)
        rows += feature_distances(name, table, human_table, resamples=resamples, seed=seed)
        if human is None:
            rows.append(
                FidelityRow(
                    simulator=name,
                    feature=ACTS,
                    statistic="js_divergence",
                    value=None,
                    n_simulated=len(dialogues),
                    n_human=len(human_table),
                    note="not checked: the bundled human reference carries no dialogue acts",
                )
            )
        else:
            rows.append(act_distance(name, dialogues, human_dialogues, resamples=resamples, seed=seed))
        rows.append(discriminator_auc(name, table, human_table, seed=seed, resamples=resamples))
    if not groups:  # nothing simulated to compare: a result of empty rows would read as a finding
        raise DataError(
            f"{simulated}: no completed simulated conversations"
            + (f" ({left_out_line(left_out)})" if left_out else " (the run holds none)")
        )
    corpus = None if human is None else (Path(human).name or str(human), human_table)
    baselines = context_baselines(human_reference, corpus, seed=seed, resamples=resamples)
    result = FidelityResult(
        simulated=str(simulated),
        human=human_name,
        groups=groups,
        n_human=len(human_table),
        rows=rows,
        resamples=resamples,
        seed=seed,
        baselines=baselines,
        readings=context_readings(rows, baselines),
        reference=reference_path,
        human_holdout=human_holdout,
        left_out=left_out,
    )
    if output is not None:
        folder = Path(output)
        folder.mkdir(parents=True, exist_ok=True)
        result.table().to_csv(folder / FIDELITY_CSV, index=False)
        pd.concat(frames, ignore_index=True).to_csv(folder / FEATURES_CSV, index=False)
        left_out_table(left_out).to_csv(folder / LEFT_OUT_CSV, index=False)
        result.files = [FIDELITY_CSV, FEATURES_CSV, LEFT_OUT_CSV]
        if report:
            # lazy: matplotlib only when a report is written
            from usersimcrs.report.fidelity_report import build_fidelity_report

            build_fidelity_report(result, pd.concat(frames, ignore_index=True)).write(folder)
            result.files.append("report.html")
        result.output = str(folder)
    return result
