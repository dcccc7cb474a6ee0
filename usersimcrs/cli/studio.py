"""`usersimcrs studio STUDY.yaml`: the web studio for human studies (serve, export, links, load test)."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "studio",
        help="run a human study in the browser: chats, battles, annotations, Turing tests (docs/studio.md)",
        description="Serve a study (binds 127.0.0.1 unless told otherwise), export its records in the formats "
        "meta-eval and fidelity read, issue personal links, or load-test it. See docs/studio.md.",
    )
    parser.add_argument("study", help="the study YAML (e.g. configs/studio_example.yaml)")
    parser.add_argument("--output", help="the study folder (default: the study's `output`)")
    parser.add_argument("--host", help="address to listen on (default: the study's host, 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port to listen on (0: any free port; default: the study's port)")
    parser.add_argument("--export", metavar="DIR", help="write the study's records into DIR and exit (no server)")
    parser.add_argument("--links", type=int, metavar="N", help="issue N more personal links, print them and exit")
    parser.add_argument(
        "--load-test", action="store_true", help="drive the study with simulated participants and print figures"
    )
    parser.add_argument("--participants", type=int, default=50, help="load test: participants at once (default 50)")
    parser.add_argument("--duration", type=float, default=120.0, help="load test: seconds (default 120)")
    parser.add_argument(
        "--kill-at", type=float, default=None, help="load test: SIGKILL the server after this many seconds, restart"
    )
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    # lazy: keeps `usersimcrs --help` fast
    from usersimcrs.studio.commands import export_command, links_command, load_test_command, serve_command

    if args.export:
        return export_command(args.study, args.export, output=args.output)
    if args.links is not None:
        return links_command(args.study, args.links, output=args.output, host=args.host, port=args.port)
    if args.load_test:
        return load_test_command(
            args.study,
            participants=args.participants,
            duration_s=args.duration,
            kill_at_s=args.kill_at,
            output=args.output,
        )
    return serve_command(args.study, output=args.output, host=args.host, port=args.port)
