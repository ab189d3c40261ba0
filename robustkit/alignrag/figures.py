"""AlignRAG's figures: Table 1 as bars, Fig. 2 (out-of-domain drop), Fig. 3 (accuracy per
critique round), Fig. 4 (informative vs noisy retrieval), Fig. 6 (critic ablation) and the
critics' training curves. Each takes a table from ``alignrag.experiments`` (never recomputing
it), draws 95% CIs as error bars or bands, puts the paper's values (``paper.py``) on the same
axis as labelled ◆ (it has none for Figs. 3, 4 and 6, and their legends say so), and saves
PNG + CSV under ``figures/`` (the CSV is exactly what is plotted).
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from robustkit.alignrag.experiments import ABLATION, METHODS, POOLED
from robustkit.plots import PAPER, require_columns, save, set_style

METHOD_COLOURS = dict(zip(METHODS, ["#BBBBBB", "#8C8C8C", "#DD8452", "#937860", "#DA8BC3", "#4C72B0", "#55A868"]))
RETRIEVAL_COLOURS = {"informative": "#55A868", "noisy": "#C44E52"}
CRITICS = ("cft", "w/o ccs", "cpo")  # the trained critics of a training-curves table
_BARS = ["accuracy", "CI low", "CI high", "n"]
NO_PAPER_VALUES = "paper: no numbers printed\nfor {} — none drawn"


def plot_table1(table: pd.DataFrame, scale: str, name: str | None = "alignrag_table1"):
    """Table 1: every method's accuracy per dataset (bars, 95% CIs), and the paper's averages over
    its own benchmarks as ◆ in their own group on the same axis."""
    _require(table, ["dataset", "method", *_BARS, "source"], "plot_table1")
    set_style()
    kit, published = table[table["source"] == "kit"], table[table["source"] == "paper"]
    groups = list(dict.fromkeys(kit["dataset"])) + list(dict.fromkeys(published["dataset"]))
    methods = [m for m in METHODS if m in set(table["method"])]
    fig, ax = plt.subplots(figsize=(1.9 * len(groups) + 2.5, 4))
    width, drawn = 0.8 / len(methods), 0
    for j, method in enumerate(methods):
        x = np.arange(len(groups)) + (j - (len(methods) - 1) / 2) * width
        rows = kit[kit["method"] == method].set_index("dataset").reindex(groups)
        _bars(ax, x, rows, width, METHOD_COLOURS[method], method)
        mine = published[published["method"] == method].set_index("dataset").reindex(groups)
        drawn += _diamonds(ax, x, mine["accuracy"], None if drawn else "paper", mine.get("paper method"))
    n = kit.groupby("dataset", sort=False)["n"].max()
    ax.set_xticks(np.arange(len(groups)), [f"{g}\n(n = {int(n[g])})" if g in n else g.replace(" (", "\n(")
                                           for g in groups], fontsize=8)
    ax.set(ylim=(0, 105), ylabel="accuracy (%)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    ax.set_title(f"AlignRAG Table 1 — final-answer accuracy, 95% bootstrap CIs over questions (scale {scale}, "
                 f"n = {int(n.drop(POOLED, errors='ignore').sum())} questions)", fontsize=10)
    _save(fig, name, table[["dataset", "method", *_BARS, "source"]])
    return fig


def plot_ood_drop(table: pd.DataFrame, scale: str, name: str | None = "alignrag_fig2_ood"):
    """Fig. 2: in-domain − out-of-domain accuracy per method (points, bars with 95% CIs); the
    paper's values as ◆ beside the methods they map onto, on an axis of their own: they are read
    off the paper's figure in its units, not accuracy points (``paper.OOD_DROP``)."""
    _require(table, ["method", "drop", "CI low", "CI high", "n_in", "n_out", "source"], "plot_ood_drop")
    set_style()
    kit, published = table[table["source"] == "kit"], table[table["source"] == "paper"]
    methods = [m for m in METHODS if m in set(kit["method"])]
    rows = kit.set_index("method").reindex(methods)
    fig, ax = plt.subplots(figsize=(1.1 * len(methods) + 2.5, 3.8))
    x = np.arange(len(methods))
    ax.bar(x, rows["drop"], 0.6, color=[METHOD_COLOURS[m] for m in methods])
    ax.errorbar(x, rows["drop"], yerr=[rows["drop"] - rows["CI low"], rows["CI high"] - rows["drop"]],
                fmt="none", ecolor="black", capsize=3, lw=1)
    # beside the bar, not on it, so the kit's error bar stays readable; on the right-hand axis,
    # since the paper's numbers are in its figure's own units
    paper_ax = ax.twinx()
    paper_values = published.set_index("method").reindex(methods)["drop"]
    _diamonds(paper_ax, x + 0.36, paper_values, "paper (right axis: its Fig. 2's own units)")
    paper_ax.set_ylim(0, 1.25 * paper_values.max() if paper_values.notna().any() else 1)
    paper_ax.set_ylabel("paper's Fig. 2 value (its units)", color=PAPER)
    paper_ax.grid(False)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(x, methods, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("kit: in-domain − out-of-domain accuracy (points)")
    handles, labels = paper_ax.get_legend_handles_labels()
    ax.legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.12, 1), frameon=False)
    ax.set_title(f"AlignRAG Fig. 2 — in − out-of-domain accuracy, bars with 95% CIs (scale {scale}, n = {int(kit['n_in'].max())} in-domain, "
                 f"{int(kit['n_out'].max())} out-of-domain questions)", fontsize=10)
    _save(fig, name, table[["method", "drop", "CI low", "CI high", "n_in", "n_out", "source"]])
    return fig


def plot_iterations(table: pd.DataFrame, scale: str, name: str | None = "alignrag_fig3_iterations"):
    """Fig. 3: accuracy after each critique round t = 0..T, one panel per dataset, one line per
    method with its 95% CI as a band. ``paper.py`` has no values for Fig. 3: the legend says so."""
    columns = ["method", "dataset", "iteration", "accuracy", "n", "CI low", "CI high"]
    _require(table, columns, "plot_iterations")
    set_style()
    datasets = list(dict.fromkeys(table["dataset"]))
    fig, axes = plt.subplots(1, len(datasets), figsize=(4 * len(datasets), 3.4), sharey=True, squeeze=False)
    for ax, dataset in zip(axes[0], datasets):
        part = table[table["dataset"] == dataset]
        for method, line in part.groupby("method", sort=False):
            colour = METHOD_COLOURS[method]
            ax.plot(line["iteration"], line["accuracy"], marker="o", color=colour, label=method)
            ax.fill_between(line["iteration"], line["CI low"], line["CI high"], color=colour, alpha=0.2, lw=0)
        ax.set_xticks(sorted(part["iteration"].unique()))
        ax.set(title=f"{dataset} (n = {int(part['n'].max())})", xlabel="critique round t", ylim=(0, 100))
    axes[0][0].set_ylabel("accuracy (%)")
    _legend_without_paper_values(axes[0][-1], "Fig. 3")
    fig.suptitle(f"AlignRAG Fig. 3 — accuracy per critique round, 95% CI bands (scale {scale})", y=1.03)
    _save(fig, name, table[columns])
    return fig


def plot_informative(table: pd.DataFrame, scale: str, name: str | None = "alignrag_fig4_informative"):
    """Fig. 4: each method's accuracy on questions with informative vs noisy retrieval (bars with
    95% CIs), datasets pooled (the ``all (pooled)`` rows, or the only dataset's). ``paper.py`` has
    no values for Fig. 4: the legend says so."""
    _require(table, ["dataset", "method", "retrieval", *_BARS], "plot_informative")
    set_style()
    scope = POOLED if POOLED in set(table["dataset"]) else table["dataset"].iloc[0]
    part = table[table["dataset"] == scope]
    methods = [m for m in METHODS if m in set(part["method"])]
    fig, ax = plt.subplots(figsize=(1.1 * len(methods) + 2.5, 3.8))
    for j, retrieval in enumerate(RETRIEVAL_COLOURS):
        rows = part[part["retrieval"] == retrieval].set_index("method").reindex(methods)
        n = int(rows["n"].max()) if rows["n"].notna().any() else 0
        _bars(ax, np.arange(len(methods)) + (j - 0.5) * 0.38, rows, 0.38, RETRIEVAL_COLOURS[retrieval],
              f"{retrieval} (n = {n})")
    ax.set_xticks(np.arange(len(methods)), methods, rotation=20, ha="right", fontsize=8)
    ax.set(ylim=(0, 105), ylabel="accuracy (%)")
    _legend_without_paper_values(ax, "Fig. 4")
    ax.set_title(f"AlignRAG Fig. 4 — informative vs noisy retrieval ({scope}, scale {scale})", fontsize=10)
    _save(fig, name, part[["method", "retrieval", *_BARS]])
    return fig


def plot_ablation(table: pd.DataFrame, scale: str, name: str | None = "alignrag_fig6_ablation"):
    """Fig. 6: no critique, an untrained critic, a critic without contrastive critiques and
    AlignRAG's critic per dataset (bars with 95% CIs). ``paper.py`` has no values for Fig. 6: the
    legend says so."""
    _require(table, ["dataset", "method", *_BARS], "plot_ablation")
    set_style()
    datasets = list(dict.fromkeys(table["dataset"]))
    methods = [m for m in ABLATION if m in set(table["method"])]
    fig, ax = plt.subplots(figsize=(1.8 * len(datasets) + 2.5, 3.8))
    width = 0.8 / len(methods)
    for j, method in enumerate(methods):
        rows = table[table["method"] == method].set_index("dataset").reindex(datasets)
        _bars(ax, np.arange(len(datasets)) + (j - (len(methods) - 1) / 2) * width, rows, width,
              METHOD_COLOURS[method], method)
    n = table.groupby("dataset", sort=False)["n"].max()
    ax.set_xticks(np.arange(len(datasets)), [f"{d}\n(n = {int(n[d])})" for d in datasets], fontsize=8)
    ax.set(ylim=(0, 105), ylabel="accuracy (%)")
    _legend_without_paper_values(ax, "Fig. 6")
    ax.set_title(f"AlignRAG Fig. 6 — critic ablation, 95% bootstrap CIs over questions (scale {scale})", fontsize=10)
    _save(fig, name, table[["dataset", "method", *_BARS]])
    return fig


def plot_training_curves(curves: pd.DataFrame, scale: str, name: str | None = "alignrag_training"):
    """Training loss per optimiser step of each trained critic, on its own objective: token NLL for
    the fine-tuned critics (CFT, w/o CCS), the DPO loss for CPO (so they get separate panels)."""
    _require(curves, ["critic", "step", "loss"], "plot_training_curves")
    unknown = sorted(set(curves["critic"]) - set(CRITICS))
    if unknown:
        raise ValueError(f"unknown critic(s) {unknown}; expected some of {list(CRITICS)}")
    set_style()
    panels = [p for p in ((("cft", "w/o ccs"), "SFT loss (token NLL)"), (("cpo",), "DPO loss"))
              if set(p[0]) & set(curves["critic"])]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 3.2), squeeze=False)
    colours = {"cft": METHOD_COLOURS["alignrag"], "w/o ccs": METHOD_COLOURS["critic-no-ccs"],
               "cpo": METHOD_COLOURS["alignrag-cpo"]}
    for ax, (critics, label) in zip(axes[0], panels):
        for critic in critics:
            line = curves[curves["critic"] == critic]
            if len(line):
                ax.plot(line["step"], line["loss"], color=colours[critic], label=f"{critic} ({len(line)} steps)")
        ax.set(xlabel="optimiser step", ylabel=label)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(fontsize=8)
    fig.suptitle(f"AlignRAG critic training (scale {scale})", y=1.03)
    _save(fig, name, curves[["critic", "step", "loss"]])
    return fig


def _bars(ax, x, rows: pd.DataFrame, width: float, colour: str, label: str) -> None:
    """Bars at ``x`` with their 95% CIs as error bars; groups without a row are left empty."""
    have = rows["accuracy"].notna().to_numpy()
    if have.any():
        acc = rows["accuracy"][have]
        ax.bar(x[have], acc, width, color=colour, label=label)
        ax.errorbar(x[have], acc, yerr=[acc - rows["CI low"][have], rows["CI high"][have] - acc],
                    fmt="none", ecolor="black", capsize=2, lw=1)


def _diamonds(ax, x, values: pd.Series, label: str | None, names: pd.Series | None = None) -> int:
    """The paper's values as grey ◆, each with its number (and the paper's method name) beside;
    returns how many were drawn."""
    have = values.notna().to_numpy()
    if have.any():
        ax.scatter(x[have], values[have], marker="D", s=40, color=PAPER, edgecolor="black", zorder=3, label=label)
        texts = names[have] if names is not None else [""] * int(have.sum())
        for xi, v, text in zip(x[have], values[have], texts):  # named: above, rotated; bare: to the right
            ax.annotate(f"{text} {v:.1f}".strip(), (xi, v), xytext=(0, 6) if text else (6, 0),
                        textcoords="offset points", ha="center" if text else "left", va="bottom" if text else "center",
                        rotation=90 if text else 0, fontsize=7, color="dimgray")
    return int(have.sum())


def _legend_without_paper_values(ax, figure: str) -> None:
    """The legend beside the axes, its last entry saying that no paper values are drawn:
    ``paper.py`` records none for ``figure``."""
    handles, labels = ax.get_legend_handles_labels()
    ax.legend([*handles, Line2D([], [], ls="none")], [*labels, NO_PAPER_VALUES.format(figure)],
              fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)


def _require(table: pd.DataFrame, columns: list[str], what: str) -> None:
    require_columns(table, columns, what)
    if table.empty:
        raise ValueError(f"{what} got an empty table")


def _save(fig, name: str | None, plotted: pd.DataFrame) -> None:
    if name:
        save(fig, name, plotted)
