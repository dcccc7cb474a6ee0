"""llm.backend is checked against the llm_backends registry, which includes backends installed by entry point."""

from __future__ import annotations

import asyncio
import textwrap

import pytest

from usersimcrs.config import RunConfig
from usersimcrs.core.validation import validate
from usersimcrs.errors import ConfigError
from usersimcrs.llm import LLMConfig, LLMProvider, Message
from usersimcrs.llm.backends import backend_names, llm_backends

PLUGIN = '''
from usersimcrs.core.usage import Usage
from usersimcrs.llm.base import LLM, LLMResult


class ShoutingBackend(LLM):
    """Answers with the last message in capitals, so a test can tell it answered."""

    backend = "shouting"

    def __init__(self, config):
        self.model = config.model or "shout-1"

    async def complete(self, messages, **kwargs):
        return LLMResult(text=messages[-1].content.upper(), usage=Usage(prompt_tokens=1, completion_tokens=1),
                         model=self.model, backend=self.backend)
'''


@pytest.fixture
def installed_plugin(tmp_path, monkeypatch):
    """A distribution `shouting-backend` installed into a folder on sys.path, with its entry point."""
    (tmp_path / "shouting_backend.py").write_text(PLUGIN)
    info = tmp_path / "shouting_backend-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: shouting-backend\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        textwrap.dedent("""\
            [usersimcrs.llm_backends]
            shouting = shouting_backend:ShoutingBackend
        """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    llm_backends.reload_entry_points()
    yield "shouting"
    monkeypatch.undo()
    llm_backends.reload_entry_points()


def test_an_unknown_backend_fails_listing_the_known_ones():
    with pytest.raises(ConfigError) as info:
        validate(RunConfig, {"llm": {"backend": "olama"}, "simulator": {}, "crs": {}}, source="run.yaml")
    message = str(info.value)
    assert message.startswith("run.yaml: key 'llm.backend': ") and "'olama'" in message
    for name in ("auto", "ollama", "openai", "llamacpp"):
        assert name in message.split("known: ", 1)[1]


def test_a_backend_installed_by_entry_point_validates_and_answers(installed_plugin, tmp_path):
    assert installed_plugin in backend_names()
    config = LLMConfig(backend=installed_plugin, model="m1", cache_dir=str(tmp_path / "cache"))

    async def ask():
        provider = LLMProvider(config)
        try:
            result = await provider.get("simulator").complete([Message(role="user", content="a thriller please")])
            return result, provider.usage_summary(), provider.models()
        finally:
            await provider.aclose()

    result, usage, models = asyncio.run(ask())
    assert result.text == "A THRILLER PLEASE" and result.backend == "shouting"
    assert (
        models == {"simulator": "shouting:m1"}
        and usage["calls"] == 1
        and usage["by_model"]["shouting:m1"]["prompt_tokens"] == 1
    )


def test_a_plugin_backend_is_gone_once_uninstalled(installed_plugin, monkeypatch):
    monkeypatch.undo()
    llm_backends.reload_entry_points()
    with pytest.raises(ValueError, match="unknown LLM backend 'shouting'"):
        LLMConfig(backend="shouting")
