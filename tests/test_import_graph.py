"""No hidden circles: the module graph of the project's own code has no cycle.

The graph holds every `import` / `from ... import` of the project's own modules (`usersimcrs`,
`crs_connectors`, `data_converters`, `benchmarks`) anywhere in a file: at module level, in a class
body, inside a function, under `if TYPE_CHECKING:`; relative imports resolved. `from pkg import name`
points at `pkg.name` when that is a module, else at `pkg`.

Imports under `if TYPE_CHECKING:` count, although they never run: a circle of types is still two
modules that cannot be read apart, import-linter counts them for the layer contracts too, and the
one such circle found (the NLG seam naming the corpus NLG's pool) went away by moving the pool down.
The registries' lazy `"module:Class"` strings are not imports: they are how a plug-in loads late, by
name (the plug-in's module imports its registry's, never the other way).

A function-local import of the project's own code is allowed only with its reason, a `# lazy: <why>`
comment on its line or on the line before (one comment before a run of imports covers the run): start-up
time, an optional extra, a heavy library. An import hidden inside a function to dodge a circle is what
this check exists to stop.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("usersimcrs", "crs_connectors", "data_converters", "benchmarks")
REASON = re.compile(r"#\s*lazy:\s*\S")


@dataclass(frozen=True)
class OwnImport:
    """One import of a project module: where it is written, what it reaches, whether it sits in a function."""

    source: str
    target: str
    path: Path
    line: int
    end_line: int
    local: bool


def module_name(path: Path) -> str:
    """The dotted module name of a file under ROOT (a package's `__init__.py` names the package)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    """Every module of the four packages, by dotted name."""
    return {module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


def resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest project module that `name` starts with, or None outside the project."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def targets(node: ast.Import | ast.ImportFrom, source: str, is_package: bool, modules: dict[str, Path]) -> set[str]:
    """The project modules one import statement reaches."""
    if isinstance(node, ast.Import):
        found = {resolve(alias.name, modules) for alias in node.names}
    else:
        base = node.module or ""
        if node.level:
            anchor = source.split(".") if is_package else source.split(".")[:-1]
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join(anchor + ([base] if base else []))
        found = {resolve(f"{base}.{alias.name}", modules) or resolve(base, modules) for alias in node.names}
    return {t for t in found if t is not None and t != source}


def own_imports(path: Path, source: str, modules: dict[str, Path]) -> Iterator[OwnImport]:
    """Every import of a project module in module `source` (file `path`)."""
    is_package = path.name == "__init__.py"

    def visit(node: ast.AST, local: bool) -> Iterator[OwnImport]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                for target in sorted(targets(child, source, is_package, modules)):
                    yield OwnImport(source, target, path, child.lineno, child.end_lineno or child.lineno, local)
            yield from visit(child, local or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))

    yield from visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), False)


@functools.cache
def all_imports() -> tuple[OwnImport, ...]:
    """The imports of every project module."""
    modules = project_modules()
    return tuple(imp for name, path in modules.items() for imp in own_imports(path, name, modules))


def circles(imports: Sequence[OwnImport]) -> list[list[str]]:
    """The strongly connected components of more than one module (each one a circle of imports)."""
    names = sorted({i.source for i in imports} | {i.target for i in imports})
    index = {name: n for n, name in enumerate(names)}
    rows = [index[i.source] for i in imports]
    cols = [index[i.target] for i in imports]
    graph = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(names), len(names)))
    count, labels = connected_components(graph, directed=True, connection="strong")
    groups = [[names[n] for n in np.flatnonzero(labels == label)] for label in range(count)]
    return sorted(group for group in groups if len(group) > 1)


@functools.cache
def reasoned(path: Path) -> set[int]:
    """First lines of the import statements in `path` that carry a reason: a `# lazy: ...` comment on one of
    their lines, on the line before, or on the first of a run of import statements written one after another."""
    lines = path.read_text(encoding="utf-8").splitlines()
    spans = sorted(
        (node.lineno, node.end_lineno or node.lineno)
        for node in ast.walk(ast.parse("\n".join(lines)))
        if isinstance(node, ast.Import | ast.ImportFrom)
    )
    covered: set[int] = set()
    ends: dict[int, int] = {}  # last line of a covered statement -> its first line
    for first, last in spans:
        before = lines[first - 2].strip() if first > 1 else ""
        if (
            any(REASON.search(line) for line in lines[first - 1 : last])
            or (before.startswith("#") and REASON.search(before))
            or (first - 1) in ends
        ):
            covered.add(first)
            ends[last] = first
    return covered


def has_reason(imp: OwnImport) -> bool:
    """Whether the import carries its reason (see `reasoned`)."""
    return imp.line in reasoned(imp.path)


def test_the_project_module_graph_has_no_circle():
    found = circles(all_imports())
    assert not found, "import circles (strongly connected modules):\n" + "\n".join(" <-> ".join(c) for c in found)


def test_every_function_local_import_of_the_project_says_why():
    bare = [i for i in all_imports() if i.local and not has_reason(i)]
    listed = sorted({f"{i.path.relative_to(ROOT)}:{i.line}: {i.target}" for i in bare})
    assert not listed, "function-local imports without a `# lazy: <why>` comment:\n" + "\n".join(listed)


def test_the_graph_sees_local_relative_and_type_checking_imports(tmp_path):
    """The checks above would pass vacuously if the walk missed the imports they are about."""
    modules = {"usersimcrs": ROOT / "usersimcrs" / "__init__.py", "usersimcrs.a": tmp_path / "a.py"}
    modules["usersimcrs.b"] = tmp_path / "b.py"
    modules["usersimcrs.a"].write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from usersimcrs import b\n"
        "def f():\n    from . import b  # lazy: the test\n    return b\n"
        "def g():\n    # lazy: said on the line before\n    from .b import thing\n"
        "def h():\n    from usersimcrs.b import thing  # noqa: a comment, not a reason\n"
        "def k():\n    import json  # lazy: the first of a run covers the run\n    from usersimcrs import b\n"
        "    x = 1\n    from usersimcrs import b\n",
        encoding="utf-8",
    )
    modules["usersimcrs.b"].write_text("import usersimcrs.a\n", encoding="utf-8")
    found = [imp for name in ("usersimcrs.a", "usersimcrs.b") for imp in own_imports(modules[name], name, modules)]
    assert [(i.source, i.target, i.line, i.local) for i in found] == [
        ("usersimcrs.a", "usersimcrs.b", 3, False),
        ("usersimcrs.a", "usersimcrs.b", 5, True),
        ("usersimcrs.a", "usersimcrs.b", 9, True),
        ("usersimcrs.a", "usersimcrs.b", 11, True),
        ("usersimcrs.a", "usersimcrs.b", 14, True),
        ("usersimcrs.a", "usersimcrs.b", 16, True),
        ("usersimcrs.b", "usersimcrs.a", 1, False),
    ]
    assert circles(found) == [["usersimcrs.a", "usersimcrs.b"]]
    assert [has_reason(i) for i in found if i.local] == [True, True, False, True, False]
