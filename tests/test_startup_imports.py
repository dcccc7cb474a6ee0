"""Start-up stays light: the CLI parser and a run's modules import no heavy library they do not use.

Each check runs in a fresh interpreter, since this test process has imported everything already.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("pandas", "matplotlib", "scipy", "llama_cpp", "sklearn", "ray", "numpy")
LLM_SDKS = ("openai", "ollama", "httpx")  # used only with `llm.client: official` (or `backend: auto`)


def imported_after(code: str) -> set[str]:
    """Top-level packages in sys.modules after running `code` in a fresh interpreter."""
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True)
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_building_the_cli_parser_imports_no_heavy_library():
    loaded = imported_after("import usersimcrs.cli as cli\ncli.build_parser()")
    assert not loaded & set(HEAVY + LLM_SDKS), sorted(loaded & set(HEAVY + LLM_SDKS))


@pytest.mark.parametrize(
    "modules",
    [
        "usersimcrs.pipeline.simulate, usersimcrs.engine.runner, usersimcrs.llm.provider",
        "usersimcrs.llm.backends.openai_chat, usersimcrs.llm.backends.ollama_chat, usersimcrs.llm.backends.auto_select",
        "crs_connectors.crs_arena, crs_connectors.http, crs_connectors.transport",
    ],
)
def test_a_run_with_the_default_clients_imports_no_sdk(modules):
    loaded = imported_after(f"import {modules}")
    assert not loaded & set(HEAVY + LLM_SDKS), sorted(loaded & set(HEAVY + LLM_SDKS))


def test_a_named_command_registers_its_own_module_only():
    probe = (
        "import json, sys\nimport usersimcrs.cli as cli\n"
        "cli.build_parser(cli.modules_for(['-v', 'run', 'x.yaml']))\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('usersimcrs.cli.', 'data_converters')))))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["usersimcrs.cli.run"]


def test_every_command_name_finds_its_module_and_help_lists_them_all():
    import argparse

    from usersimcrs import cli

    parser = cli.build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert len(commands) == len(cli.COMMAND_MODULES)
    for command in commands:
        module = cli.command_module(command)
        assert module is not None, command
        alone = cli.build_parser([module])
        only = next(a for a in alone._actions if isinstance(a, argparse._SubParsersAction)).choices
        assert list(only) == [command]
    assert (
        cli.modules_for(["--help"])
        == cli.modules_for(["no-such-command"])
        == cli.modules_for([])
        == cli.COMMAND_MODULES
    )
    assert cli.modules_for(["--version", "run"]) == cli.COMMAND_MODULES
