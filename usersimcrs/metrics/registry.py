"""Registered metric families: built-ins by name, plug-ins through the `usersimcrs.metrics` entry points."""

from __future__ import annotations

from usersimcrs.registry import Registry

metric_families: Registry = Registry(
    "metrics",
    {
        "length": "usersimcrs.metrics.length:LengthFamily",
        "success": "usersimcrs.metrics.success:SuccessFamily",
        "recall": "usersimcrs.metrics.recall:RecallFamily",
        "coverage": "usersimcrs.metrics.coverage:CoverageFamily",
        "exploration": "usersimcrs.metrics.exploration:ExplorationFamily",
        "satisfaction": "usersimcrs.metrics.satisfaction:SatisfactionFamily",
        "simulator": "usersimcrs.metrics.simulator_signals:SimulatorSignalsFamily",
        "items": "usersimcrs.metrics.item_resolution:ItemResolutionFamily",
    },
)

DEFAULT_ORDER = ["length", "success", "recall", "coverage", "exploration", "satisfaction", "simulator", "items"]


def family_names(selected: list[str] | None = None) -> list[str]:
    """The families to compute: the selection, else the built-ins in order and then any plug-ins."""
    if selected is not None:
        return list(selected)
    names = metric_families.names()
    return [n for n in DEFAULT_ORDER if n in names] + [n for n in names if n not in DEFAULT_ORDER]
