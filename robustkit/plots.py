"""Figures: one function per figure, one style, saved as PNG with the numbers beside as CSV.

Plot functions take result tables (DataFrames) and never recompute results, so a reader can
redraw any figure from its CSV alone.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from robustkit.config import figures_dir

PALETTE = {"clean": "#4C72B0", "biased": "#DD8452"}


def set_style() -> None:
    sns.set_theme(context="notebook", style="whitegrid", font_scale=0.95)
    plt.rcParams.update({"figure.dpi": 100, "savefig.dpi": 150, "savefig.bbox": "tight"})


def save(fig, name: str, table: pd.DataFrame | None = None) -> Path:
    """Write ``figures/<name>.png`` (and ``<name>.csv`` with the plotted numbers)."""
    out = figures_dir() / f"{name}.png"
    fig.savefig(out)
    if table is not None:
        table.to_csv(out.with_suffix(".csv"), index=False)
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


def plot_perturbations(records: list[dict], *, scale: str, name: str | None = "perturbations"):
    """(a) LLM-written vs template-fallback rewrites per type; (b) rejection rate per validator."""
    set_style()
    frame = pd.DataFrame(records)
    share = (frame.groupby("type")["source"].value_counts(normalize=True).rename("share")
             .reset_index())
    attempts = pd.DataFrame([{"type": r["type"], "rule": rule, "rejected": float(not ok)}
                             for r in records for a in r["attempts"] for rule, ok in a["checks"].items()])
    rejection = attempts.groupby(["type", "rule"])["rejected"].mean().reset_index()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.6), width_ratios=[1, 1.6])
    sns.barplot(data=share, x="type", y="share", hue="source", ax=left,
                hue_order=["llm", "template"], palette=["#55A868", "#C44E52"])
    left.set_title("where each rewrite came from")
    left.tick_params(axis="x", rotation=20)
    pivot = rejection.pivot(index="rule", columns="type", values="rejected")
    sns.heatmap(pivot, annot=True, fmt=".0%", cmap="Reds", vmin=0, vmax=1, cbar=False, ax=right)
    right.set_title("share of LLM attempts each validator rejected")
    right.tick_params(axis="x", rotation=20)
    fig.suptitle(f"Perturbation synthesis (scale {scale}, {frame['question_id'].nunique()} "
                 f"questions, {len(frame)} rewrites, {len(attempts) // max(1, attempts['rule'].nunique())} "
                 "attempts)", y=1.03)
    if name:
        save(fig, name, share.merge(rejection, on="type", how="outer"))
    return fig


def plot_labels(labels: list[dict], *, scale: str, name: str | None = "teacher_labels"):
    """Distribution of the teacher's robustness utility s, by candidate pool and by gold."""
    set_style()
    frame = pd.DataFrame(labels)
    frame["pool"] = frame["in_clean_pool"].map({True: "clean pool", False: "perturbed pool only"})
    frame["evidence"] = frame["has_gold"].map({True: "contains gold answer", False: "no gold answer"})
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.4), sharey=True)
    for ax, column in zip(axes, ["pool", "evidence"]):
        counts = frame.groupby(column)["s"].value_counts(normalize=True).rename("share").reset_index()
        counts["s"] = counts["s"].round(2)
        sns.barplot(data=counts, x="s", y="share", hue=column, ax=ax)
        ax.set_xlabel("teacher utility s(x, d)")
        ax.set_title(f"s by {column}")
    n_q = frame["question_id"].nunique()
    fig.suptitle(f"Teacher labels (scale {scale}, {n_q} questions, {len(frame)} candidates)", y=1.03)
    if name:
        save(fig, name, frame.groupby(["pool", "evidence"])["s"].describe().reset_index())
    return fig


def plot_training(history: pd.DataFrame, *, scale: str, name: str | None = "critic_training"):
    """Training loss per step and validation NDCG@3 / MRR per epoch, one line per critic."""
    set_style()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
    train = history[history["split"] == "train"]
    val = history[history["split"] == "val"]
    sns.lineplot(data=train, x="epoch", y="loss", hue="critic", ax=axes[0], alpha=0.8)
    axes[0].set_title("training loss (own objective)")
    for ax, metric in zip(axes[1:], ["ndcg@3", "mrr"]):
        sns.lineplot(data=val, x="epoch", y=metric, hue="critic", marker="o", ax=ax, legend=False)
        ax.set_title(f"validation {metric.upper()} (own held-out groups)")
    fig.suptitle(f"Critic distillation (scale {scale})", y=1.03)
    if name:
        save(fig, name, history)
    return fig
