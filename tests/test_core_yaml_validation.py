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
