"""Plug-in registries: a YAML `type:` name resolves to a class without if/elif chains.

Built-ins are registered lazily as "module:attribute" strings so that importing the toolkit does
not import every backend; third-party plug-ins register with the decorator or through the entry
point group ``usersimcrs.<kind>`` (e.g. ``usersimcrs.connectors``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

from usersimcrs.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps plug-in names to classes (or factories) of one kind."""

    def __init__(self, kind: str, builtins: dict[str, str] | None = None) -> None:
        self.kind = kind
        self._lazy: dict[str, str] = dict(builtins or {})
        self._loaded: dict[str, T] = {}
        self._entry_points_read = False
        self._from_entry_points: set[str] = set()

    def register(self, name: str, target: T | str | None = None) -> Any:
        """Register `target` under `name`; without a target, acts as a class decorator."""
        if target is None:

            def decorator(obj: T) -> T:
                self._loaded[name] = obj
                return obj

            return decorator
        if isinstance(target, str):
            self._lazy[name] = target
        else:
            self._loaded[name] = target
        return target

    def names(self) -> list[str]:
        """All registered names, built-in and plug-in."""
        self._read_entry_points()
        return sorted(set(self._lazy) | set(self._loaded))

    def __contains__(self, name: object) -> bool:
        """Whether `name` is registered (entry points are read only when it is not a built-in)."""
        if name in self._loaded or name in self._lazy:
            return True
        self._read_entry_points()
        return name in self._lazy

    def get(self, name: str) -> T:
        """Resolve `name` to its class; an unknown name is a ConfigError listing the known ones."""
        if name in self._loaded:
            return self._loaded[name]
        if name not in self._lazy:
            self._read_entry_points()
        if name in self._lazy:
            module_name, _, attr = self._lazy[name].partition(":")
            obj = getattr(importlib.import_module(module_name), attr)
            self._loaded[name] = obj
            return obj
        if ":" in name or "." in name:
            return _import_dotted(name)
        raise ConfigError(f"unknown {self.kind} type {name!r}; known: {', '.join(self.names())}")

    def _read_entry_points(self) -> None:
        if self._entry_points_read:
            return
        self._entry_points_read = True
        for ep in entry_points(group=f"usersimcrs.{self.kind}"):
            if ep.name not in self._lazy and ep.name not in self._loaded:
                self._lazy[ep.name] = ep.value
                self._from_entry_points.add(ep.name)

    def reload_entry_points(self) -> None:
        """Forget the plug-ins found through entry points; the next lookup reads them again
        (after a plug-in was installed into a running process, e.g. in a test)."""
        for name in self._from_entry_points:
            self._lazy.pop(name, None)
            self._loaded.pop(name, None)
        self._from_entry_points = set()
        self._entry_points_read = False


def _import_dotted(path: str) -> Any:
    """Import `package.module:attr` or `package.module.attr`."""
    if ":" in path:
        module_name, attr = path.split(":", 1)
    else:
        module_name, _, attr = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot import {path!r}: {exc}") from exc


Factory = Callable[..., Any]
