"""`fidelity-reference`: build the human reference statistics that `fidelity` compares a run with by default.

Each corpus is read from its original files by its converter (in memory; nothing of it is written) and
becomes one population. The bundled file (usersimcrs/core/data/human_reference.json) was built with::

    usersimcrs fidelity-reference --redial test_data.jsonl movies_with_mentions.csv \\
        --inspired dev.tsv test.tsv --crsarena-eval crs_arena_eval_redial.json
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from data_converters.run import read_dataset
from usersimcrs.analysis.human_reference import build_population, build_reference
from usersimcrs.core.human_reference import HUMAN_CRS, HUMAN_HUMAN, REFERENCE_PATH, Context, HumanReference
from usersimcrs.core.storage import write_atomic
from usersimcrs.errors import UserError


@dataclass(frozen=True)
class Corpus:
    """A corpus the reference can hold: its converter, population name and label, and whom its users talked to."""

    converter: str
    name: str
    label: str
    context: Context
    source: str


CORPORA = {
    "redial": Corpus(
        "redial",
        "redial_seekers",
        "ReDial seekers",
        HUMAN_HUMAN,
        "ReDial (Li et al., 2018): crowd workers seeking a movie from another crowd worker; seeker = initiator",
    ),
    "inspired": Corpus(
        "inspired",
        "inspired_seekers",
        "INSPIRED seekers",
        HUMAN_HUMAN,
        "INSPIRED (Hayati et al., 2020): crowd workers seeking a movie from a trained human recommender",
    ),
    "crsarena_eval": Corpus(
        "crsarena-eval",
        "crs_arena_users",
        "CRS Arena users",
        HUMAN_CRS,
        "CRSArena-Eval (CRS Arena): people talking to deployed CRSs (KBRD, BARCOR, UniCRS, ChatGPT, ...)",
    ),
}


def build_human_reference(
    output: str | Path = REFERENCE_PATH, *, command: str = "", **inputs: Sequence[str | Path]
) -> HumanReference:
    """Read each corpus named in `inputs` (keys of CORPORA -> its files), build the reference, write it to `output`."""
    unknown = sorted(set(inputs) - set(CORPORA))
    if unknown:
        raise UserError(f"unknown corpus {', '.join(unknown)}; known: {', '.join(CORPORA)}")
    if not any(inputs.get(key) for key, corpus in CORPORA.items() if corpus.context == HUMAN_HUMAN):
        raise UserError("fidelity-reference needs a human-human corpus: --redial and/or --inspired")
    populations = []
    for key, corpus in CORPORA.items():
        files = list(inputs.get(key) or [])
        if not files:
            continue
        converted, _ = read_dataset(corpus.converter, files)
        populations.append(
            build_population(corpus.name, corpus.label, corpus.context, corpus.source, converted.dialogues)
        )
    reference = build_reference(populations, command)
    write_atomic(output, reference.model_dump_json() + "\n")
    return reference
