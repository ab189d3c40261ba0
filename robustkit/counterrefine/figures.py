"""CounterRefine's figures: Fig. 2 (correct rate per dataset with question-level CIs) and Fig. 3
(outcome transitions), the paper's values on the same axes as labelled markers; saved as PNG + CSV
under ``figures/`` (the CSV is exactly what is plotted)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from robustkit.counterrefine.experiments import OUTCOMES
from robustkit.plots import PAPER, save, set_style

METHOD_COLOURS = {"dense": "#8C8C8C", "counterrefine": "#4C72B0"}
OUTCOME_COLOURS = {"stay correct": "#55A868", "stay wrong": "#C44E52", "fixed": "#4C72B0", "harmed": "#DD8452"}


def plot_correct(table: pd.DataFrame, *, scale: str, name: str | None = "counterrefine_fig2"):
    """Correct (%) of Baseline-RAG and CounterRefine per dataset (Table 3): the kit's as bars
    with 95% CIs, the paper's SimpleQA values as ◆ in their own groups on the same axis."""
    set_style()
    datasets = list(dict.fromkeys(table["dataset"]))
    fig, ax = plt.subplots(figsize=(1.7 * len(datasets) + 2, 3.8))
    width = 0.38
    for j, method in enumerate(METHOD_COLOURS):
        rows = table[table["method"] == method].set_index("dataset").reindex(datasets)
        x = np.arange(len(datasets)) + (j - 0.5) * width
        kit = (rows["source"] == "kit").to_numpy()
        ax.bar(x[kit], rows["correct"][kit], width, color=METHOD_COLOURS[method], label=f"kit, {method}")
        ax.errorbar(x[kit], rows["correct"][kit], yerr=[(rows["correct"] - rows["CI low"])[kit],
                    (rows["CI high"] - rows["correct"])[kit]], fmt="none", ecolor="black", capsize=3, lw=1)
        ax.scatter(x[~kit], rows["correct"][~kit], marker="D", s=40, color=METHOD_COLOURS[method],
                   edgecolor="black", zorder=3, label=f"paper, {method}")
    labels = [f"{d}\n(n = {int(n)})" for d, n in zip(datasets, table.drop_duplicates("dataset")["n"])]
    ax.set_xticks(np.arange(len(datasets)), labels, fontsize=8)
    ax.set_ylim(0, 105)  # room above 100 for a CI's cap
    ax.set_yticks(range(0, 101, 20))
    ax.set_ylabel("correct (%), normalised match")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    ax.set_title(f"CounterRefine Fig. 2 — correct rate, 95% bootstrap CIs over questions (scale {scale}; "
                 "paper: SimpleQA with web search)", fontsize=10)
    if name:
        save(fig, name, table[["dataset", "method", "correct", "CI low", "CI high", "n", "source"]])
    return fig


def plot_transitions(table: pd.DataFrame, *, scale: str, name: str | None = "counterrefine_transitions"):
    """Fig. 3: per dataset, the share of questions that stay correct, stay wrong, are fixed or
    harmed from draft to final answer; the paper's shares as the last bar (labelled)."""
    set_style()
    datasets = list(dict.fromkeys(table["dataset"]))
    fig, ax = plt.subplots(figsize=(8, 0.55 * len(datasets) + 1.6))
    left = np.zeros(len(datasets))
    for outcome in OUTCOMES:
        share = table[table["outcome"] == outcome].set_index("dataset").reindex(datasets)["share"].fillna(0).to_numpy()
        ax.barh(np.arange(len(datasets)), share, left=left, color=OUTCOME_COLOURS[outcome], label=outcome)
        for y, (l, s) in enumerate(zip(left, share)):
            if s >= 4:
                ax.text(l + s / 2, y, f"{s:.1f}", ha="center", va="center", fontsize=7, color="white")
        left += share
    n = table.drop_duplicates("dataset").set_index("dataset")["n"]
    ax.set_yticks(np.arange(len(datasets)), [f"{d} (n = {int(n[d])})" for d in datasets], fontsize=8)
    for tick, dataset in zip(ax.get_yticklabels(), datasets):
        if (table.loc[table["dataset"] == dataset, "source"] == "paper").all():
            tick.set_color(PAPER)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("questions (%)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    ax.set_title(f"CounterRefine Fig. 3 — draft → final outcome (scale {scale}; grey label = paper)", fontsize=10)
    if name:
        save(fig, name, table[["dataset", "outcome", "share", "count", "n", "source"]])
    return fig
