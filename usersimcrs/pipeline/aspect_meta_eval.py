"""`meta_eval_aspects`: per-aspect agreement of evaluators with human ratings (CRSArena-Eval).

Input: a converted corpus whose conversations carry per-aspect human ratings (`usersimcrs convert
crsarena-eval`), evaluators' predictions from run files or judgment files (``--judgments
[NAME=]FILE``) and from the judgments stored in the corpus' runs, the surface baselines computed
on the spot, and optionally the published figures (``baselines.json``), cited as published.
Conversations without a rating of the chosen aspects pair with nothing: counted per input
(`AspectMetaEvalResult.left_out`). Output: meta_eval.csv (one figure per row, best per column
marked), left_out.csv and report.html.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from usersimcrs.analysis.aspect_agreement import (
    ALL_GROUPS,
    AspectMetaEvalResult,
    AspectRow,
    EvaluatorInfo,
    Resamples,
    Source,
    evaluator_rows,
    mark_best,
    pair,
    published_rows,
)
from usersimcrs.analysis.aspect_tables import (
    CRS_IDENTITY,
    SATISFACTION,
    carries_ratings,
    gold_table,
    identity_predictions,
    judgment_failures,
    judgment_predictions,
    satisfaction_predictions,
    surface_predictions,
)
from usersimcrs.analysis.left_out import LEFT_OUT_CSV, LeftOut, left_out_table
from usersimcrs.analysis.meta_eval import META_EVAL_CSV
from usersimcrs.analysis.reference import read_judge_records
from usersimcrs.core.crsarena_eval import BY_NAME, select_aspects
from usersimcrs.errors import DataError, UserError
from usersimcrs.judges.learned.model import load_model, trained_on
from usersimcrs.pipeline.sources import RunSource, load_sources


def judgment_spec(text: str) -> tuple[str | None, Path]:
    """``NAME=FILE`` or ``FILE`` (a file whose name holds '=' is taken as it is when it exists)."""
    name, sep, path = text.partition("=")
    if sep and name and not Path(text).exists():
        return name.strip(), Path(path)
    return None, Path(text)


def has_aspect_references(path: str | Path) -> bool:
    """Whether the conversations under `path` carry CRSArena-Eval aspect ratings (the aspect mode's input)."""
    return any(carries_ratings(d) for source in load_sources(path) for d in source.run.iter_dialogues())


def _unique(name: str, taken: set[str]) -> str:
    candidate, n = name, 2
    while candidate in taken:
        candidate, n = f"{name} ({n})", n + 1
    taken.add(candidate)
    return candidate


def meta_eval_aspects(
    path: str | Path,
    output: str | Path | None = None,
    *,
    aspects: str | Sequence[str] | None = "official",
    judgments: Sequence[str | Path] = (),
    published: str | Path | None = None,
    baselines: bool = True,
    resamples: int = 1000,
    seed: int = 0,
    report: bool = True,
    model: str | Path | None = None,
    include_training: bool = False,
) -> AspectMetaEvalResult:
    """Every evaluator's agreement with the human ratings, per aspect and group; see the module docstring.

    `model`: a learned evaluator's model file; the conversations it was trained on are left out of every
    figure (every evaluator's, so they stay comparable) unless `include_training`."""
    if resamples < 0:
        raise UserError("--resamples must be 0 or more")
    names = select_aspects(aspects if aspects is not None else "official")
    sources = load_sources(path)
    triples = [(d, s.crs, None) for s in sources for d in s.run.dialogues]
    dialogues = [d for d, _, _ in triples]
    gold = gold_table(triples, names)
    trained = training_overlap(model, [d.conversation_id for d in dialogues])
    if trained and not include_training:
        gold = gold[~gold["conversation_id"].isin(trained)]
    if gold.empty:
        raise DataError(
            f"{path}: no conversation carries a rating of {', '.join(names)}"
            + (" outside the model's training data" if trained and not include_training else "")
            + "; convert a rated corpus first (usersimcrs convert crsarena-eval)"
        )
    identity = identity_predictions(gold) if baselines else None
    left_out = unrated(sources, set(gold["conversation_id"]) | trained, names)
    if trained and not include_training:
        left_out.append(
            LeftOut(source=str(model), reason=TRAINED_REASON, conversations=len(trained), of=len(dialogues))
        )
    groups = sorted(gold["group"].unique())
    if len(groups) > 1:
        gold = pd.concat([gold, gold.assign(group=ALL_GROUPS)], ignore_index=True)
        groups.append(ALL_GROUPS)

    evaluators: list[tuple[EvaluatorInfo, pd.DataFrame]] = []
    taken: set[str] = set()

    def add(name: str, source: Source, origin: str, table: pd.DataFrame | None, failed: int = 0, note=None) -> None:
        info = EvaluatorInfo(
            name=_unique(name, taken),
            source=source,
            origin=origin,
            predictions=None if table is None else len(table),
            failed=failed,
            note=note,
        )
        evaluators.append((info, table if table is not None else pd.DataFrame()))

    for spec in judgments:
        label, file = judgment_spec(str(spec))
        records = read_judge_records(file, label)
        failures = judgment_failures(records, names)
        found = judgment_predictions(records, names)
        if not found:
            raise DataError(f"{file}: no prediction of {', '.join(names)} in it")
        for judge, table in found.items():
            add(label if label and len(found) == 1 else judge, "computed", str(file), table, failures.get(judge, 0))
    stored = [r for s in sources for r in s.run.judgments]
    failures = judgment_failures(stored, names)
    for judge, table in judgment_predictions(stored, names).items():
        add(judge, "computed", "judgments stored in the run folders", table, failures.get(judge.split(" (")[0], 0))
    if baselines:
        satisfaction = satisfaction_predictions(dialogues, names)
        note = None if satisfaction is not None else "classifier unavailable (dialoguekit not installed or unreadable)"
        add(SATISFACTION, "baseline", "DialogueKit 0.1.1 SVM classifier (1-5)", satisfaction, note=note)
        for name, table in surface_predictions(dialogues, names).items():
            add(name, "baseline", "surface feature", table)
        add(CRS_IDENTITY, "baseline", "mean rating of the other conversations of the same CRS", identity)

    rows: list[AspectRow] = []
    for g_index, group in enumerate(groups):
        in_group = gold[gold["group"] == group]
        for a_index, name in enumerate(names):
            gold_part = in_group[in_group["aspect"] == name]
            if gold_part.empty:
                continue
            systems = gold_part.drop_duplicates("conversation_id").set_index("conversation_id")["system"]
            draws = Resamples(systems, resamples, seed + 1000 * g_index + a_index)
            level = BY_NAME[name].level
            for info, table in evaluators:
                if table.empty:
                    continue
                preds = table[table["aspect"] == name]
                if preds.empty:
                    continue
                pairs = pair(gold_part[["conversation_id", "turn_ind", "system", "gold"]], preds)
                rows += evaluator_rows(
                    info.name, info.source, group, name, level, pairs, draws, within_crs=info.name != CRS_IDENTITY
                )
    if published is not None:
        rows += [r for r in published_rows(_read_published(published), {n: BY_NAME[n].level for n in names})
                 if r.group in groups]  # fmt: skip
    mark_best(rows)
    result = AspectMetaEvalResult(
        path=str(path),
        aspects=names,
        groups=groups,
        evaluators=[info for info, _ in evaluators] + _published_infos(rows, published),
        rows=rows,
        gold=gold[gold["group"] == groups[-1]].groupby("aspect").size().reindex(names, fill_value=0).to_dict(),
        n_conversations=len(dialogues),
        published_source=str(published) if published is not None else None,
        notes=_notes(rows, evaluators, names) + training_notes(len(trained), len(dialogues), model, include_training),
        resamples=resamples,
        seed=seed,
        in_training=len(trained) if model is not None else None,
        training_included=include_training,
        left_out=left_out,
    )
    if output is not None:
        write_aspect_meta_eval(result, output, report=report)
    return result


TRAINED_REASON = "in the learned model's training data (--include-training keeps them)"


def training_overlap(model: str | Path | None, conversation_ids: Sequence[str]) -> set[str]:
    """The given conversations a learned model was trained on (empty without a model)."""
    if model is None:
        return set()

    return set(trained_on(load_model(model), conversation_ids))


def training_notes(trained: int, total: int, model: str | Path | None, included: bool) -> list[str]:
    """What the figures do with the conversations a learned model was trained on, in words."""
    if model is None:
        return []
    if not trained:
        return [f"none of the {total} conversations is in the training data of {model}"]
    if included:
        return [
            f"{trained} of {total} conversations are in the training data of {model} and are INCLUDED "
            "(--include-training): figures on them are in-sample, not evidence of agreement"
        ]
    return [
        f"{trained} of {total} conversations are in the training data of {model}: left out of every figure "
        "(--include-training keeps them)"
    ]


def unrated(sources: Sequence[RunSource], rated: set[str], aspects: Sequence[str]) -> list[LeftOut]:
    """Per input, the conversations that carry no rating of `aspects` (they pair with nothing)."""
    out = []
    for source in sources:
        ids = [d.conversation_id for d in source.run.dialogues]
        missing = sum(cid not in rated for cid in ids)
        if missing:
            reason = f"no human rating of {', '.join(aspects)}"
            out.append(LeftOut(source=source.name, reason=reason, conversations=missing, of=len(ids)))
    return out


def _read_published(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: not a readable JSON file of published figures ({exc})") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise DataError(f"{path}: expected {{half: {{evaluator: {{aspect: {{pearson_r, spearman_rho}}}}}}}}")
    return data


def _published_infos(rows: list[AspectRow], published: str | Path | None) -> list[EvaluatorInfo]:
    names = list(dict.fromkeys(r.evaluator for r in rows if r.source == "published"))
    return [EvaluatorInfo(name=n, source="published", origin=str(published)) for n in names]


def _notes(rows: list[AspectRow], evaluators: list[tuple[EvaluatorInfo, pd.DataFrame]], names: list[str]) -> list[str]:
    notes = []
    paired = {r.evaluator for r in rows if r.source != "published" and r.n}
    for info, _ in evaluators:
        if info.note:
            notes.append(f"{info.name}: {info.note}")
        elif info.name not in paired:
            notes.append(f"{info.name}: none of its predictions matches a rated turn or conversation")
        if info.failed:
            notes.append(f"{info.name}: {info.failed} judgments without a value (failed) pair with nothing")
    if any(r.source == "published" for r in rows):
        notes.append(
            "published figures are cited as published (Pearson and Spearman of the official rule, no CI); "
            "they were not recomputed here"
        )
    return notes


def write_aspect_meta_eval(result: AspectMetaEvalResult, output: str | Path, *, report: bool = True) -> None:
    """meta_eval.csv and report.html in `output`; file names go to `result.files`."""
    folder = Path(output)
    folder.mkdir(parents=True, exist_ok=True)
    result.table().to_csv(folder / META_EVAL_CSV, index=False)
    left_out_table(result.left_out).to_csv(folder / LEFT_OUT_CSV, index=False)
    files = [META_EVAL_CSV, LEFT_OUT_CSV]
    if report:
        # lazy: matplotlib only when a report is written
        from usersimcrs.report.meta_eval_report import build_aspect_report

        build_aspect_report(result).write(folder)
        files.append("report.html")
    result.output = str(folder)
    result.files = files
