"""The head-to-head's figures: cost against accuracy with the Pareto front, and the drop under
each bias type — 95% CIs that resample questions, scale and n in the title; saved as PNG + CSV
under ``figures/`` (the CSV holds what is plotted). No paper ran this comparison, so there are
no published markers to draw."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from robustkit.headtohead.experiments import pareto
from robustkit.plots import save, set_style

COST_COLUMNS = ["number", "method", "label", "paper", "model calls / query", "drawn at", "accuracy", "CI low",
                "CI high", "questions", "queries", "on the front"]
DODGE = 1.07  # methods at one point are drawn side by side, each this factor apart on the log axis
DROP_COLUMNS = ["method", "label", "type", "drop", "drop CI low", "drop CI high", "questions"]


def plot_cost_accuracy(table: pd.DataFrame, *, scale: str, name: str | None = "headtohead_cost"):
    """``experiments.summary``: accuracy (CI bars) against model calls per query, one colour per
    paper, the methods no other beats on both joined by the front. Methods at the same point are
    drawn side by side (``drawn at`` in the CSV), so none hides under another."""
    set_style()
    point = ["accuracy", "model calls / query"]
    at_point = table.groupby(point, sort=False)
    place, size = at_point.cumcount(), at_point["method"].transform("size")  # offsets centred on the point
    table = table.assign(**{"on the front": pareto(table), "number": range(1, len(table) + 1),
                            "drawn at": table["model calls / query"] * DODGE ** (place - (size - 1) / 2)})
    papers = list(dict.fromkeys(table["paper"]))
    colours = dict(zip(papers, sns.color_palette("tab10", len(papers))))
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for paper, part in table.groupby("paper", sort=False):
        ax.errorbar(part["drawn at"], part["accuracy"], fmt="o", color=colours[paper], capsize=3,
                    yerr=[part["accuracy"] - part["CI low"], part["CI high"] - part["accuracy"]], label=paper)
    # numbers, not names, beside the points (16 names collide); methods at one point share a tag
    number = dict(zip(table["method"], table["number"]))
    previous = None  # a tag just right of another at the same height goes below instead
    for (accuracy, cost), part in table.groupby(point, sort=True):
        near = previous is not None and previous[0] == accuracy and cost / previous[1] < 1.2 and previous[2] > 0
        ax.annotate(",".join(str(number[m]) for m in part["method"]), (part["drawn at"].max(), accuracy),
                    xytext=(4, -10 if near else 3), textcoords="offset points", fontsize=8)
        previous = (accuracy, cost, -10 if near else 3)
    front = table[table["on the front"]].sort_values("model calls / query")
    ax.step(front["model calls / query"], front["accuracy"], where="post", color="black", lw=0.8, ls="--",
            label="Pareto front")
    ax.set_xscale("log")
    ax.set(xlabel="model calls per query (log scale; LLM-rerank counts one per candidate read)",
           ylabel="accuracy, clean and biased queries (%)", ylim=(0, 100))
    legend = ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    key = "\n".join(f"{number[m]:>2}  {label}" for m, label in zip(table["method"], table["label"]))
    ax.add_artist(legend)
    ax.text(1.03, 0.52, key, transform=ax.transAxes, fontsize=7.5, va="top", family="monospace")
    n = int(table["questions"].max())
    ax.set_title(f"Head to head: accuracy against cost, scale {scale}, n = {n} questions "
                 f"({int(table['queries'].max())} queries)\n95% bootstrap CIs over questions", fontsize=10)
    fig.tight_layout()
    if name:
        save(fig, name, table[COST_COLUMNS])
    return fig


def plot_drops(drops: pd.DataFrame, *, scale: str, name: str | None = "headtohead_robustness"):
    """``experiments.robustness``: each method's drop from clean to biased (points, CI bars), one
    colour per bias type; right of zero is worse under bias."""
    set_style()
    types = list(dict.fromkeys(drops["type"]))
    methods = list(dict.fromkeys(drops["label"]))
    colours = dict(zip(types, sns.color_palette("colorblind", len(types))))
    fig, ax = plt.subplots(figsize=(8.5, 0.45 * len(methods) + 1.6))
    offsets = np.linspace(-0.3, 0.3, len(types))
    for offset, kind in zip(offsets, types):
        part = drops[drops["type"] == kind].set_index("label").reindex(methods)
        y = np.arange(len(methods)) + offset
        n = int(part["questions"].max())
        # one question gives a drop of −100, 0 or +100 and no interval: drawn hollow, without a bar
        alone = (part["questions"] < 2).to_numpy()
        ax.errorbar(part["drop"][~alone], y[~alone], fmt="o", ms=4, color=colours[kind], capsize=2, lw=1,
                    xerr=[(part["drop"] - part["drop CI low"])[~alone], (part["drop CI high"] - part["drop"])[~alone]],
                    label=f"{kind} (n = {n})" if not alone.all() else None)
        if alone.any():
            ax.scatter(part["drop"][alone], y[alone], s=22, facecolor="none", edgecolor=colours[kind],
                       label=f"{kind} (n = 1: no interval)")
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(np.arange(len(methods)), methods, fontsize=8)
    ax.invert_yaxis()
    ax.set(xlabel="drop from clean to biased accuracy (points; > 0: worse under bias)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False, title="bias type")
    ax.set_title(f"Head to head: robustness to biased questions, scale {scale}\n"
                 "each question's clean and biased answer paired; 95% bootstrap CIs over questions", fontsize=10)
    fig.tight_layout()
    if name:
        save(fig, name, drops[DROP_COLUMNS])
    return fig
