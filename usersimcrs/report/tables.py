"""Tables as CSV (for analysis) and Markdown (for papers and READMEs), written side by side."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from usersimcrs.core.storage import write_atomic


def format_cell(value: object, digits: int = 3) -> str:
    """Numbers rounded, missing values as an en dash, everything else as text."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        if value.is_integer() and abs(value) >= 1000:
            return f"{int(value)}"
        return f"{value:.{digits}f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def p_value_text(p: float, digits: int = 3) -> str:
    """'0.012', and '< 0.001' for a p-value that rounds to zero at `digits` (a p-value is never 0)."""
    floor = 10.0**-digits
    return f"< {floor:.{digits}f}" if p < floor else f"{p:.{digits}f}"


def is_p_column(name: str) -> bool:
    """Columns that hold p-values (`p`, `p_value`, `p_holm`): written '< 0.001' rather than '0.000'."""
    return name == "p" or name.startswith("p_")


def _cell(value: object, column: str, digits: int) -> str:
    if is_p_column(column) and isinstance(value, float) and not math.isnan(value):
        return p_value_text(value, digits)
    return format_cell(value, digits)


def markdown_table(table: pd.DataFrame, *, digits: int = 3, index: bool = False) -> str:
    """A GitHub-flavoured Markdown table (no extra dependency)."""
    data = table.reset_index() if index else table
    header = [str(c) for c in data.columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in data.itertuples(index=False):
        lines.append("| " + " | ".join(_cell(v, c, digits) for v, c in zip(row, header)) + " |")
    return "\n".join(lines) + "\n"


def html_table(table: pd.DataFrame, *, digits: int = 3, index: bool = False) -> str:
    """An HTML table with the same cell formatting as the Markdown one."""
    data = (table.reset_index() if index else table).copy()
    data.columns = [str(c) for c in data.columns]  # drops a leftover columns name (it would print as a header)
    formatted = (
        data.apply(lambda column: column.map(lambda v: _cell(v, str(column.name), digits))) if len(data) else data
    )
    return formatted.to_html(index=False, border=0, classes="data", escape=True)


def write_table(
    table: pd.DataFrame, folder: str | Path, name: str, *, digits: int = 3, index: bool = False
) -> list[Path]:
    """Write `name`.csv and `name`.md into `folder`; returns both paths."""
    folder = Path(folder)
    csv_path, md_path = folder / f"{name}.csv", folder / f"{name}.md"
    write_atomic(csv_path, table.to_csv(index=index))
    write_atomic(md_path, markdown_table(table, digits=digits, index=index))
    return [csv_path, md_path]


def mean_with_ci(summary: pd.DataFrame, *, digits: int = 3) -> pd.Series:
    """'mean [low, high]' strings from a summary table with mean / ci_low / ci_high columns."""

    def one(row: pd.Series) -> str:
        if pd.isna(row["mean"]):
            return "–"
        return f"{row['mean']:.{digits}f} [{row['ci_low']:.{digits}f}, {row['ci_high']:.{digits}f}]"

    return summary.apply(one, axis=1)
