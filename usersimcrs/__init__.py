"""usersimcrs: simulation-based evaluation of conversational recommender systems.

The public API, for notebooks and scripts (the `usersimcrs` command is a thin shell over it)::

    import usersimcrs as us
    run = us.simulate(crs=MyCRS(), simulator="agenda", items="movies.csv", conversations=50)
    print(us.score(run).summary)
    us.judge(run, "quality", llm=us.LLM("openai", model="gpt-4o-mini"))
    us.write_report(run)
    run = us.load_run("runs/quickstart")      # any run folder, written by the API or the CLI

Names are imported on first use, so `import usersimcrs` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from usersimcrs.version import __version__

_EXPORTS = {
    "simulate": "usersimcrs.pipeline.api:simulate",
    "simulate_async": "usersimcrs.pipeline.api:simulate_async",
    "LLM": "usersimcrs.pipeline.api:LLM",
    "judge": "usersimcrs.pipeline.api:judge",
    "JudgeResult": "usersimcrs.pipeline.judge:JudgeResult",
    "run_matrix": "usersimcrs.pipeline.matrix:run_matrix",
    "MatrixConfig": "usersimcrs.pipeline.matrix:MatrixConfig",
    "import_run": "usersimcrs.pipeline.imports:import_run",
    "export_run": "usersimcrs.pipeline.export:export_run",
    "probe_crs": "usersimcrs.pipeline.probe:probe_crs",
    "score": "usersimcrs.pipeline.score:score",
    "Scores": "usersimcrs.pipeline.score:Scores",
    "write_report": "usersimcrs.pipeline.report:report",
    "load_run": "usersimcrs.core.run_folder:load_run",
    "Run": "usersimcrs.core.run_folder:Run",
    "Manifest": "usersimcrs.core.run_folder:Manifest",
    "RunConfig": "usersimcrs.config:RunConfig",
    "load_run_config": "usersimcrs.config:load_run_config",
    "MetricsConfig": "usersimcrs.metrics.config:MetricsConfig",
    "ItemCollection": "usersimcrs.core.items:ItemCollection",
    "Item": "usersimcrs.core.items:Item",
    "ItemRef": "usersimcrs.core.dialogue:ItemRef",
    "Dialogue": "usersimcrs.core.dialogue:Dialogue",
    "Utterance": "usersimcrs.core.dialogue:Utterance",
    "UserProfile": "usersimcrs.core.profile:UserProfile",
    "CRSReply": "crs_connectors.base:CRSReply",
    "CRSConnector": "crs_connectors.base:CRSConnector",
    "UserSimulator": "usersimcrs.simulators.base:UserSimulator",
    "Stop": "usersimcrs.simulators.base:Stop",
}

__all__ = [
    "__version__",
    "simulate",
    "simulate_async",
    "LLM",
    "judge",
    "JudgeResult",
    "run_matrix",
    "MatrixConfig",
    "import_run",
    "export_run",
    "probe_crs",
    "score",
    "Scores",
    "write_report",
    "load_run",
    "Run",
    "Manifest",
    "RunConfig",
    "load_run_config",
    "MetricsConfig",
    "ItemCollection",
    "Item",
    "ItemRef",
    "Dialogue",
    "Utterance",
    "UserProfile",
    "CRSReply",
    "CRSConnector",
    "UserSimulator",
    "Stop",
]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from crs_connectors.base import CRSConnector, CRSReply
    from usersimcrs.config import RunConfig, load_run_config
    from usersimcrs.core.dialogue import Dialogue, ItemRef, Utterance
    from usersimcrs.core.items import Item, ItemCollection
    from usersimcrs.core.profile import UserProfile
    from usersimcrs.core.run_folder import Manifest, Run, load_run
    from usersimcrs.metrics.config import MetricsConfig
    from usersimcrs.pipeline.api import LLM, judge, simulate, simulate_async
    from usersimcrs.pipeline.export import export_run
    from usersimcrs.pipeline.imports import import_run
    from usersimcrs.pipeline.judge import JudgeResult
    from usersimcrs.pipeline.matrix import MatrixConfig, run_matrix
    from usersimcrs.pipeline.probe import probe_crs
    from usersimcrs.pipeline.report import report as write_report
    from usersimcrs.pipeline.score import Scores, score
    from usersimcrs.simulators.base import Stop, UserSimulator


def __getattr__(name: str) -> Any:
    """Import a public name on first access."""
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'usersimcrs' has no attribute {name!r}")
    module_name, _, attr = target.partition(":")
    value = getattr(importlib.import_module(module_name), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
