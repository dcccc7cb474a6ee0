"""CRSArena-Eval (FACE, SIGIR 2026): human-CRS conversations with aggregated human ratings -> runs.

Input: the CRSArena-Eval JSON (a list of ``{"conv_id", "dialogue": [{"turn_ind", "role": USER|ASST,
"utterance", "turn_level_aggregated"?}], "dial_level_aggregated"}``). Output, besides the usual
dialogues files, one run folder per CRS and dataset (``cells/human__<crs>_<dataset>__<dataset>/``)
and ``matrix.json``, so meta-eval, judge and the evaluators read the corpus like a simulated matrix.

Every human rating is kept as a reference: the dialogue aspects in ``Dialogue.metadata["reference"]``
(aliases such as ``dialog_overall`` under their canonical name), the turn aspects in the assistant
utterance's ``metadata["reference"]`` next to its ``metadata["turn_ind"]``. A label that is missing
(five assistant turns of the corpus have no relevance) is counted in the report
(``turns_missing_<aspect>``) and listed as a warning; nothing is dropped.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from data_converters.base import CellRun, ConversionOutput, ConversionReport, Converter
from usersimcrs.core.crsarena_eval import DIALOGUE_ASPECTS, TURN_ASPECTS, canonical, dataset_of, system_of
from usersimcrs.core.dialogue import AGENT, USER, Dialogue, Utterance
from usersimcrs.errors import DataError

SIMULATOR = "human"
ROLES = {"USER": USER, "ASST": AGENT, "ASSISTANT": AGENT, "SYSTEM": AGENT}


def ratings(raw: Any, where: str, report: ConversionReport) -> dict[str, int | float]:
    """The numeric ratings of one label record, aliases resolved; a non-numeric value is warned and left out."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        report.warn("ratings_not_an_object", f"{where}: expected an object of ratings, got {type(raw).__name__}")
        return {}
    out: dict[str, int | float] = {}
    for key, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            report.warn("rating_not_a_number", f"{where}.{key}: {value!r} is not a number; left out")
            continue
        out[canonical(str(key))] = value
    return out


class CRSArenaEvalConverter(Converter):
    """CRSArena-Eval conversations -> one run folder per CRS, every human rating kept as a reference."""

    name = "crsarena-eval"
    description = "CRSArena-Eval: human-CRS conversations from CRS Arena with per-turn and per-dialogue human ratings"

    def convert(self, inputs: list[Path], report: ConversionReport) -> ConversionOutput:
        if len(inputs) != 1 or inputs[0].suffix.lower() != ".json":
            raise DataError(
                f"crsarena-eval: give one CRSArena-Eval .json file (got {', '.join(p.name for p in inputs)})"
            )
        path = inputs[0]
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DataError(f"{path}: not a readable JSON file ({exc})") from None
        if not isinstance(data, list):
            raise DataError(f"{path}: expected a JSON list of conversations, got {type(data).__name__}")
        dialogues = []
        seen: set[str] = set()
        for position, record in enumerate(data):
            dialogue = self._dialogue(record, f"{path}[{position}]", seen, report)
            if dialogue is not None:
                dialogues.append(dialogue)
        return ConversionOutput(dialogues=dialogues, cells=self._cells(dialogues))

    def _dialogue(self, record: Any, where: str, seen: set[str], report: ConversionReport) -> Dialogue | None:
        report.count_in("dialogues")
        turns = record.get("dialogue") if isinstance(record, dict) else None
        n_turns = len(turns) if isinstance(turns, list) else 0
        report.count_in("utterances", n_turns)
        counts = {"dialogues": 1, "utterances": n_turns}
        conv_id = record.get("conv_id") if isinstance(record, dict) else None
        if not isinstance(conv_id, str) or not conv_id:
            self.bad(report, where, "no conv_id", None, counts)
            return None
        if system_of(conv_id) is None or dataset_of(conv_id) is None:
            self.bad(report, where, f"conv_id {conv_id!r} is not <crs>_<dataset>_<id>", conv_id, counts)
            return None
        if conv_id in seen:
            self.bad(report, where, f"repeated conv_id {conv_id!r}", conv_id, counts)
            return None
        if not isinstance(turns, list) or not turns:
            self.bad(report, where, "'dialogue' is not a non-empty list of turns", conv_id, counts)
            return None
        utterances = []
        for position, turn in enumerate(turns):
            utterance = self._utterance(turn, f"{where}.dialogue[{position}]", conv_id, position, report)
            if utterance is None:
                self.bad(report, f"{where}.dialogue[{position}]", "not a turn with role and utterance", conv_id, counts)
                return None
            utterances.append(utterance)
        seen.add(conv_id)
        crs, dataset = system_of(conv_id), dataset_of(conv_id)
        reference = ratings(record.get("dial_level_aggregated"), f"{where}.dial_level_aggregated", report)
        for name in DIALOGUE_ASPECTS:
            if name not in reference:
                report.counts_out[f"dialogues_missing_{name}"] = (
                    report.counts_out.get(f"dialogues_missing_{name}", 0) + 1
                )
                report.warn(f"dialogue_without_{name}", f"{where} ({conv_id}): no {name} rating")
        metadata: dict[str, Any] = {"source": self.name, "crs": crs, "dataset": dataset}
        if reference:
            metadata["reference"] = reference
        return Dialogue(
            conversation_id=conv_id,
            utterances=utterances,
            agent_id=f"{crs}_{dataset}",
            user_id="human",
            metadata=metadata,
            end_reason="human",
        )

    def _utterance(
        self, turn: Any, where: str, conv_id: str, position: int, report: ConversionReport
    ) -> Utterance | None:
        if not isinstance(turn, dict) or not isinstance(turn.get("utterance"), str):
            return None
        participant = ROLES.get(str(turn.get("role", "")).upper())
        if participant is None:
            return None
        turn_ind = turn.get("turn_ind", position)
        if not isinstance(turn_ind, int) or isinstance(turn_ind, bool):
            return None
        if turn_ind != position:
            report.warn("turn_ind_not_position", f"{where}: turn_ind {turn_ind} at position {position}")
        metadata: dict[str, Any] = {"turn_ind": turn_ind}
        if participant == AGENT:
            reference = ratings(turn.get("turn_level_aggregated"), f"{where}.turn_level_aggregated", report)
            for name in TURN_ASPECTS:
                if name not in reference:
                    key = f"turns_missing_{name}"
                    report.counts_out[key] = report.counts_out.get(key, 0) + 1
                    report.warn(f"turn_without_{name}", f"{where} ({conv_id}, turn {turn_ind}): no {name} rating")
            if reference:
                metadata["reference"] = reference
            report.count_in("assistant_turns")
        return Utterance(
            participant=participant, text=turn["utterance"], utterance_id=f"{conv_id}:{turn_ind}", metadata=metadata
        )

    def _cells(self, dialogues: list[Dialogue]) -> list[CellRun]:
        by_system: dict[tuple[str, str], list[Dialogue]] = defaultdict(list)
        for dialogue in dialogues:
            by_system[(dialogue.agent_id, str(dialogue.metadata["dataset"]))].append(dialogue)
        cells = []
        for (crs, dataset), part in sorted(by_system.items()):
            indexed = [d.model_copy(update={"index": i}) for i, d in enumerate(part)]
            manifest = {"config": {"simulator": {"type": SIMULATOR}, "crs": {"type": crs}, "seed": 0}, "human": True}
            cells.append(CellRun(simulator=SIMULATOR, crs=crs, dataset=dataset, dialogues=indexed, manifest=manifest))
        return cells
