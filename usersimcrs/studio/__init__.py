"""The studio: human studies in the toolkit (chat, battle, annotate, turing) over the same connectors
that simulated users talk to, stored so that `meta-eval` and `fidelity` read the results directly.

`load_study(path)` reads a study YAML; `serve(study)` runs its web server (needs the `studio`
extra); `export_study(study, DIR)` writes its records in the toolkit's formats, without a server.
See docs/studio.md.
"""

from __future__ import annotations

from usersimcrs.studio.config import Study, StudyConfig, load_study
from usersimcrs.studio.export import ExportSummary, export_study

__all__ = ["ExportSummary", "Study", "StudyConfig", "export_study", "load_study", "serve"]


def serve(study: Study, *, host: str | None = None, port: int | None = None) -> None:
    """Run the study's web server until stopped (see `usersimcrs.studio.server.serve`)."""
    from usersimcrs.studio.server import serve as _serve

    _serve(study, host=host, port=port)
