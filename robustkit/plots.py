"""Figures: one style, saved as PNG with the plotted numbers beside as CSV.

Each method draws its paper's figures in its own ``figures.py`` with these helpers; plot
functions take result tables (DataFrames) and never recompute results, so a reader can redraw
any figure from its CSV alone.
"""
from __future__ import annotations

import io
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from robustkit.artifacts import atomic_write_text
from robustkit.paths import figures_dir

PALETTE = {"clean": "#4C72B0", "biased": "#DD8452"}
KIT, PAPER = "#4C72B0", "#999999"  # the kit's own numbers, and a paper's published ones
_GAP_TITLES = {"premise@1": "premise@1: a premise passage ranked 1st",
               "gold@1": "gold@1: a gold passage ranked 1st", "correct": "correct: the reader's answer"}


def require_columns(table: pd.DataFrame, columns: list[str], what: str) -> None:
    """Refuse a table that lacks a column a figure draws, naming the missing ones and what it has."""
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(f"{what} needs column(s) {missing}; the table has {list(table.columns)}")


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


def plot_gap(table: pd.DataFrame, *, scale: str, paper: pd.DataFrame | None = None, name: str | None = "gap_mini"):
    """Premise-matching passage at rank 1, gold at rank 1 and reader accuracy, clean vs biased,
    per bias type: bars with 95% CIs over questions, and with ``paper`` (``corm.paper.TABLE1``:
    CoRM-RAG's Table 1, Biased-NQ) its published biased accuracy of the same retriever as a
    labelled line on the accuracy panel.

    ``table`` is ``gap.relevance_robustness_gap``'s output (one row per question, type,
    condition); ``gap.gap_rates`` summarises it, and its table (kit and paper rows, ``source``
    column) is what is drawn and saved.
    """
    from robustkit.gap import gap_rates

    rates = gap_rates(table, paper=paper)
    set_style()
    kit, published = rates[rates["source"] == "kit"], rates[rates["source"] == "paper"]
    metrics, types = list(dict.fromkeys(kit["metric"])), sorted(kit["type"].unique())
    retriever = kit["retriever"].iloc[0]
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.6 * len(metrics), 3.6), sharey=True, squeeze=False)
    width, x = 0.38, np.arange(len(types))
    for ax, metric in zip(axes[0], metrics):
        for j, condition in enumerate(("clean", "biased")):
            rows = kit[(kit["metric"] == metric) & (kit["condition"] == condition)].set_index("type").reindex(types)
            xs = x + (j - 0.5) * width
            ax.bar(xs, rows["rate"], width, color=PALETTE[condition], label=condition)
            ax.errorbar(xs, rows["rate"], yerr=[rows["rate"] - rows["CI low"], rows["CI high"] - rows["rate"]],
                        fmt="none", ecolor="black", capsize=3, lw=1)
        if metric == "correct" and paper is not None:
            _paper_line(ax, published, retriever)
        ax.set_xticks(x, [t.replace("_", "\n") for t in types], fontsize=9)
        ax.set(ylim=(0, 1.05))
        ax.set_title(_GAP_TITLES.get(metric, metric), fontsize=10)
    axes[0][0].set_ylabel("rate (share of questions)")
    handles, labels = axes[0][-1].get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: labels[i].startswith("paper"))  # the kit's first
    fig.legend([handles[i] for i in order], [labels[i] for i in order], loc="upper center",
               bbox_to_anchor=(0.5, 0.0), ncol=len(handles), fontsize=8, frameon=False)
    fig.suptitle(f"Biased rewrites pull similarity retrieval to premise evidence"
                 f"{f' ({retriever} retriever)' if retriever else ''}\n"
                 f"bars: 95% bootstrap CIs over questions (scale {scale}, n = {int(kit['n'].max())} questions)",
                 fontsize=10)
    fig.tight_layout()
    if name:
        save(fig, name, rates)
    return fig


def _paper_line(ax, published: pd.DataFrame, retriever) -> None:
    """The paper's biased accuracy (all bias types pooled) as a dashed line across the panel,
    or a note that it has none for this retriever."""
    if published.empty:
        what = f"the {retriever} retriever" if retriever else "this retriever"
        ax.text(0.02, 0.97, f"paper: no value for {what}", transform=ax.transAxes, va="top", fontsize=7,
                color="dimgray", bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8})
        return
    row = published.iloc[0]
    ax.axhline(row["rate"], color="dimgray", ls="--", lw=1.6, zorder=3,
               label=f"paper: {row['paper method']}, biased, Biased-NQ {100 * row['rate']:.1f}% (all types pooled)")
    # the number beside the axis, where no bar or error bar can sit under it
    ax.annotate(f"paper\n{100 * row['rate']:.1f}%", (1.01, row["rate"]), xycoords=ax.get_yaxis_transform(),
                va="center", fontsize=7, color="dimgray")
