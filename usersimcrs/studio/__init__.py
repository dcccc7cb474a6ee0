"""The studio: human studies in the toolkit (chat, battle, annotate, turing) over the same connectors
that simulated users talk to, stored so that `meta-eval` and `fidelity` read the results directly.

`load_study(path)` reads a study YAML; `serve(study)` runs its web server (needs the `studio`
extra); `export_study(study, DIR)` writes its records in the toolkit's formats, without a server.
See docs/studio.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from usersimcrs.studio.config import Study, StudyConfig, load_study
from usersimcrs.studio.server import serve as _serve

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.studio.export import ExportSummary

__all__ = ["Study", "StudyConfig", "export_study", "load_study", "serve"]


def export_study(study: Study, output: str | Path) -> ExportSummary:
    """Write the study's records into `output` in the toolkit's formats (see `usersimcrs.studio.export`)."""
    from usersimcrs.studio.export import export_study as _export  # lazy: pandas only when a study is exported

    return _export(study, output)


def serve(study: Study, *, host: str | None = None, port: int | None = None) -> None:
    """Run the study's web server until stopped (see `usersimcrs.studio.server.serve`)."""
    _serve(study, host=host, port=port)
