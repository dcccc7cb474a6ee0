"""Build the human reference statistics (usersimcrs.core.human_reference) from human conversations.

Per population: the fidelity features of every conversation (`conversation_features`, rounded), their
summaries, per-turn summaries (words, questions, reject and accept cues, how many titles, genres or
people a turn names), the histogram of words per turn, and how many partner turns named an item. The
LLM users' style defaults come from the human-human populations pooled.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field

from usersimcrs.analysis.fidelity import (
    ACCEPT_CUES,
    NUMERIC_FEATURES,
    conversation_features,
    has_cue,
    is_question,
    is_reject,
    words,
)
from usersimcrs.core.dialogue import AGENT, USER, Dialogue, Utterance
from usersimcrs.core.human_reference import (
    HUMAN_HUMAN,
    Context,
    HumanReference,
    ReferencePopulation,
    StyleDefaults,
    Summary,
)

MENTION_KEYS = ("items", "movies", "genres", "people")
DIGITS = 4


def summarise(values: Sequence[float | None]) -> Summary:
    """n, mean, sd and quantiles of the finite values."""
    data = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if data.size == 0:
        return Summary(n=0)
    p10, p25, median, p75, p90 = (float(q) for q in np.quantile(data, [0.1, 0.25, 0.5, 0.75, 0.9]))
    return Summary(
        n=int(data.size),
        mean=_round(float(data.mean())),
        sd=_round(float(data.std(ddof=1))) if data.size > 1 else None,
        median=_round(median),
        p10=_round(p10),
        p25=_round(p25),
        p75=_round(p75),
        p90=_round(p90),
    )


def reveals(utterance: Utterance) -> int:
    """How many titles, genres or people the corpus marks in a turn (its item, movie, genre, people annotations)."""
    total = 0
    for key in MENTION_KEYS:
        value = utterance.annotation(key)
        if isinstance(value, list):
            total += len(value)
    return total


def build_population(
    name: str, label: str, context: Context, source: str, dialogues: Sequence[Dialogue]
) -> ReferencePopulation:
    """One population's statistics from its completed conversations that have at least one user turn."""
    kept = [d for d in dialogues if d.status == "ok" and any(u.participant == USER for u in d.utterances)]
    features = [conversation_features(d) for d in kept]
    turns = [u for d in kept for u in d.utterances if u.participant == USER]
    lengths = [len(words(u.text)) for u in turns]
    per_turn = {
        "words": summarise([float(n) for n in lengths]),
        "question": summarise([float(is_question(u.text)) for u in turns]),
        "reject": summarise([float(is_reject(u.text)) for u in turns]),
        "accept": summarise([float(has_cue(u.text, ACCEPT_CUES)) for u in turns]),
        "revealing": summarise([float(reveals(u) > 0) for u in turns]),
        "reveals_when_any": summarise([float(n) for n in (reveals(u) for u in turns) if n > 0]),
    }
    suggestions = [float(sum(1 for u in d.utterances if u.participant == AGENT and u.items)) for d in kept]
    return ReferencePopulation(
        name=name,
        label=label,
        context=context,
        source=source,
        conversations=len(kept),
        user_turns=len(turns),
        per_conversation={f: [_round(row[f]) for row in features] for f in NUMERIC_FEATURES},
        per_conversation_summary={f: summarise([row[f] for row in features]) for f in NUMERIC_FEATURES},
        per_turn=per_turn,
        words_per_turn=dict(sorted(Counter(lengths).items())),
        suggestions_per_conversation=summarise(suggestions),
    )


def style_defaults(populations: Sequence[ReferencePopulation]) -> StyleDefaults:
    """Words, reveals and patience of the human-human populations pooled (each turn and conversation counts once)."""
    pool = [p for p in populations if p.context == HUMAN_HUMAN] or list(populations)
    lengths = np.repeat(
        [n for p in pool for n in p.words_per_turn], [c for p in pool for c in p.words_per_turn.values()]
    )
    revealing = _pooled_mean([p.per_turn["revealing"] for p in pool])
    per_reveal = _pooled_mean([p.per_turn["reveals_when_any"] for p in pool])
    suggestions = [p.suggestions_per_conversation for p in pool if p.suggestions_per_conversation.median is not None]
    patience = _pooled_mean([Summary(n=s.n, mean=s.median) for s in suggestions])
    return StyleDefaults(
        words_per_turn=int(round(float(np.median(lengths)))) if lengths.size else 6,
        max_words=int(round(float(np.quantile(lengths, 0.9)))) if lengths.size else 14,
        reveal_per_turn=max(1, int(round(per_reveal))) if per_reveal is not None else 1,
        reveal_share=_round(revealing) if revealing is not None else 0.0,
        patience=max(1, int(round(patience))) if patience is not None else 3,
        basis=f"{' and '.join(p.label for p in pool)}, pooled: median and 90th percentile of words per user turn; "
        "titles, genres and people the corpus marks in a user turn that names any (mean), and the share of such "
        "turns; partner turns that named an item per conversation (median, weighted by conversations)",
    )


def _pooled_mean(summaries: Sequence[Summary]) -> float | None:
    """The mean over several summaries, each weighted by its n."""
    parts = [(s.mean, s.n) for s in summaries if s.mean is not None and s.n]
    total = sum(n for _, n in parts)
    return sum(m * n for m, n in parts) / total if total else None


def build_reference(populations: Sequence[ReferencePopulation], command: str) -> HumanReference:
    """The reference file's content: the populations and the style defaults drawn from them."""
    return HumanReference(
        command=command,
        features=list(NUMERIC_FEATURES),
        populations=list(populations),
        style=style_defaults(populations),
    )


def population_table(population: ReferencePopulation, group: str) -> pd.DataFrame:
    """The population's per-conversation features as a fidelity features table (IDs made up: name-index)."""
    data = {f: population.per_conversation.get(f, [None] * population.conversations) for f in NUMERIC_FEATURES}
    table = pd.DataFrame(data, columns=NUMERIC_FEATURES, dtype=float)
    table.insert(0, "conversation_id", [f"{population.name}-{i}" for i in range(len(table))])
    table.insert(0, "group", group)
    return table


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), DIGITS)


class WritingSummary(BaseModel):
    """How a run's users write (words per turn, questions) beside the human reference populations."""

    turns: int
    words_mean: float
    words_median: float
    question_share: float
    conversation_words_mean: float = Field(description="mean of each conversation's mean words per user turn")
    human_range: tuple[float, float] = Field(
        description="the middle half of human conversations' words per turn: lowest p25 to highest p75"
    )
    reference: list[tuple[str, float, float]] = Field(description="(label, words per turn, question share)")

    @property
    def placement(self) -> str:
        low, high = self.human_range
        if self.conversation_words_mean < low:
            return "shorter than"
        return "longer than" if self.conversation_words_mean > high else "inside"

    def line(self) -> str:
        """One line for the report's overview."""
        low, high = self.human_range
        humans = "; ".join(
            f"{label} {words:.1f} words, {share:.0%} questions" for label, words, share in self.reference
        )
        return (
            f"{self.words_mean:.1f} words per turn (median {self.words_median:g}), questions in "
            f"{self.question_share:.0%} of {self.turns} turns; {self.placement} the middle half of human "
            f"conversations ({self.conversation_words_mean:.1f} words per turn per conversation, humans {low:g}-{high:g}). "
            f"Human reference: {humans}"
        )


def writing_summary(dialogues: Iterable[Dialogue], reference: HumanReference) -> WritingSummary | None:
    """The run's user turns against the reference (None when the run has no user turn)."""
    kept = [d for d in dialogues if any(u.participant == USER for u in d.utterances)]
    turns = [u.text for d in kept for u in d.utterances if u.participant == USER]
    if not turns:
        return None
    lengths = [len(words(t)) for t in turns]
    per_conversation = [conversation_features(d)["user_words"] for d in kept]
    summaries = [p.per_conversation_summary["user_words"] for p in reference.populations]
    return WritingSummary(
        turns=len(turns),
        words_mean=float(np.mean(lengths)),
        words_median=float(np.median(lengths)),
        question_share=float(np.mean([is_question(t) for t in turns])),
        conversation_words_mean=float(np.mean([v for v in per_conversation if v is not None])),
        human_range=(
            min(s.p25 for s in summaries if s.p25 is not None),
            max(s.p75 for s in summaries if s.p75 is not None),
        ),
        reference=[
            (p.label, p.per_turn["words"].mean or 0.0, p.per_turn["question"].mean or 0.0)
            for p in reference.populations
        ],
    )
