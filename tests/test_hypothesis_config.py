"""Hostile run configs (property-based): random YAML, wrong types, bad overrides -> ConfigError only."""

from __future__ import annotations

import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from usersimcrs.config import RunConfig, load_run_config, set_dotted
from usersimcrs.errors import ConfigError

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats(allow_nan=False) | st.text(max_size=10)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)
TOP_KEYS = list(RunConfig.model_fields) + ["max_turn", "crs_", "Seed"]
section = st.dictionaries(
    st.sampled_from(["type", "path", "fallback_path", "backend", "model", "base_url", "retries", "items_path", "x"]),
    values,
    max_size=4,
)
config_like = st.dictionaries(st.sampled_from(TOP_KEYS), values | section, max_size=8)
yaml_fragments = st.sampled_from(
    [
        "name: x\n",
        "seed: 2001-13-45\n",
        "when: 2001-02-30 10:00:00\n",
        "a: &x [1, *x]\n",
        "? [a, b]\n: c\n",
        "conversations: -1\n",
        "- just\n- a list\n",
        "'unterminated\n",
        "key: !!python/object:os.system ls\n",
        "seed: 0x1F\n",
        "concurrency: .inf\n",
        "simulator: {type: agenda}\n",
        "crs: [1, 2]\n",
        "\t tab: 1\n",
        "max_turns: 1e400\n",
        "llm: {backend: openai, retries: '3'}\n",
        "%YAML 1.1\n---\n",
        "{{\n",
        ":\n",
        "~\n",
        "seed: 99999999999999999999999999\n",
    ]
)


def _load(text: str, overrides: list[str] | None = None) -> RunConfig | None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            return load_run_config(path, overrides)
        except ConfigError as exc:
            message = str(exc)
            assert "\n" not in message.strip() and (str(path) in message or message.startswith("--set"))
            return None


@SETTINGS
@given(st.text(max_size=120))
def test_random_text_as_yaml(text):
    _load(text)


@SETTINGS
@given(st.lists(yaml_fragments, min_size=1, max_size=4))
def test_tricky_yaml_fragments(fragments):
    _load("".join(fragments))


@SETTINGS
@given(config_like)
def test_config_shaped_mappings(data):
    text = yaml.safe_dump(data, allow_unicode=True)
    config = _load(text)
    if config is not None:
        assert isinstance(config.simulator, dict) and isinstance(config.crs, dict)


@SETTINGS
@given(st.lists(st.text(max_size=20), max_size=3))
def test_random_overrides(overrides):
    _load(yaml.safe_dump({"simulator": {"type": "agenda"}, "crs": {"type": "popularity"}}), overrides)


@SETTINGS
@given(st.text(max_size=30))
def test_set_dotted_never_crashes_on_nested_scalars(assignment):
    data = {"llm": {"retries": 3}, "seed": 1}
    try:
        set_dotted(data, assignment)
    except ConfigError:
        pass
