"""Plots as PNG bytes (matplotlib's Agg backend: no display, no fonts or files fetched from outside)."""

from __future__ import annotations

import io
from typing import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

DPI = 110
# one colour, marker and dash per system, fixed by its position in the sorted list of names, so a CRS
# keeps its look in every plot of a report; markers and dashes keep overlapping lines apart
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")
DASHES = ("-", "--", "-.", ":")


def series_styles(names: Sequence[str]) -> dict[str, dict[str, object]]:
    """Name -> matplotlib style (color, marker, linestyle), by sorted position: the same name, the same look."""
    return {
        name: {
            "color": PALETTE[i % len(PALETTE)],
            "marker": MARKERS[i % len(MARKERS)],
            "linestyle": DASHES[i % len(DASHES)],
        }
        for i, name in enumerate(sorted({str(n) for n in names}))
    }


def _png(fig: plt.Figure, *, tight: bool = True) -> bytes:
    """Render and close the figure; `tight` re-lays it out (twice the drawing time, for rotated labels)."""
    buffer = io.BytesIO()
    if tight:
        fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=DPI)
    plt.close(fig)
    return buffer.getvalue()


def curves_per_turn(
    panels: Mapping[str, Mapping[str, pd.Series]],
    *,
    ylabel: str,
    title: str,
    styles: Mapping[str, Mapping[str, object]] | None = None,
    horizon: int | None = None,
    ylim: tuple[float, float] | None = None,
) -> bytes:
    """One panel per key (e.g. a cut-off k or a metric), one line per series (turn -> value).

    The x axis runs over whole turns 1..`horizon` (a single point no longer gets an axis of 1.9-2.1);
    `ylim` fixes the range of bounded metrics; `styles` (see `series_styles`) keeps each system's look.
    """
    names = list(panels)
    styles = styles or series_styles([label for panel in panels.values() for label in panel])
    width = max(6.5, 4.2 * len(names))
    fig, axes = plt.subplots(1, max(1, len(names)), figsize=(width, 3.6), squeeze=False, layout="constrained")
    for ax, name in zip(axes[0], names):
        last = 1
        for label, series in panels[name].items():
            series = series.sort_index()
            style = dict(styles.get(str(label), {}))
            flat = len(series) > 0 and bool((series.fillna(0) == 0).all())
            text = f"{label} (0 on every turn)" if flat else str(label)  # lines at 0 hide each other: say so
            ax.plot(series.index, series.values, markersize=5, linewidth=1.6, alpha=0.85, label=text, **style)
            if len(series):
                last = max(last, int(series.index.max()))
        ax.set_title(name, fontsize=10)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlim(0.7, (horizon or last) + 0.3)
        if ylim:
            pad = 0.04 * (ylim[1] - ylim[0])
            ax.set_ylim(ylim[0] - pad, ylim[1] + pad)
        ax.set_xlabel("turn")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if panels[name]:
            ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=11)
    return _png(fig, tight=False)


def ranking_panels(
    panels: Mapping[str, pd.DataFrame],
    *,
    xlabel: str | Mapping[str, str],
    styles: Mapping[str, Mapping[str, object]],
    xlim: tuple[float, float] | None | Mapping[str, tuple[float, float] | None] = None,
    title: str = "",
) -> bytes:
    """One panel per simulator: each CRS's mean as a dot with its 95% CI, best at the top, labelled with n.

    Each frame has columns crs, mean, ci_low, ci_high, label and optionally `sensitivity` (the
    valid-only mean, drawn as a hollow marker beside the headline). `xlabel` and `xlim` may differ
    per panel (a mapping by panel name).
    """
    names = list(panels)
    rows = max([len(p) for p in panels.values()] + [1])
    fig, axes = plt.subplots(
        1,
        max(1, len(names)),
        figsize=(max(6.5, 4.6 * len(names)), 0.48 * rows + 1.5),
        squeeze=False,
        layout="constrained",
    )
    shown_sensitivity = False
    for ax, name in zip(axes[0], names):
        data = panels[name].reset_index(drop=True)
        y = np.arange(len(data))
        for i, row in data.iterrows():
            style = styles.get(str(row["crs"]), {})
            color = style.get("color", "#1f77b4")
            if not pd.isna(row["mean"]):
                low = row["mean"] - row["ci_low"] if not pd.isna(row["ci_low"]) else 0
                high = row["ci_high"] - row["mean"] if not pd.isna(row["ci_high"]) else 0
                ax.errorbar(
                    [row["mean"]],
                    [i],
                    xerr=[[max(low, 0)], [max(high, 0)]],
                    fmt=str(style.get("marker", "o")),
                    color=color,
                    capsize=4,
                    markersize=7,
                    linewidth=2,
                )
            if "sensitivity" in data and not pd.isna(row.get("sensitivity")):
                ax.plot(
                    [row["sensitivity"]],
                    [i + 0.22],
                    marker="D",
                    markersize=5,
                    markerfacecolor="white",
                    markeredgecolor="#555555",
                    linestyle="none",
                )
                shown_sensitivity = True
        if data["mean"].isna().all():
            ax.text(0.5, 0.5, "not measured (n=0)", transform=ax.transAxes, ha="center", va="center", color="#57606a")
        ax.set_yticks(y)
        ax.set_yticklabels([str(v) for v in data["label"]], fontsize=8)
        ax.set_ylim(len(data) - 0.5, -0.6)
        limits = xlim.get(name) if isinstance(xlim, Mapping) else xlim
        if limits:
            pad = 0.03 * (limits[1] - limits[0])
            ax.set_xlim(limits[0] - pad, limits[1] + pad)
        ax.set_xlabel(xlabel.get(name, "") if isinstance(xlabel, Mapping) else xlabel)
        ax.grid(axis="x", alpha=0.3)
        ax.set_title(name, fontsize=10)
    if shown_sensitivity:
        handle = plt.Line2D(
            [],
            [],
            marker="D",
            markersize=5,
            markerfacecolor="white",
            markeredgecolor="#555555",
            linestyle="none",
            label="valid only (sensitivity)",
        )
        fig.legend(handles=[handle], fontsize=7, loc="outside lower right", frameon=False)
    if title:
        fig.suptitle(title, fontsize=11)
    return _png(fig, tight=False)


def grouped_bars(values: pd.DataFrame, *, title: str, ylabel: str, ylim: tuple[float, float] | None = None) -> bytes:
    """Bars per row label (x axis: factors/aspects), one colour per column (e.g. CRS)."""
    labels = list(values.index)
    groups = list(values.columns)
    width = 0.8 / max(1, len(groups))
    fig, ax = plt.subplots(figsize=(max(5.0, 0.7 * len(labels) * max(1, len(groups)) ** 0.5 + 2), 3.8))
    x = np.arange(len(labels))
    for i, group in enumerate(groups):
        ax.bar(x + i * width - 0.4 + width / 2, values[group].to_numpy(dtype=float), width, label=str(group))
    ax.set_xticks(x)
    ax.set_xticklabels([str(label) for label in labels], rotation=35, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    if ylim:
        ax.set_ylim(*ylim)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(title, fontsize=11)
    return _png(fig)


def heatmap(matrix: pd.DataFrame, *, title: str, vmin: float = -1.0, vmax: float = 1.0, cmap: str = "RdBu_r") -> bytes:
    """A labelled matrix with the value written in each cell."""
    n_rows, n_cols = matrix.shape
    fig, ax = plt.subplots(figsize=(max(3.5, 0.55 * n_cols + 2.5), max(3.0, 0.45 * n_rows + 1.5)))
    values = matrix.to_numpy(dtype=float)
    image = ax.imshow(values, vmin=vmin, vmax=vmax, cmap=cmap)
    ax.set_xticks(range(n_cols))
    ax.set_xticklabels([str(c) for c in matrix.columns], rotation=45, ha="right", fontsize=7)
    ax.set_yticks(range(n_rows))
    ax.set_yticklabels([str(i) for i in matrix.index], fontsize=7)
    if n_rows * n_cols <= 400:
        for i in range(n_rows):
            for j in range(n_cols):
                if not np.isnan(values[i, j]):
                    strong = abs(values[i, j] - (vmin + vmax) / 2) > 0.3 * (vmax - vmin)
                    ax.text(
                        j,
                        i,
                        f"{values[i, j]:.2f}",
                        ha="center",
                        va="center",
                        fontsize=6,
                        color="white" if strong else "black",
                    )
    fig.colorbar(image, ax=ax, shrink=0.8)
    ax.set_title(title, fontsize=11)
    return _png(fig)


def trajectories(lines: Mapping[str, Sequence[float | None]], *, title: str, ylabel: str) -> bytes:
    """Lines over rounds 1..n (e.g. each debate role's mean score per round)."""
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    for label, values in lines.items():
        rounds = [i + 1 for i, v in enumerate(values) if v is not None]
        ax.plot(rounds, [v for v in values if v is not None], marker="o", label=str(label))
    ax.set_xlabel("round")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(title, fontsize=11)
    return _png(fig)


def labelled_scatter(
    panels: Mapping[str, Mapping[str, tuple[float, float]]], *, xlabel: str | Mapping[str, str], ylabel: str, title: str
) -> bytes:
    """One panel per key (e.g. a score), one labelled point per system: (x, y) = (score, human score)."""
    names = list(panels)
    width = max(5.0, 4.6 * len(names))
    fig, axes = plt.subplots(1, max(1, len(names)), figsize=(width, 4.0), squeeze=False)
    for ax, name in zip(axes[0], names):
        points = {k: v for k, v in panels[name].items() if v[0] is not None and v[1] is not None}
        xs = [p[0] for p in points.values()]
        ys = [p[1] for p in points.values()]
        ax.scatter(xs, ys, s=22)
        for label, (x, y) in points.items():
            ax.annotate(str(label), (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
        ax.set_title(name, fontsize=10)
        ax.set_xlabel(xlabel if isinstance(xlabel, str) else xlabel.get(name, name))
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    fig.suptitle(title, fontsize=11)
    return _png(fig)


def rank_comparison(rankings: Mapping[str, Sequence[str]], *, title: str) -> bytes:
    """A slope chart: one column per ranking (best at the top), a line joining each system's positions."""
    columns = list(rankings)
    systems = sorted({s for order in rankings.values() for s in order})
    depth = max([len(order) for order in rankings.values()] + [1])
    fig, ax = plt.subplots(figsize=(max(5.0, 2.6 * len(columns) + 2), max(3.0, 0.42 * depth + 1.4)))
    for system in systems:
        xs, ys = [], []
        for i, column in enumerate(columns):
            order = list(rankings[column])
            if system in order:
                xs.append(i)
                ys.append(order.index(system) + 1)
        line = ax.plot(xs, ys, marker="o", markersize=4)[0]
        if xs:
            ax.annotate(
                system,
                (xs[-1], ys[-1]),
                fontsize=6,
                xytext=(5, 0),
                textcoords="offset points",
                va="center",
                color=line.get_color(),
            )
    ax.set_xticks(range(len(columns)))
    ax.set_xticklabels(columns, fontsize=8)
    ax.set_xlim(-0.3, len(columns) - 0.3)
    ax.set_ylim(depth + 0.5, 0.5)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("rank (1 = best)")
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(title, fontsize=11)
    return _png(fig)


def interval_bars(
    rows: pd.DataFrame,
    *,
    label: str,
    value: str,
    low: str,
    high: str,
    title: str,
    xlabel: str,
    reference: float | None = None,
) -> bytes:
    """Horizontal points with CI whiskers, one row per label (e.g. a statistic or a system)."""
    data = rows.reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(6.5, max(2.2, 0.32 * len(data) + 1.2)))
    y = np.arange(len(data))
    values = data[value].astype(float).to_numpy()
    lows = data[low].astype(float).to_numpy()
    highs = data[high].astype(float).to_numpy()
    err = np.vstack([np.where(np.isnan(lows), 0, values - lows), np.where(np.isnan(highs), 0, highs - values)])
    ax.errorbar(values, y, xerr=np.clip(err, 0, None), fmt="o", capsize=3, markersize=4)
    if reference is not None:
        ax.axvline(reference, color="#999999", linestyle="--", linewidth=1)
    ax.set_yticks(y)
    ax.set_yticklabels([str(v) for v in data[label]], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(title, fontsize=11)
    return _png(fig)


def distribution_panels(panels: Mapping[str, Mapping[str, Sequence[float]]], *, title: str, columns: int = 4) -> bytes:
    """One box plot panel per key (e.g. a feature), one box per group (e.g. human and each simulator)."""
    names = list(panels)
    cols = max(1, min(columns, len(names)))
    rows = max(1, -(-len(names) // cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 2.9 * rows), squeeze=False)
    for ax in axes.flat[len(names) :]:
        ax.axis("off")
    for ax, name in zip(axes.flat, names):
        groups = {g: [v for v in values if v is not None and np.isfinite(v)] for g, values in panels[name].items()}
        groups = {g: v for g, v in groups.items() if v}
        if groups:
            ax.boxplot(list(groups.values()), showmeans=True)
            ax.set_xticks(range(1, len(groups) + 1))
            ax.set_xticklabels([str(g) for g in groups], rotation=30, ha="right", fontsize=7)
        ax.set_title(name, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(title, fontsize=11)
    return _png(fig)


def ladder_panels(
    panels: Mapping[str, pd.DataFrame], *, titles: Mapping[str, str] | None = None, columns: int = 4, title: str = ""
) -> bytes:
    """One panel per score: its mean per rung (x, best rung first) with the 95% CI, joined by a line.

    Each frame has columns rung, mean, ci_low, ci_high (rows best first); a missing mean leaves a gap.
    """
    names = list(panels)
    cols = max(1, min(columns, len(names)))
    rows = max(1, -(-len(names) // cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3.3 * cols + 0.4, 2.7 * rows + 0.5), squeeze=False)
    for ax in axes.flat[len(names) :]:
        ax.axis("off")
    for ax, name in zip(axes.flat, names):
        data = panels[name].reset_index(drop=True)
        x = np.arange(len(data))
        means = data["mean"].astype(float).to_numpy()
        lows = np.where(data["ci_low"].isna(), means, data["ci_low"].astype(float))
        highs = np.where(data["ci_high"].isna(), means, data["ci_high"].astype(float))
        ax.plot(x, means, color="#1f77b4", linewidth=1.2, alpha=0.6)
        ax.errorbar(x, means, yerr=np.clip([means - lows, highs - means], 0, None), fmt="o", color="#1f77b4", capsize=3)
        ax.set_xticks(x)
        ax.set_xticklabels([str(r) for r in data["rung"]], rotation=30, ha="right", fontsize=7)
        ax.set_title((titles or {}).get(name, name), fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    if title:
        fig.suptitle(title, fontsize=11)
    return _png(fig)
