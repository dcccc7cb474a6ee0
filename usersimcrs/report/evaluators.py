"""What each evaluator in a report is, on what scale, and how far it is known to agree with people.

Every score a report shows comes from an evaluator: a rule metric (success, recall@10, ...), a
classifier (satisfaction) or an LLM judge aspect (``quality:fluency``). A reader needs its scale and
whether it has been checked against human judgments, next to its numbers. `HumanAgreement` is the
typed seam for those figures: the meta-evaluation (docs/meta-evaluation.md, CRSArena-Eval) produces
them; the report renders "not measured" for an evaluator without one, never a made-up value.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping, Sequence

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field


class HumanAgreement(BaseModel):
    """One measured agreement between an evaluator's scores and human judgments."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    statistic: str = Field(description="e.g. 'AUC', 'Pearson r', 'Spearman r'")
    value: float
    ci_low: float | None = None
    ci_high: float | None = None
    n: int | None = Field(None, description="conversations (or turns) behind the figure")
    reference: str = Field(description="what the humans judged, e.g. 'CRSArena-Dial satisfied/frustrated labels'")
    source: str = Field(description="where it was measured (a docs page or a meta-eval output)")
    chance: float | None = Field(None, description="the value that means no signal (0.5 for AUC, 0 for r)")

    def label(self) -> str:
        """'AUC 0.43 [0.29, 0.56], n=18 (chance 0.5) — CRSArena-Dial ...; docs/meta-evaluation.md'."""
        ci = f" [{self.ci_low:.2f}, {self.ci_high:.2f}]" if self.ci_low is not None and self.ci_high is not None else ""
        n = f", n={self.n}" if self.n is not None else ""
        chance = f" (chance {self.chance:g})" if self.chance is not None else ""
        return f"{self.statistic} {self.value:.2f}{ci}{n}{chance} — {self.reference}; {self.source}"


class EvaluatorInfo(BaseModel):
    """The scale of an evaluator and what it measures."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scale: str
    measures: str
    caveat: str = ""


NOT_MEASURED = "not measured"

# the rule metrics a report leads with; judge aspects describe themselves through their rubric scale
EVALUATORS: Mapping[str, EvaluatorInfo] = MappingProxyType(
    {
        "success": EvaluatorInfo(
            scale="share 0-1", measures="a recommendation was accepted (accept act, feedback or end reason)"
        ),
        "successful_round_ratio": EvaluatorInfo(scale="share 0-1", measures="accepted rounds / recommendation rounds"),
        "recall@10": EvaluatorInfo(scale="0-1", measures="share of the user's targets in a turn's top 10, per turn"),
        "hit@10": EvaluatorInfo(scale="share 0-1", measures="a target appeared in some top 10"),
        "pc@10": EvaluatorInfo(scale="0-1", measures="share of targets shown in any top 10 by turn T (PEPPER PC_T)"),
        "pcir_avg@10": EvaluatorInfo(scale="0-1 per turn", measures="mean coverage gained per turn (PEPPER PCIR)"),
        "jaccard": EvaluatorInfo(scale="0-1", measures="distance between consecutive lists (exploration)"),
        "satisfaction": EvaluatorInfo(
            scale="1-5 (1 very dissatisfied, 5 very satisfied)",
            measures="DialogueKit's SVM satisfaction classifier on the whole dialogue",
            caveat="no measured signal against human satisfaction labels: report it for comparability only",
        ),
        "persuasiveness": EvaluatorInfo(scale="as the simulator rated it", measures="the simulated user's rating"),
        "turns": EvaluatorInfo(scale="count", measures="system turns"),
    }
)

# figures measured in this project (docs/meta-evaluation.md); the meta-evaluation adds its own per evaluator
MEASURED_AGREEMENT: Mapping[str, tuple[HumanAgreement, ...]] = MappingProxyType(
    {
        "satisfaction": (
            HumanAgreement(
                statistic="AUC",
                value=0.43,
                ci_low=0.29,
                ci_high=0.56,
                n=18,
                chance=0.5,
                reference="CRSArena-Dial users' satisfied/frustrated labels (2 conversations per CRS)",
                source="docs/meta-evaluation.md",
            ),
            HumanAgreement(
                statistic="AUC",
                value=0.47,
                n=474,
                chance=0.5,
                reference="CRSArena-Dial, all conversations (as reported in the meta-eval issue, not re-run here)",
                source="docs/meta-evaluation.md",
            ),
        ),
    }
)


def agreement_label(figures: Sequence[HumanAgreement] | None) -> str:
    """The figures as one cell of text; "not measured" when there are none."""
    if not figures:
        return NOT_MEASURED
    return "; ".join(f.label() for f in figures)


def evaluator_table(
    evaluators: Sequence[str], agreement: Mapping[str, Sequence[HumanAgreement]] | None = None
) -> pd.DataFrame:
    """One row per evaluator: scale, what it measures, caveat, and its agreement with humans ("not measured")."""
    agreement = MEASURED_AGREEMENT if agreement is None else agreement
    rows = []
    for name in evaluators:
        info = EVALUATORS.get(str(name))
        rows.append(
            {
                "evaluator": name,
                "scale": info.scale if info else ("judge rubric" if ":" in str(name) else "–"),
                "measures": info.measures if info else "",
                "agreement with humans": agreement_label(agreement.get(str(name))),
                "caveat": info.caveat if info else "",
            }
        )
    return pd.DataFrame(rows, columns=["evaluator", "scale", "measures", "agreement with humans", "caveat"])
