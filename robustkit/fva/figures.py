"""FVA-RAG's figures: Table 2 as bars with question-level CIs, the paper's values as labelled
markers on the same axis; saved as PNG + CSV under ``figures/`` (the CSV is what is plotted)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from robustkit.fva.experiments import METHOD_LABELS
from robustkit.plots import PAPER, save, set_style

CACHE_COLOURS = {"A": "#4C72B0", "B": "#55A868"}


def plot_table2(table: pd.DataFrame, *, scale: str, name: str | None = "fva_table2"):
    """Accuracy per method and cache, one panel per dataset; paper values (TruthfulQA) as ◆."""
    set_style()
    kit = table[table["source"] == "kit"]
    datasets = list(dict.fromkeys(kit["dataset"]))
    fig, axes = plt.subplots(1, len(datasets), figsize=(5.6 * len(datasets), 3.8), sharey=True, squeeze=False)
    methods = [m for m in METHOD_LABELS if m in set(kit["method"])]
    width = 0.38
    for ax, dataset in zip(axes[0], datasets):
        rows = kit[kit["dataset"] == dataset]
        for j, cache in enumerate(("A", "B")):
            part = rows[rows["cache"] == cache].set_index("method").reindex(methods)
            x = np.arange(len(methods)) + (j - 0.5) * width
            ax.bar(x, part["accuracy"], width, color=CACHE_COLOURS[cache], label=f"kit, cache {cache}")
            ax.errorbar(x, part["accuracy"], yerr=[part["accuracy"] - part["CI low"], part["CI high"] - part["accuracy"]],
                        fmt="none", ecolor="black", capsize=3, lw=1)
            if dataset == "truthfulqa":
                published = table[(table["source"] == "paper") & (table["cache"] == cache)].set_index("method")
                px = [xi for xi, m in zip(x, methods) if m in published.index]
                py = [published.loc[m, "accuracy"] for m in methods if m in published.index]
                ax.scatter(px, py, marker="D", s=36, color=PAPER, edgecolor="black", zorder=3,
                           label="paper (judged truthfulness)" if j == 0 else None)
        n = int(rows["n"].iloc[0])
        ax.set_title(f"{dataset} (n = {n} questions per bar)")
        ax.set_xticks(np.arange(len(methods)), [METHOD_LABELS[m] for m in methods], rotation=15)
        ax.set_ylim(0, 100)
        ax.set_ylabel("true answers (%)")
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    fig.suptitle(f"FVA-RAG Table 2 — TruthfulQA's rule (ROUGE-L), 95% bootstrap CIs over questions "
                 f"(scale {scale}; kit and paper judges differ)", y=1.03)
    if name:
        plotted = table[["dataset", "method", "cache", "accuracy", "CI low", "CI high", "n", "source"]]
        save(fig, name, plotted)
    return fig
