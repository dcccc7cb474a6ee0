"""`fidelity`: compare simulated conversations (a run or every cell of a matrix) with human ones.

One row group per simulated run folder (cell): feature distances with bootstrap CIs and the
discriminator AUC. The human side pools every completed conversation under HUMAN (a run folder or
a converted corpus such as `convert crsarena-dial`'s output). Failed or empty conversations on
either side are left out, counted per input and reason (`FidelityResult.left_out`, left_out.csv).
Writes fidelity.csv, fidelity_features.csv (the per-conversation features), left_out.csv and
report.html into the output folder.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from usersimcrs.analysis.fidelity import (
    FEATURES_CSV,
    FIDELITY_CSV,
    HUMAN,
    NUMERIC_FEATURES,
    FidelityResult,
    FidelityRow,
    act_distance,
    conversation_features,
    discriminator_auc,
    feature_distances,
)
from usersimcrs.analysis.left_out import LEFT_OUT_CSV, LeftOut, completed, left_out_line, left_out_table
from usersimcrs.core.dialogue import Dialogue
from usersimcrs.errors import DataError, UserError
from usersimcrs.pipeline.sources import load_sources


def features_table(dialogues: list[Dialogue], group: str) -> pd.DataFrame:
    """One row per conversation: its group (simulator or 'human'), ID and numeric features."""
    rows = [{"group": group, "conversation_id": d.conversation_id, **conversation_features(d)} for d in dialogues]
    return pd.DataFrame(rows, columns=["group", "conversation_id", *NUMERIC_FEATURES])


def fidelity(
    simulated: str | Path,
    human: str | Path,
    output: str | Path | None = None,
    *,
    seed: int = 0,
    resamples: int = 1000,
    report: bool = True,
) -> FidelityResult:
    """Distances between each simulated run and the human conversations, and the discriminator AUC."""
    if resamples < 0:
        raise UserError("--resamples must be 0 or more")
    left_out: list[LeftOut] = []
    human_dialogues: list[Dialogue] = []
    for source in load_sources(human):
        kept, dropped = completed(source.run.dialogues, f"{HUMAN} ({source.name})")
        human_dialogues += kept
        left_out += dropped
    if len(human_dialogues) < 2:
        raise DataError(
            f"{human}: fewer than 2 completed human conversations"
            + (f" ({left_out_line(left_out)})" if left_out else "")
        )
    human_table = features_table(human_dialogues, HUMAN)
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
                    n_human=len(human_dialogues),
                    note="no completed conversations",
                )
            )
            continue
        groups.append(name)
        table = features_table(dialogues, name)
        frames.append(table)
        rows += feature_distances(name, table, human_table, resamples=resamples, seed=seed)
        rows.append(act_distance(name, dialogues, human_dialogues, resamples=resamples, seed=seed))
        rows.append(discriminator_auc(name, table, human_table, seed=seed, resamples=resamples))
    result = FidelityResult(
        simulated=str(simulated),
        human=str(human),
        groups=groups,
        n_human=len(human_dialogues),
        rows=rows,
        resamples=resamples,
        seed=seed,
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
            from usersimcrs.report.fidelity_report import build_fidelity_report

            build_fidelity_report(result, pd.concat(frames, ignore_index=True)).write(folder)
            result.files.append("report.html")
        result.output = str(folder)
    return result
