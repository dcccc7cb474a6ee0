"""The `usersimcrs` command. Each subcommand lives in its own module with `register(subparsers)`."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from typing import NoReturn

from usersimcrs.errors import UserError
from usersimcrs.version import __version__

# subcommand module names, in the order `--help` lists them
COMMAND_MODULES = [
    "quickstart",
    "run",
    "matrix",
    "ladder",
    "convert",
    "annotate",
    "judge",
    "metrics",
    "report",
    "compare",
    "plan",
    "agreement",
    "probe_crs",
    "export",
    "import_",
    "bench",
    "nlu_eval",
    "meta_eval",
    "evaluator",
    "export_run",
    "fidelity",
    "fidelity_reference",
    "studio",
]


class Parser(argparse.ArgumentParser):
    """argparse with the toolkit's one error prefix: a usage mistake ends in `error: ...` (exit 2),
    the same prefix as every other error the commands print."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"error: {self.prog}: {message}\n")


def command_module(command: str) -> str | None:
    """The module of a subcommand name (`probe-crs` -> `probe_crs`, `import` -> `import_`), None when unknown."""
    return next((name for name in COMMAND_MODULES if name.rstrip("_").replace("_", "-") == command), None)


def modules_for(argv: list[str]) -> list[str]:
    """The subcommand modules a command line needs: the named command's alone (a run's start-up does
    not import the other commands' modules), every one for help, `--version` or an unknown name."""
    for token in argv:
        if token in ("-h", "--help", "--version"):
            break
        if not token.startswith("-"):
            module = command_module(token)
            return [module] if module is not None else COMMAND_MODULES
    return COMMAND_MODULES


def build_parser(modules: list[str] | None = None) -> argparse.ArgumentParser:
    """The `usersimcrs` parser with the subcommands of `modules` (every one by default)."""
    parser = Parser(
        prog="usersimcrs",
        description="Evaluate conversational recommender systems with simulated users.",
    )
    parser.add_argument("--version", action="version", version=f"usersimcrs {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES if modules is None else modules:
        try:
            module = importlib.import_module(f"usersimcrs.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"usersimcrs.cli.{name}":
                continue
            raise
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(modules_for(argv))
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows up here rather than at interpreter exit
        return code
    except BrokenPipeError:
        return _stdout_gone()
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return int(getattr(exc, "exit_code", 2))  # e.g. 74 for a full disk, 75 for a folder another process writes
    except OSError as exc:  # a folder that cannot be made, a file that cannot be written: one line, no traceback
        print(f"error: {describe_os_error(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def describe_os_error(exc: OSError) -> str:
    """`path: reason` of an operating-system error (both paths of a failed rename)."""
    reason = exc.strerror or str(exc)
    paths = [str(p) for p in (exc.filename, exc.filename2) if p is not None]
    return f"{' -> '.join(paths)}: {reason}" if paths else reason


def _stdout_gone() -> int:
    """The reader of our output went away (`usersimcrs metrics RUN | head`): stop quietly.

    Python's documented remedy: point stdout at devnull so the final flush cannot fail again.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 128 + 13  # what a shell reports for a writer stopped by SIGPIPE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
