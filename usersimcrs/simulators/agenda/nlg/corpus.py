"""Corpus NLG (``nlg: corpus``): speak the user's acts with real seeker messages of those acts.

The pool is every seeker message of a human corpus that the seeker-act labeller fits
(`seeker_acts.py`), keyed by its acts' signature. A turn is spoken by one message whose acts match
the turn's acts (a feedback act may leave the title unsaid, as people do), else act by act, the
messages' titles, genres and people re-filled with the simulated user's own; an act without any
match falls back to the template NLG. Picks use the conversation's random generator, so they follow
the run's seed. The source of each turn (``corpus``, ``corpus:composed``, ``corpus+template``,
``template``) and the IDs of the messages used are recorded on the utterance.
"""

from __future__ import annotations

import random
import statistics
from pathlib import Path
from typing import Iterable

from usersimcrs.core.dialogue import Dialogue, DialogueAct
from usersimcrs.core.dialoguekit_io import read_dialoguekit
from usersimcrs.core.holdout import held_out
from usersimcrs.core.jsonl import read_models
from usersimcrs.core.run_folder import RunFolder
from usersimcrs.errors import ConfigError, DataError
from usersimcrs.simulators.agenda.nlg.base import NLG, NLGResult, NLGSettings
from usersimcrs.simulators.agenda.nlg.seeker_acts import SeekerLabeller, SeekerMessage, SeekerPool
from usersimcrs.simulators.agenda.nlg.template import TemplateNLG, join_parts
from usersimcrs.simulators.agenda.nlg.templates import act_signature
from usersimcrs.simulators.agenda.policy.domain import canonical_slot

CORPUS = "corpus"
COMPOSED = "corpus:composed"
MIXED = "corpus+template"
TEMPLATE = "template"


def read_corpus(path: str | Path) -> list[Dialogue]:
    """Human dialogues from a converted corpus or run folder, a dialogues JSONL file or DialogueKit JSON."""
    path = Path(path)
    if path.is_dir():
        folder = RunFolder(path)
        if not folder.has_dialogues():
            raise DataError(f"{path}: no dialogues in this folder (simulator.nlg_corpus_path)")
        return [Dialogue.model_validate(record) for record in folder.dialogue_records()]
    if not path.exists():
        raise DataError(f"{path}: no such file or folder (simulator.nlg_corpus_path)")
    if path.suffix == ".jsonl":
        return read_models(path, Dialogue)
    return read_dialoguekit(path)


def build_pool(dialogues: Iterable[Dialogue], labeller: SeekerLabeller, *, holdout: float = 0.0) -> SeekerPool:
    """Label the seeker messages of every conversation the split keeps (`holdout`: the share held out)."""
    by_signature: dict[str, list[SeekerMessage]] = {}
    kept = left = messages = labelled = 0
    for dialogue in dialogues:
        if held_out(dialogue.conversation_id, holdout):
            left += 1
            continue
        kept += 1
        messages += sum(1 for u in dialogue.user_turns if u.text.strip())
        for message in labeller.label_dialogue(dialogue):
            labelled += 1
            key = "|".join(act_signature(a) for a in message.acts)
            by_signature.setdefault(key, []).append(message)
    return SeekerPool(
        by_signature={k: tuple(v) for k, v in by_signature.items()},
        conversations=kept,
        held_out=left,
        messages=messages,
        labelled=labelled,
    )


def fill(message: SeekerMessage, acts: list[DialogueAct]) -> str | None:
    """The message with the acts' own values in its placeholders (genres in lower case), None if one is missing."""
    values = {}
    for act in acts:
        for sv in act.slot_values:
            if sv.value:
                slot = canonical_slot(sv.slot)
                values[slot] = sv.value.lower() if slot == "GENRE" else sv.value
    try:
        return message.template.format_map(values)
    except (KeyError, IndexError, ValueError):
        return None


class CorpusNLG(NLG):
    """Real seeker messages for the user's acts; templates where the corpus has none."""

    def __init__(self, settings: NLGSettings) -> None:
        super().__init__(settings)
        if settings.corpus is None:
            raise ConfigError("simulator.nlg_corpus_path: the corpus NLG needs a human corpus to draw messages from")
        self.pool = settings.corpus()
        self.templates = TemplateNLG(settings)

    async def generate(
        self, acts: list[DialogueAct], dialogue: Dialogue, *, rng: random.Random, seed: int, ending: str | None = None
    ) -> NLGResult:
        return self.realise(acts, rng, ending)

    def realise(self, acts: list[DialogueAct], rng: random.Random, ending: str | None = None) -> NLGResult:
        """One message for the whole turn if the corpus has one, else one per act (templates for the rest).
        An act the templates word for this `ending` (a give-up's goodbye) is theirs: the corpus's closings are
        labelled by act, not by how the conversation went, and most thank someone who helped."""
        if not acts:
            return self.templates.realise(acts, rng, ending)
        closing = [self.templates.ending_key(act, ending) is not None for act in acts]
        whole = None if any(closing) else self._pick(self.pool.candidates(acts), acts, rng, short=False)
        if whole is not None:
            return NLGResult(text=whole[0], source=CORPUS, origin=[whole[1]])
        parts, origins = [], []
        for act, templated in zip(acts, closing, strict=True):
            picked = None if templated else self._pick(self.pool.candidates([act]), [act], rng, short=len(acts) > 1)
            if picked is None:
                parts.append(self.templates.realise_act(act, rng, ending))
                origins.append(TEMPLATE)
            else:
                parts.append(picked[0])
                origins.append(picked[1])
        from_corpus = sum(o != TEMPLATE for o in origins)
        source = TEMPLATE if not from_corpus else COMPOSED if from_corpus == len(origins) else MIXED
        return NLGResult(text=join_parts(parts), source=source, origin=origins if from_corpus else [])

    @staticmethod
    def _pick(
        candidates: list[SeekerMessage], acts: list[DialogueAct], rng: random.Random, *, short: bool
    ) -> tuple[str, str] | None:
        """A random candidate, filled; when one turn is built from several messages, one of the shorter half."""
        if not candidates:
            return None
        if short:
            median = statistics.median(c.words for c in candidates)
            candidates = [c for c in candidates if c.words <= median]
        for _ in range(3):
            message = rng.choice(candidates)
            text = fill(message, acts)
            if text is not None:
                return text, message.origin
        return None
