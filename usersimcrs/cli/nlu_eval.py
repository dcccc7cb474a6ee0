"""`usersimcrs nlu-eval --dialogues FILE`: score the agenda simulator's NLU on annotated AGENT turns.

Gold acts come from a DialogueKit JSON file; gold codes and predicted intents are mapped into a
shared label set (built-in: IARD codes -> CIR intents, see the label YAML) and intent-level
precision/recall/F1 are printed, micro- and macro-averaged.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any


def register(subparsers: argparse._SubParsersAction) -> None:
    from usersimcrs.llm.backends import backend_names

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
    report = asyncio.run(evaluate(args))
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(render(report))
    return 0


async def evaluate(args: argparse.Namespace) -> dict[str, Any]:
    """Run the NLU over every annotated AGENT utterance and score it."""
    from usersimcrs.core.dialogue import AGENT, Dialogue
    from usersimcrs.core.dialoguekit_io import read_dialoguekit
    from usersimcrs.core.items import ItemCollection
    from usersimcrs.simulators.agenda.nlu.base import NLUSettings, nlu_components
    from usersimcrs.simulators.agenda.nlu.evaluation import load_label_map, score_intents
    from usersimcrs.simulators.agenda.policy.domain import Domain, domain_from_items, load_domain
    from usersimcrs.simulators.agenda.policy.interaction_model import load_interaction_model

    dialogues = read_dialoguekit(args.dialogues)
    labels = load_label_map(args.labels)
    items = (
        ItemCollection.from_csv(args.items, delimiters={"genres": "|", "keywords": "|"}) if args.items else None
    )
    domain = load_domain(args.domain) if args.domain else (
        domain_from_items(items) if items is not None else Domain(slot_names=["TITLE", "GENRE", "ACTORS", "DIRECTOR", "YEAR", "KEYWORD"])
    )
    provider = _provider(args) if args.nlu == "llm" else None
    settings = NLUSettings(
        interaction_model=load_interaction_model(args.interaction_model),
        domain=domain,
        items=items,
        llm=(lambda: provider.get("nlu")) if provider is not None else None,
        structured=args.structured,
        max_tokens=args.max_tokens,
    )
    nlu = nlu_components.get(args.nlu)(settings)  # an unknown name is a one-line ConfigError
    gold: list[set[str]] = []
    predicted: list[set[str]] = []
    dropped = 0
    try:
        for dialogue in dialogues:
            history = Dialogue(conversation_id=dialogue.conversation_id)
            for index, utterance in enumerate(dialogue.utterances):
                if args.limit is not None and len(gold) >= args.limit:
                    break
                if utterance.participant == AGENT and utterance.dialogue_acts:
                    result = await nlu.understand(utterance, history, seed=index)
                    dropped += len(result.dropped)
                    gold.append(labels.map_gold([a.intent for a in utterance.dialogue_acts]))
                    predicted.append(labels.map_predicted([a.intent for a in result.acts]))
                history.utterances.append(utterance)
    finally:
        if provider is not None:
            await provider.aclose()
    report = score_intents(gold, predicted)
    out: dict[str, Any] = {
        "dialogues": args.dialogues,
        "nlu": args.nlu + (" (structured)" if args.structured else ""),
        "utterances": report.utterances,
        "micro": report.micro,
        "macro": report.macro,
        "exact_match": report.exact_match,
        "per_intent": [
            {"intent": s.intent, "precision": s.precision, "recall": s.recall, "f1": s.f1, "support": s.tp + s.fn}
            for s in report.per_intent
        ],
        "dropped": dropped,
    }
    if provider is not None:
        out["llm_usage"] = provider.usage_summary()
    return out


def _provider(args: argparse.Namespace) -> Any:
    from usersimcrs.llm.config import LLMConfig
    from usersimcrs.llm.provider import LLMProvider

    data: dict[str, Any] = {"backend": args.llm_backend, "cache": not args.no_cache}
    for key, value in (("model", args.model), ("base_url", args.base_url), ("model_path", args.model_path)):
        if value:
            data[key] = value
    return LLMProvider(LLMConfig.model_validate(data))


def render(report: dict[str, Any]) -> str:
    """A plain-text table of the report."""
    lines = [
        f"NLU {report['nlu']} on {report['utterances']} agent utterances of {report['dialogues']}",
        f"{'intent':<24} {'P':>6} {'R':>6} {'F1':>6} {'support':>8}",
    ]
    for row in report["per_intent"]:
        lines.append(f"{row['intent']:<24} {row['precision']:6.3f} {row['recall']:6.3f} {row['f1']:6.3f} {row['support']:8d}")
    for name in ("micro", "macro"):
        s = report[name]
        lines.append(f"{name + ' avg':<24} {s['precision']:6.3f} {s['recall']:6.3f} {s['f1']:6.3f}")
    lines.append(f"exact match (all intents of an utterance right): {report['exact_match']:.3f}")
    if report.get("dropped"):
        lines.append(f"dropped intents/slots from the NLU output: {report['dropped']}")
    return "\n".join(lines)
