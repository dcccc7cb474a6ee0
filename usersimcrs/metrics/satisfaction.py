"""User satisfaction (1-5) from DialogueKit 0.1.1's SVM classifier, as the UserSimCRS v2 case study used.

The classifier (a LinearSVC over word counts, trained on the data of Sun et al.'s user-satisfaction
simulation) reads the whole dialogue as one string: utterance texts joined by " .", exactly as
DialogueKit's ``classify_last_n_dialogue`` does. Its pickles were made with scikit-learn 0.24, so newer
scikit-learn versions warn when loading them; we silence that warning and record the versions.

The model's classes are 0-4, so it can answer 0, which is outside DialogueKit's 1-5 scale. We do
not guess a shift: such a score is missing, and ``satisfaction_status`` says why a score is missing
(ok / out_of_scale / classifier_unavailable / empty_dialogue / failed_conversation / disabled).
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

from usersimcrs.core.dialogue import Dialogue
from usersimcrs.metrics.base import MetricContext, MetricFamily, Value, happened

log = logging.getLogger(__name__)

SCALE = (1, 5)


def on_scale(value: Any, scale: tuple[int, int] = SCALE) -> float | None:
    """The value as a float when it is a number on the 1-5 scale, else None (e.g. 0 from some exports)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if scale[0] <= value <= scale[1] else None


def dialogue_text(dialogue: Dialogue, last_n: int | None = None) -> str:
    """The classifier's input: the last n utterance texts joined by " ." (DialogueKit's format)."""
    utterances = dialogue.utterances if last_n is None else dialogue.utterances[-last_n:]
    return " .".join(u.text for u in utterances)


def load_classifier() -> Any | None:
    """DialogueKit's SatisfactionClassifierSVM, or None (logged once) when it cannot be loaded."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from dialoguekit.nlu.models.satisfaction_classifier import SatisfactionClassifierSVM

            return SatisfactionClassifierSVM()
    except Exception as exc:  # missing package, missing model files, incompatible pickle
        log.warning("satisfaction classifier unavailable (%s); 'satisfaction' left empty", exc)
        return None


def classify(classifier: Any, texts: list[str]) -> list[int]:
    """Scores 1-5 for each text."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [int(v) for v in classifier.classify_text(list(texts))]


class SatisfactionFamily(MetricFamily):
    """satisfaction: the classifier's 1-5 score for the whole dialogue; satisfaction_status: why it may be missing."""

    name = "satisfaction"

    def kept_on_failure(self, metric: str) -> bool:
        """The status says why the score is missing; the score itself needs a conversation that happened."""
        return metric == "satisfaction_status"

    def per_conversation(self, dialogue: Dialogue, ctx: MetricContext) -> dict[str, Value]:
        if not ctx.options.satisfaction:
            return {"satisfaction": None, "satisfaction_status": "disabled"}
        if not dialogue.utterances:
            return {"satisfaction": None, "satisfaction_status": "empty_dialogue"}
        if not happened(dialogue):
            return {"satisfaction": None, "satisfaction_status": "failed_conversation"}
        classifier = ctx.resource("satisfaction_classifier", load_classifier)
        if classifier is None:
            return {"satisfaction": None, "satisfaction_status": "classifier_unavailable"}
        score = on_scale(classify(classifier, [dialogue_text(dialogue)])[0])
        return {"satisfaction": score, "satisfaction_status": "ok" if score is not None else "out_of_scale"}
