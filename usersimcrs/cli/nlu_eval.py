"""`usersimcrs nlu-eval --dialogues FILE`: score the agenda simulator's NLU on annotated AGENT turns.

Gold acts come from a DialogueKit JSON file; gold codes and predicted intents are mapped into a
shared label set (built-in: IARD codes -> CIR intents, see the label YAML) and intent-level
precision/recall/F1 are printed, micro- and macro-averaged.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from usersimcrs.llm.backends import backend_names

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.pipeline.nlu_eval import NLUEvalReport


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("nlu-eval", help="score the agenda simulator's NLU on annotated agent utterances")
    parser.add_argument("--dialogues", required=True, help="DialogueKit JSON with annotated dialogue acts")
    parser.add_argument("--nlu", default="rules", help="rules | llm (default rules)")
    parser.add_argument("--structured", action="store_true", help="LLM NLU: JSON-schema constrained output")
    parser.add_argument("--labels", help="label-map YAML (gold/predicted -> evaluation label)")
    parser.add_argument("--interaction-model", help="interaction-model YAML (default: built-in CIR)")
    parser.add_argument("--domain", help="domain YAML (default: slots of --items, else TITLE/GENRE)")
    parser.add_argument("--items", help="item CSV (MovieLens layout) used to recognise titles and slot values")
    parser.add_argument("--limit", type=int, help="score at most this many agent utterances")
    parser.add_argument("--llm-backend", choices=backend_names(), default="auto", help="LLM backend for --nlu llm")
    parser.add_argument("--model", help="model name for --nlu llm")
    parser.add_argument("--base-url", help="server URL of the backend")
    parser.add_argument("--model-path", help="GGUF file for the llamacpp backend")
    parser.add_argument("--max-tokens", type=int, default=48, help="completion cap per LLM call")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the LLM response cache")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from usersimcrs.core.validation import validate  # lazy: keeps `usersimcrs --help` fast
    from usersimcrs.pipeline.nlu_eval import NLUEvalRequest, nlu_eval

    llm: dict[str, Any] = {"backend": args.llm_backend, "cache": not args.no_cache}
    for key, value in (("model", args.model), ("base_url", args.base_url), ("model_path", args.model_path)):
        if value:
            llm[key] = value
    fields = {
        "dialogues": args.dialogues,
        "nlu": args.nlu,
        "structured": args.structured,
        "labels": args.labels,
        "interaction_model": args.interaction_model,
        "domain": args.domain,
        "items": args.items,
        "limit": args.limit,
        "max_tokens": args.max_tokens,
        "llm": llm,
    }
    request = validate(NLUEvalRequest, fields, source=None, flags=True)
    report = nlu_eval(request)
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


def render(report: NLUEvalReport) -> str:
    """A plain-text table of the report."""
    lines = [
        f"NLU {report['nlu']} on {report['utterances']} agent utterances of {report['dialogues']}",
        f"{'intent':<24} {'P':>6} {'R':>6} {'F1':>6} {'support':>8}",
    ]
    for row in report["per_intent"]:
        lines.append(
            f"{row['intent']:<24} {row['precision']:6.3f} {row['recall']:6.3f} {row['f1']:6.3f} {row['support']:8d}"
        )
    for name in ("micro", "macro"):
        s = report[name]
        lines.append(f"{name + ' avg':<24} {s['precision']:6.3f} {s['recall']:6.3f} {s['f1']:6.3f}")
    lines.append(f"exact match (all intents of an utterance right): {report['exact_match']:.3f}")
    if report.get("dropped"):
        lines.append(f"dropped intents/slots from the NLU output: {report['dropped']}")
    return "\n".join(lines)
