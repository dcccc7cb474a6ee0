"""Read-only resources that the runs of one command share: item collections, loaded models, indexes.

A matrix runs, scores and reports several cells that usually name the same item file; each used to
read it again (13.8k MovieLens items, ~0.4 s a time, 16 times for a 4-cell matrix), and to load the
satisfaction classifier and build the BM25 index once per cell. The command now owns one
`SharedResources` and passes it down (to `RunContext.resources`, `Run`, the metrics), so each is built
once. It is an explicit object, never module state: two commands (or two tests) never share one.

Only what is read-only after it is built belongs here. An item collection qualifies: its title memo
and indexes only ever give the same answer to the same question, whoever asked first.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable, Hashable, Mapping, TypeVar

from pydantic import BaseModel, ConfigDict

from usersimcrs.core.items import ItemCollection

T = TypeVar("T")


class ItemFile(BaseModel):
    """What decides an item collection read from a file: the file as it is now and the options it is read with."""

    model_config = ConfigDict(frozen=True)

    path: str  # resolved
    size: int
    mtime_ns: int
    id_column: str
    title_column: str
    mapping: tuple[tuple[str, str], ...] | None
    delimiters: tuple[tuple[str, str], ...]
    max_items: int | None = None


def _item_file(path: str | Path, options: Mapping[str, Any], max_items: int | None) -> ItemFile:
    """The key of an item file read with `options` (`ItemCollection.from_csv`'s): its resolved path, size and
    modification time (a file rewritten meanwhile is read again) and the options. OSError when it cannot
    be stat'ed."""
    resolved = Path(path).resolve()
    stat = resolved.stat()
    mapping = options["mapping"]
    return ItemFile(
        path=str(resolved),
        size=stat.st_size,
        mtime_ns=stat.st_mtime_ns,
        id_column=options["id_column"],
        title_column=options["title_column"],
        mapping=tuple(mapping.items()) if mapping is not None else None,
        delimiters=tuple(sorted(options["delimiters"].items())),
        max_items=max_items,
    )


class _Same:
    """A dict key that stands for one object by identity (and keeps it alive, so its id is never reused)."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __hash__(self) -> int:
        return id(self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.value is self.value


class SharedResources:
    """Resources built once per owner (a command) and handed, read-only, to every run it reads or runs."""

    def __init__(self) -> None:
        self._values: dict[Hashable, Any] = {}
        self._lock = threading.RLock()  # a factory may ask for another resource (a cut collection reads the file)

    def get(self, key: Hashable, factory: Callable[[], T]) -> T:
        """The resource under `key`, built by `factory` on first use (a factory that raises stores nothing)."""
        with self._lock:
            if key not in self._values:
                self._values[key] = factory()
            value: T = self._values[key]
            return value

    def derived(self, source: object, key: Hashable, factory: Callable[[], T]) -> T:
        """A resource built from `source` (e.g. an item collection) and what `key` names: one per `source` object.

        `source` is held by identity, not compared by value, and kept alive with the resource."""
        return self.get((key, _Same(source)), factory)

    def items(
        self,
        path: str | Path,
        *,
        id_column: str = "movieId",
        title_column: str = "title",
        mapping: Mapping[str, str] | None = None,
        delimiters: Mapping[str, str] | None = None,
        max_items: int | None = None,
    ) -> ItemCollection:
        """The item collection of a CSV file (see `ItemCollection.from_csv`), the first `max_items` when given;
        read once per file state and options. DataError when unreadable, as `from_csv`."""
        options: dict[str, Any] = {
            "id_column": id_column,
            "title_column": title_column,
            "mapping": dict(mapping) if mapping is not None else None,
            "delimiters": dict(delimiters or {}),
        }
        try:
            key = _item_file(path, options, max_items)
        except OSError:  # unreadable: from_csv says so in its own words
            return ItemCollection.from_csv(path, **options)
        if max_items is None:
            return self.get(key, lambda: ItemCollection.from_csv(path, **options))
        whole = self.items(path, **options)
        return self.get(key, lambda: ItemCollection(list(whole)[:max_items]))


__all__ = ["ItemFile", "SharedResources"]
