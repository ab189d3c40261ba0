"""FVA-RAG's figures: Table 2 as bars with question-level CIs — accuracy above, intervention
rate below — the paper's values as labelled markers on the same axes; saved as PNG + CSV under
``figures/`` (the CSV is what is plotted)."""
from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from robustkit.fva.experiments import METHOD_LABELS
from robustkit.plots import PAPER, save, set_style

CACHE_COLOURS = {"A": "#4C72B0", "B": "#55A868"}
TOP = 110  # the y-axis ends here, the strip above 100 holding the paper's numbers
COLUMNS = ["dataset", "method", "cache", "accuracy", "accuracy 95% CI", "CI low", "CI high",
           "intervention rate", "n", "source"]


def plot_table2(table: pd.DataFrame, *, scale: str, name: str | None = "fva_table2"):
    """Per dataset (columns): accuracy per method and cache (top) and the intervention rate of the
    methods that can override their first answer (bottom); the paper's TruthfulQA values as ◆,
    each with its number in a strip above 100 (clear of the kit's bars and CIs)."""
    set_style()
    kit = table[table["source"] == "kit"]
    datasets = list(dict.fromkeys(kit["dataset"]))
    fig, axes = plt.subplots(2, len(datasets), figsize=(max(7.5, 5.6 * len(datasets)), 6.6), squeeze=False,
                             sharey="row", gridspec_kw={"height_ratios": [3, 2]})
    methods = [m for m in METHOD_LABELS if m in set(kit["method"])]
    intervening = [m for m in methods if kit.loc[kit["method"] == m, "intervention rate"].notna().any()]
    width = 0.38
    for col, dataset in enumerate(datasets):
        rows = kit[kit["dataset"] == dataset]
        for ax, metric, names in ((axes[0][col], "accuracy", methods), (axes[1][col], "intervention rate", intervening)):
            for j, cache in enumerate(("A", "B")):
                part = rows[rows["cache"] == cache].set_index("method").reindex(names)
                x = np.arange(len(names)) + (j - 0.5) * width
                ax.bar(x, part[metric], width, color=CACHE_COLOURS[cache], label=f"kit, cache {cache}")
                if metric == "accuracy":
                    ax.errorbar(x, part["accuracy"], fmt="none", ecolor="black", capsize=3, lw=1,
                                yerr=[part["accuracy"] - part["CI low"], part["CI high"] - part["accuracy"]])
                if dataset == "truthfulqa":
                    published = table[(table["source"] == "paper") & (table["cache"] == cache)].set_index("method")
                    shown = [(xi, published.loc[m, metric]) for xi, m in zip(x, names)
                             if m in published.index and pd.notna(published.loc[m, metric])]
                    if shown:
                        ax.scatter(*zip(*shown), marker="D", s=36, color=PAPER, edgecolor="black", zorder=3,
                                   label="paper (its value printed\nabove the bars)" if j == 0 else None)
                        _numbers_above(ax, shown)
            ax.set_xticks(np.arange(len(names)), [textwrap.fill(METHOD_LABELS[m], 12) for m in names], fontsize=9)
            ax.set_ylim(0, TOP)
            ax.set_yticks(range(0, 101, 20))
        n = int(rows["n"].iloc[0])
        axes[0][col].set_title(f"{dataset} (n = {n} questions per bar)")
        axes[0][0].set_ylabel("true answers (%)")
        axes[1][0].set_ylabel("intervention rate (%)\n(falsified / corrective retrieval)")
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    fig.suptitle(f"FVA-RAG Table 2 — TruthfulQA's rule (ROUGE-L), 95% bootstrap CIs over questions, scale {scale}\n"
                 "(the paper's accuracy is judged truthfulness: compare shapes, not levels)", y=1.02, fontsize=10)
    fig.tight_layout()
    if name:
        save(fig, name, table[COLUMNS])
    return fig


def _numbers_above(ax, shown: list[tuple[float, float]]) -> None:
    """Each paper ◆'s value, as printed in the paper, at its x in the strip above 100: beside the ◆
    it would sit on a kit bar or its error bar."""
    for xi, value in shown:
        ax.annotate(f"{value:g}", (xi, 100), xytext=(0, 2), textcoords="offset points", ha="center",
                    va="bottom", fontsize=7, color="dimgray")


def plot_tau_curve(curve: pd.DataFrame, *, scale: str, tau: float, name: str | None = "fva_tau"):
    """``experiments.tau_sweep`` with revisions: FVA-RAG's accuracy (CI band) and intervention rate
    against τ, one panel per dataset, one colour per cache; the run's τ marked."""
    set_style()
    datasets = list(dict.fromkeys(curve["dataset"]))
    fig, axes = plt.subplots(1, len(datasets), figsize=(max(7.5, 5.2 * len(datasets)), 3.6), sharey=True, squeeze=False)
    for ax, dataset in zip(axes[0], datasets):
        for cache, part in curve[curve["dataset"] == dataset].groupby("cache"):
            colour = CACHE_COLOURS[cache]
            ax.plot(part["tau"], part["accuracy"], color=colour, label=f"accuracy, cache {cache}")
            ax.fill_between(part["tau"], part["CI low"], part["CI high"], color=colour, alpha=0.15, lw=0)
            ax.plot(part["tau"], part["intervention rate"], color=colour, ls="--", label=f"intervention rate, cache {cache}")
        ax.axvline(tau, color="black", lw=0.8, ls=":")
        ax.text(tau, 98, f" run's τ = {tau}", fontsize=8, va="top")
        n = int(curve.loc[curve["dataset"] == dataset, "n"].iloc[0])
        ax.set(title=f"{dataset} (n = {n} per cache)", xlabel="τ (falsified when max P(contradiction) ≥ τ)",
               ylim=(0, 100), xlim=(0, 1))
    axes[0][0].set_ylabel("%")
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    fig.suptitle(f"FVA-RAG at every τ, scale {scale} — exact: each draft's revision written once\n"
                 "(95% bootstrap CIs over questions; a display: τ stays the paper's 0.5)", y=1.06, fontsize=10)
    if name:
        save(fig, name, curve)
    return fig
