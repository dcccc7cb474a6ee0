"""`usersimcrs annotate {dialogue-acts,information-need} DIR`: LLM labels for a converted dataset."""

from __future__ import annotations

import argparse

from data_converters.augment.base import annotators
from usersimcrs.llm.backends import backend_names


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "annotate",
        help="add LLM annotations (dialogue acts, information needs) to a converted dataset",
        description="Annotate the output folder of 'usersimcrs convert' with an LLM. Calls are batched "
        "concurrently and cached; records that already carry the annotation are skipped, and an "
        "interrupted run resumes where it stopped. Provenance (model, backend, prompt version) is "
        "stored with every annotation; failures go to annotation_report.<task>.json.",
    )
    parser.add_argument("task", choices=annotators.names(), help="what to annotate")
    parser.add_argument("folder", metavar="DIR", help="a folder written by 'usersimcrs convert'")
    parser.add_argument("--llm-backend", default="auto", choices=backend_names())
    parser.add_argument("--model", help="model name (ollama/openai) ")
    parser.add_argument("--model-path", help="GGUF file for the llamacpp backend (default: the embedded model)")
    parser.add_argument("--base-url", help="server URL for ollama/openai-compatible backends")
    parser.add_argument("--limit", type=int, help="annotate only the first N dialogues")
    parser.add_argument("--concurrency", type=int, default=4, help="LLM requests in flight at once")
    parser.add_argument("--max-tokens", type=int, default=160, help="reply length cap per request")
    parser.add_argument("--prompt", help="prompt YAML file (default: the built-in prompt of the task)")
    parser.add_argument("--intents", help="interaction-model YAML whose intents replace the prompt's")
    parser.add_argument("--slots", help="domain YAML whose slot names replace the prompt's")
    parser.add_argument("--overwrite", action="store_true", help="re-annotate records that already have labels")
    parser.add_argument("--retries", type=int, default=3, help="retries of a failed or unparseable request")
    parser.add_argument("--cache-dir", help="LLM response cache folder (default: $USERSIMCRS_CACHE_DIR or ~/.cache)")
    parser.add_argument(
        "--no-preflight",
        dest="preflight",
        action="store_false",
        help="skip the GET that shows the LLM server answers and takes the key, before the first call",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from data_converters.augment.runner import summary_line  # lazy: keeps `usersimcrs --help` fast
    from usersimcrs.core.validation import validate
    from usersimcrs.pipeline.annotate import AnnotateRequest, annotate_folder

    llm = {
        "backend": args.llm_backend,
        "model": args.model,
        "model_path": args.model_path,
        "base_url": args.base_url,
        "retries": max(0, args.retries),
        "cache_dir": args.cache_dir,
    }
    fields = {
        "task": args.task,
        "folder": args.folder,
        "llm": llm,
        "limit": args.limit,
        "concurrency": args.concurrency,
        "max_tokens": args.max_tokens,
        "prompt": args.prompt,
        "intents": args.intents,
        "slots": args.slots,
        "overwrite": args.overwrite,
        "preflight": args.preflight,
    }
    request = validate(AnnotateRequest, fields, source=None, flags=True)
    result = annotate_folder(request)
    print(summary_line(result.report) + f" -> {result.report_path}")
    return 0 if result.report.failed == 0 or result.report.annotated > 0 else 1
