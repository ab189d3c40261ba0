"""Figures: one style, saved as PNG with the plotted numbers beside as CSV.

Each method draws its paper's figures in its own ``figures.py`` with these helpers; plot
functions take result tables (DataFrames) and never recompute results, so a reader can redraw
any figure from its CSV alone.
"""
from __future__ import annotations

import io
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from robustkit.artifacts import atomic_write_text
from robustkit.config import figures_dir

PALETTE = {"clean": "#4C72B0", "biased": "#DD8452"}
KIT, PAPER = "#4C72B0", "#999999"  # the kit's own numbers, and a paper's published ones


def set_style(inline: bool = False) -> None:
    """The kit's one plot style. With ``inline`` (``rk.start``), figures are also shown inline
    when running in a notebook kernel, even where ``MPLBACKEND`` names a non-interactive backend."""
    if inline:
        try:
            from IPython import get_ipython
        except ImportError:
            get_ipython = None
        shell = get_ipython() if get_ipython else None
        if shell is not None and shell.__class__.__name__ == "ZMQInteractiveShell":
            shell.run_line_magic("matplotlib", "inline")
    sns.set_theme(context="notebook", style="whitegrid", font_scale=0.95)
    plt.rcParams.update({"figure.dpi": 100, "savefig.dpi": 150, "savefig.bbox": "tight"})


def figure_suffix(scale: str) -> str:
    """The suffix of a figure's name at ``scale``: none at tiny (the notebooks' own figures),
    ``_<scale>`` above (``corm_table1_small``), so a larger run never overwrites the tiny one."""
    return "" if scale == "tiny" else f"_{scale}"


def save(fig, name: str, table: pd.DataFrame | None = None) -> Path:
    """Write ``figures/<name>.png`` (and ``<name>.csv`` with the plotted numbers), each whole or
    not at all: a run killed mid-write never leaves a truncated figure beside a stale table."""
    out = figures_dir() / f"{name}.png"
    png = io.BytesIO()
    fig.savefig(png, format="png")
    atomic_write_text(out, png.getvalue())
    if table is not None:
        save_table(table, name)
    return out


def save_table(table: pd.DataFrame, name: str) -> Path:
    """Write ``figures/<name>.csv`` atomically."""
    out = figures_dir() / f"{name}.csv"
    atomic_write_text(out, table.to_csv(index=False))
    return out


def plot_gap(table: pd.DataFrame, *, scale: str, name: str | None = "gap_mini"):
    """Premise-matching passage at rank 1 and reader accuracy, clean vs biased, per type.

    ``table`` is ``relevance_robustness_gap``'s output (one row per question, type, condition).
    """
    set_style()
    metrics = [m for m in ("premise@1", "gold@1", "correct") if m in table.columns]
    long = (table.groupby(["type", "condition"])[metrics].mean().reset_index()
            .melt(id_vars=["type", "condition"], var_name="metric", value_name="rate"))
    grid = sns.catplot(data=long, x="type", y="rate", hue="condition", col="metric", kind="bar",
                       hue_order=["clean", "biased"], palette=PALETTE, height=3.2, aspect=1.1, sharey=True)
    grid.set_titles("{col_name}")
    grid.set_xticklabels(rotation=20)
    n = table["question_id"].nunique()
    grid.figure.suptitle(f"Biased rewrites pull similarity retrieval to premise evidence "
                         f"(scale {scale}, n={n} questions)", y=1.04)
    if name:
        save(grid.figure, name, long)
    return grid.figure
