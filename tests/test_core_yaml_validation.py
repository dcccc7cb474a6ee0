"""The one YAML reader and the one validation-error formatter: every failure is one line naming the file and key."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from usersimcrs.core.validation import describe_validation_error, validate
from usersimcrs.core.yaml_io import load_yaml_model, read_yaml
from usersimcrs.errors import ConfigError, DataError
from usersimcrs.prompts import load_prompt, load_prompt_file


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    size: int


class Outer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    inner: Inner


def one_line_error(call, *args, **kwargs) -> str:
    with pytest.raises(ConfigError) as info:
        call(*args, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_bad_syntax_names_file_and_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\ninner: [unclosed\n")
    message = one_line_error(read_yaml, path)
    assert message.startswith(f"{path}:") and "invalid YAML" in message
    assert message.split(":")[1].isdigit()


def test_missing_file_and_non_mapping(tmp_path):
    assert str(tmp_path / "nope.yaml") in one_line_error(read_yaml, tmp_path / "nope.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    assert one_line_error(read_yaml, tmp_path / "list.yaml").endswith("expected a mapping at the top level")
    (tmp_path / "empty.yaml").write_text("")
    assert read_yaml(tmp_path / "empty.yaml") == {}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: x\ninner: {size: 1, colour: red}\n", "unknown key 'cfg.inner.colour'"),
        ("name: x\ninner: {}\n", "missing key 'cfg.inner.size'"),
        ("name: x\ninner: {size: many}\n", "key 'cfg.inner.size': Input should be a valid integer"),
    ],
)
def test_model_errors_name_the_dotted_key(tmp_path, text, expected):
    path = tmp_path / "model.yaml"
    path.write_text(text)
    message = one_line_error(load_yaml_model, path, Outer, prefix="cfg")
    assert message.startswith(f"{path}: {expected}")


def test_a_valid_file_loads_as_the_model(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("name: x\ninner: {size: 3}\n")
    assert load_yaml_model(path, Outer).inner.size == 3


def test_validate_raises_the_requested_error_kind():
    with pytest.raises(DataError, match=r"^data.jsonl: record 2: missing key 'inner'$"):
        validate(Outer, {"name": "x"}, source="data.jsonl: record 2", error=DataError)


def test_a_misspelled_prompt_key_is_rejected_with_file_and_key(tmp_path):
    base = load_prompt("simulators/llm_single")
    path = tmp_path / "my_prompt.yaml"
    path.write_text("system: You are a picky viewer.\nsytem_suffix: oops\n")
    assert one_line_error(load_prompt_file, path, base=base) == f"{path}: unknown key 'sytem_suffix'"


def test_a_prompt_key_of_the_wrong_kind_is_rejected(tmp_path):
    base = load_prompt("simulators/llm_single")
    path = tmp_path / "my_prompt.yaml"
    path.write_text("labels: just a string\n")
    assert one_line_error(load_prompt_file, path, base=base).startswith(f"{path}: key 'labels':")


def test_a_valid_prompt_file_overrides_only_its_keys(tmp_path):
    base = load_prompt("simulators/llm_single")
    path = tmp_path / "my_prompt.yaml"
    path.write_text("system: You are a picky viewer.\n")
    merged = load_prompt_file(path, base=base)
    assert merged["system"] == "You are a picky viewer."
    assert {k: v for k, v in merged.items() if k != "system"} == {k: v for k, v in base.items() if k != "system"}


def test_command_line_fields_are_named_as_flags():
    class Options(BaseModel):
        max_turns: int

    with pytest.raises(ValidationError) as info:
        Options.model_validate({"max_turns": "many"})
    assert describe_validation_error(info.value, source=None, flags=True).startswith("--max-turns: Input should be")


class Nested(BaseModel):
    model_config = ConfigDict(extra="forbid")
    conversations: int = 1
    inner: Inner | None = None
    rows: list[Inner] = []


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"conversatons": 3}, "f.yaml: unknown key 'conversatons' (did you mean 'conversations'?)"),
        # the typo is named, not the key it left missing
        ({"inner": {"sise": 1}}, "f.yaml: unknown key 'inner.sise' (did you mean 'size'?)"),
        ({"rows": [{"size": 1, "sizes": 2}]}, "f.yaml: unknown key 'rows.0.sizes' (did you mean 'size'?)"),
        ({"colour": "red"}, "f.yaml: unknown key 'colour'"),  # nothing close: no guess
    ],
)
def test_an_unknown_key_names_the_key_given_and_the_close_one_meant(data, expected):
    with pytest.raises(ConfigError) as info:
        validate(Nested, data, source="f.yaml")
    assert str(info.value) == expected


def test_a_key_set_on_the_command_line_is_blamed_on_the_flag():
    overrides = {"inner.sise": "--set inner.sise=1"}
    with pytest.raises(ConfigError) as info:
        validate(Nested, {"inner": {"sise": 1}}, source="f.yaml", overrides=overrides)
    assert str(info.value) == "--set inner.sise=1: unknown key 'inner.sise' (did you mean 'size'?)"
    with pytest.raises(ConfigError, match=r"^f\.yaml: unknown key 'colour'$"):  # the file's own mistake
        validate(Nested, {"colour": 1}, source="f.yaml", overrides=overrides)


def _run_config(tmp_path, **changes):
    from pathlib import Path

    import yaml

    items = Path(__file__).resolve().parents[1] / "configs" / "data" / "tiny_movies.csv"
    data = {"name": "t", "items": {"path": str(items)}, "simulator": {"type": "agenda"}, "crs": {"type": "popularity"}}
    data.update(changes)
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("changes", "flags", "expected"),
    [
        ({"conversatons": 3}, [], "{path}: unknown key 'conversatons' (did you mean 'conversations'?)"),
        ({}, ["conversatons=3"], "--set conversatons=3: unknown key 'conversatons' (did you mean 'conversations'?)"),
        ({"simulator": {"typ": "agenda"}}, [], "{path}: unknown key 'simulator.typ' (did you mean 'type'?)"),
        (
            {},
            ["simulator.typ=agenda"],
            "--set simulator.typ=agenda: unknown key 'simulator.typ' (did you mean 'type'?)",
        ),
        (
            {},
            ["simulator.nlg_typ=x"],
            "--set simulator.nlg_typ=x: unknown key 'simulator.nlg_typ' (did you mean 'nlg'?)",
        ),
        ({}, ["crs.kk=3"], "--set crs.kk=3: unknown key 'crs.kk' (did you mean 'k'?)"),
    ],
)
def test_run_config_typos_are_named_with_a_suggestion_and_their_origin(tmp_path, capsys, changes, flags, expected):
    from usersimcrs.cli import main

    path = _run_config(tmp_path, **changes)
    sets = [arg for flag in flags for arg in ("--set", flag)]
    assert main(["run", str(path), "-o", str(tmp_path / "out"), *sets]) == 2
    assert capsys.readouterr().err.strip() == "error: " + expected.format(path=path)
    assert not (tmp_path / "out" / "dialogues.jsonl").exists()
