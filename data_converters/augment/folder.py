"""A converted dataset folder: read its dialogues and items, write annotated dialogues back safely."""

from __future__ import annotations

from pathlib import Path

from data_converters.writer import DIALOGUEKIT, ITEMS_MAPPING
from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.dialoguekit_io import write_dialoguekit
from usersimcrs.core.items import ItemCollection
from usersimcrs.core.jsonl import read_models
from usersimcrs.core.run_folder import RunFolder
from usersimcrs.core.yaml_io import read_yaml
from usersimcrs.errors import DataError


class ConvertedFolder:
    """The output folder of `usersimcrs convert` (dialogues.jsonl required, items optional)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.folder = RunFolder(self.path)
        if not self.folder.dialogues_path.is_file():
            raise DataError(
                f"{self.path}: no {self.folder.dialogues_path.name} (expected the output folder of 'usersimcrs convert')"
            )

    def dialogues(self) -> list[Dialogue]:
        return read_models(self.folder.dialogues_path, Dialogue)

    def items(self) -> ItemCollection | None:
        """The folder's item collection (via items.yaml), or None when it has none."""
        mapping_file = self.path / ITEMS_MAPPING
        if not mapping_file.is_file():
            return None
        mapping = read_yaml(mapping_file)
        csv_path = self.path / mapping.pop("path", "items.csv")
        return ItemCollection.from_csv(csv_path, **mapping)

    def save_dialogues(self, dialogues: list[Dialogue]) -> None:
        """Replace the dialogues atomically (write a temp file, then rename) and refresh the DialogueKit file."""
        self.folder.write_dialogues(dialogues)
        write_dialoguekit(dialogues, self.path / DIALOGUEKIT)
