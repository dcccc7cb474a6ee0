"""Options several subcommands share are declared once (cli/options.py): same default and help everywhere."""

from __future__ import annotations

import argparse

import pytest

from usersimcrs.cli import build_parser


def _option(command: list[str], flag: str) -> argparse.Action:
    parser = build_parser()
    for name in command:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return next(a for a in parser._actions if flag in a.option_strings)


@pytest.mark.parametrize("command", [["report"], ["metrics"], ["meta-eval"], ["judge"], ["export"]])
def test_dedupe_is_one_option(command):
    action = _option(command, "--dedupe")
    assert action.default is False and action.help == (
        "a conversation ID on several lines: keep its first line (default: refuse the run, with the count)"
    )


@pytest.mark.parametrize("command", [["fidelity"], ["meta-eval"], ["evaluator", "cv"]])
def test_resampling_is_one_option(command):
    assert (_option(command, "--resamples").default, _option(command, "--seed").default) == (1000, 0)
