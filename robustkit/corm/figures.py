"""CoRM-RAG's figures: notebooks 01-04 and ``python -m robustkit run corm``.

Each takes the tidy tables of ``corm.experiments`` (or a stage's records), draws the paper's
published numbers from ``corm.paper`` beside the kit's, and saves PNG + CSV under ``figures/``.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator
import numpy as np
import pandas as pd
import seaborn as sns

from robustkit.corm import paper
from robustkit.plots import KIT, PALETTE, PAPER, save, set_style


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
    """Training loss per optimiser step, one panel per critic (their objectives differ, so their
    losses share no scale), and validation NDCG@3 / MRR at each epoch's last step."""
    set_style()
    critics = list(dict.fromkeys(history["critic"]))
    colours = dict(zip(critics, sns.color_palette("deep", len(critics))))
    fig = plt.figure(figsize=(12, 6.4), layout="constrained")
    top, bottom = fig.subfigures(2, 1)
    for ax, critic in zip(np.atleast_1d(top.subplots(1, len(critics))), critics):
        part = history[(history["critic"] == critic) & (history["split"] == "train")]
        ax.plot(part["step"], part["loss"], color=colours[critic], alpha=0.9)
        ax.set_title(f"{critic}: training loss (its own objective)", fontsize=9)
        ax.set_xlabel("optimiser step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    val = history[history["split"] == "val"]
    for ax, metric in zip(bottom.subplots(1, 2), ["ndcg@3", "mrr"]):
        for critic in critics:
            part = val[val["critic"] == critic]
            ax.plot(part["step"], part[metric], marker="o", color=colours[critic], label=critic)
        ax.set_title(f"validation {metric.upper()} (each critic's own held-out groups, after each epoch)",
                     fontsize=9)
        ax.set_xlabel("optimiser step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False)
    epochs = int(history["epoch"].max())
    fig.suptitle(f"Critic distillation (scale {scale}; {epochs} epochs, "
                 f"{int(history['step'].max())} steps each)")
    if name:
        save(fig, name, history)
    return fig


# --- Table 1 and Figures 3–7 ---------------------------------------------------------------

def plot_table1(table: pd.DataFrame, *, scale: str, name: str | None = "corm_table1"):
    """Clean and biased accuracy per method with the biased 95% CI, and the paper's biased
    accuracy as labelled markers on the same axis (systems the kit does not run are named below)."""
    set_style()
    kit = table[["method", "key", "clean accuracy", "biased accuracy", "biased 95% CI",
                 "biased CI low", "biased CI high", "n biased"]]
    published = paper.TABLE1.dropna(subset=["key"]).merge(kit[["key"]].reset_index(), on="key")
    fig, ax = plt.subplots(figsize=(8, 0.55 * len(kit) + 2.0))
    rows = np.arange(len(kit))
    ax.barh(rows - 0.2, kit["clean accuracy"], height=0.4, color=PALETTE["clean"], label="kit, clean")
    ax.barh(rows + 0.2, kit["biased accuracy"], height=0.4, color=PALETTE["biased"],
            xerr=[kit["biased accuracy"] - kit["biased CI low"], kit["biased CI high"] - kit["biased accuracy"]],
            error_kw={"ecolor": "black", "elinewidth": 1, "capsize": 3}, label="kit, biased (95% CI)")
    ax.scatter(published["biased accuracy"], published["index"] + 0.2, marker="D", s=50, color="black",
               zorder=3, label="paper, biased (Biased-NQ)")
    for _, row in published.iterrows():
        ax.annotate(f"{row['method']} {row['biased accuracy']:.1f}", (row["biased accuracy"], row["index"] + 0.2),
                    xytext=(5, 4), textcoords="offset points", fontsize=7, color="dimgray",
                    bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8})
    n, n_max = table["n biased"].astype(int), int(table["n biased"].max())
    ax.set_yticks(rows, [m if k == n_max else f"{m} (n = {k})" for m, k in zip(kit["method"], n)])
    ax.invert_yaxis()
    ax.set(xlim=(0, 100), xlabel="accuracy (%)",
           title=f"CoRM-RAG Table 1 (scale {scale}, n = {n_max} questions per condition)")
    others = paper.TABLE1[paper.TABLE1["key"].isna()]
    # legend and footnote below the axis label, clear of every bar
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1 - 0.3 / len(kit)), ncol=3)
    ax.text(0.99, -0.2 - 1.2 / len(kit), "paper systems not run here: " + ", ".join(
        f"{m} {a:.1f}" for m, a in zip(others["method"], others["biased accuracy"])),
        transform=ax.transAxes, ha="right", fontsize=7, color="dimgray")
    if name:
        plotted = pd.concat([kit.assign(source="kit"), paper.TABLE1], ignore_index=True)
        save(fig, name, plotted)
    return fig


def plot_risk_coverage(curves: pd.DataFrame, summary: pd.DataFrame, *, scale: str,
                       name: str | None = "corm_fig3_risk_coverage"):
    """Selective accuracy vs coverage as γ sweeps, each beside what a random confidence would
    give (its base accuracy); the paper's published points marked."""
    set_style()
    fig, ax = plt.subplots(figsize=(7, 5.2), layout="constrained")
    for method, curve in curves.groupby("method", sort=False):
        row = summary.set_index("method").loc[method]
        line, = ax.plot(curve["coverage"], curve["accuracy"], label=f"{method} (AURC {row['AURC']:.3f}, "
                        f"E-AURC {row['E-AURC']:.3f}, ECE {row['ECE']:.3f})")
        # a confidence unrelated to correctness keeps the base accuracy at every coverage
        ax.axhline(row["acc@100%"], color=line.get_color(), ls=":", lw=1,
                   label=f"{method}, random confidence")
    points = [(1.0, paper.FULL_COVERAGE), *paper.RISK_COVERAGE]
    ax.scatter(*zip(*points), marker="*", s=160, color="black", zorder=3, label="paper: CoRM-RAG")
    ax.set_xlabel("coverage (share of questions answered)")
    ax.set_ylabel("selective accuracy")
    ax.set_title(f"Fig. 3 risk–coverage on biased queries (scale {scale}, n={int(summary['n'].iloc[0])})")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)  # clear of the curves
    if name:
        level = summary[["method", "acc@100%"]].rename(columns={"acc@100%": "random-confidence accuracy"})
        save(fig, name, curves.merge(level, on="method"))
    return fig


def plot_recall_and_ranks(recall: pd.DataFrame, pairs: pd.DataFrame, shares: dict, *, scale: str,
                          x: str = "relevance-ce", y: str = "corm",
                          name: str | None = "corm_fig4_recall_ranks"):
    """(a) Recall@k of gold-bearing passages, log k; (b) on how many queries y ranks the first
    gold passage higher than x, lower, or level — beside the paper's shares. The CSV holds (a)'s
    curves, (b)'s per-query ranks and its shares."""
    set_style()
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.6), layout="constrained")
    methods = list(dict.fromkeys(recall["method"]))
    colours = dict(zip(methods, sns.color_palette(n_colors=len(methods))))
    sns.lineplot(data=recall, x="k", y="recall", hue="method", palette=colours, ax=left)
    for method, points in paper.RECALL.items():  # each paper marker in its kit method's colour
        left.scatter(list(points), list(points.values()), marker="*", s=140, zorder=3,
                     color=colours.get(method, PAPER), edgecolor="black", label=f"paper: {method}")
    left.set_xscale("log")
    left.set_title(f"(a) Recall@k, biased queries with gold in the pool (n={int(recall['n'].iloc[0])})",
                   fontsize=10)
    left.legend(fontsize=8)
    # (b) win / tie / loss of the first gold rank, kit bars and the paper's shares as markers
    outcomes = [f"{y} better", "tie", f"{x} better"]
    bars = pd.DataFrame({"outcome": outcomes, "share": [shares[o] for o in outcomes],
                         "paper": [paper.PAIRED[k] for k in ("critic better", "tie", "CE better")]})
    right.barh(bars["outcome"], 100 * bars["share"], color=[colours.get(y, PAPER), "lightgrey",
                                                             colours.get(x, PAPER)])
    right.scatter(100 * bars["paper"], bars["outcome"], marker="D", s=50, color="black", zorder=3,
                  label="paper (Biased-NQ)")
    for share, outcome in zip(bars["share"], bars["outcome"]):
        right.annotate(f"{share:.1%}", (100 * share, outcome), xytext=(4, -10),
                       textcoords="offset points", fontsize=8)
    right.invert_yaxis()
    right.set(xlim=(0, 100), xlabel="share of biased queries with gold in both pools (%)")
    right.set_title(f"(b) first gold passage ranked higher: {y} vs {x} (n={shares['n']})", fontsize=10)
    right.legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Fig. 4 (scale {scale})")
    if name:
        ranks = pairs.rename(columns={x: f"first gold rank, {x}", y: f"first gold rank, {y}"})
        save(fig, name, pd.concat([recall.assign(panel="a"), ranks.assign(panel="b, per query"),
                                   bars.assign(panel="b", n=shares["n"])], ignore_index=True))
    return fig


def plot_ablation(changes: pd.DataFrame, *, scale: str, name: str | None = "corm_fig5_ablation"):
    """Fig. 5: the change in biased accuracy per test type when one perturbation type is left out
    of training (``experiments.ablation_changes``), with 95% CIs by question and n; the paper's
    two published drops as stars on their bars."""
    set_style()
    types = list(dict.fromkeys(changes["test type"]))
    critics = list(dict.fromkeys(changes["critic"]))
    width = 0.8 / len(critics)
    colours = sns.color_palette("deep", len(critics))
    fig, ax = plt.subplots(figsize=(7.2, 3.8))
    paper_rows = []
    for j, critic in enumerate(critics):
        part = changes[changes["critic"] == critic].set_index("test type").loc[types]
        x = np.arange(len(types)) + (j - (len(critics) - 1) / 2) * width
        ax.bar(x, part["change"], width, color=colours[j], label=f"trained {critic.replace('no-', 'without ')}")
        ax.errorbar(x, part["change"], yerr=[part["change"] - part["change CI low"],
                                             part["change CI high"] - part["change"]],
                    fmt="none", ecolor="black", elinewidth=1, capsize=3)
        dropped = critic.removeprefix("no-")
        if dropped in paper.ABLATION and dropped in types:
            full, without = paper.ABLATION[dropped]
            ax.scatter(x[types.index(dropped)], without - full, marker="*", s=160, color=PAPER,
                       edgecolor="black", zorder=3, label="paper (its drop on the left-out type)"
                       if not paper_rows else None)
            paper_rows.append({"critic": critic, "test type": dropped, "change": without - full,
                               "source": "paper"})
    ax.axhline(0, color="black", linewidth=0.8)
    first = changes.drop_duplicates("test type").set_index("test type").loc[types]
    ax.set_xticks(np.arange(len(types)), [f"{t}\nall types {a:.0f}%, n={n}" for t, a, n in
                                          zip(types, first["reference accuracy"], first["n"])], fontsize=8)
    ax.set_ylabel("change in biased accuracy\n(points, vs trained on all types)")
    ax.set_xlabel("test perturbation type")
    ax.set_title(f"Fig. 5 ablation: leave one type out of training (scale {scale}; 95% CI by question)",
                 fontsize=10)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=2, frameon=False)
    if name:
        save(fig, name, pd.concat([changes.assign(source="kit"), pd.DataFrame(paper_rows)],
                                  ignore_index=True))
    return fig


def plot_sensitivity(table: pd.DataFrame, *, scale: str, name: str | None = "corm_fig6_sensitivity"):
    """Fig. 6: biased accuracy (95% CI by question) as one knob varies (K, τ, M); ``table`` is
    ``experiments.sensitivity``'s. The paper publishes no curve, only its findings: they are
    drawn where they can be (τ = 1 best; M 10 → 100 adds +8.7 points) and stated otherwise."""
    set_style()
    knobs = list(dict.fromkeys(table["knob"]))
    fig, axes = plt.subplots(1, len(knobs), figsize=(3.8 * len(knobs), 3.3), sharey=True)
    for ax, knob in zip(np.atleast_1d(axes), knobs):
        part = table[table["knob"] == knob]
        ax.errorbar(part["value"], part["biased accuracy"], marker="o", color=KIT, capsize=3,
                    yerr=[part["biased accuracy"] - part["CI low"], part["CI high"] - part["biased accuracy"]])
        if knob in ("τ", "M"):
            ax.set_xscale("log")
        ax.set_xticks(part["value"], [f"{v:g}" for v in part["value"]])
        ax.minorticks_off()
        ax.set_xlabel(knob)
        if knob == "τ":
            ax.axvline(1.0, color=PAPER, linestyle="--", linewidth=1)
            ax.text(1.0, 0.02, " paper: best τ", transform=ax.get_xaxis_transform(), color="dimgray", fontsize=8)
        if knob == "M":
            low = part.iloc[0]
            ax.annotate("", xy=(low["value"], low["biased accuracy"] + paper.SENSITIVITY_M_GAIN),
                        xytext=(low["value"], low["biased accuracy"]),
                        arrowprops={"arrowstyle": "->", "color": PAPER, "linewidth": 1.5})
            ax.text(low["value"], low["biased accuracy"] + paper.SENSITIVITY_M_GAIN,
                    f" paper: +{paper.SENSITIVITY_M_GAIN} for M 10 → 100", color="dimgray", fontsize=8)
    np.atleast_1d(axes)[0].set_ylabel("biased accuracy (%)")
    fig.suptitle(f"Fig. 6 sensitivity (scale {scale}, n = {table['n'].iloc[0]} biased queries; "
                 "95% CI by question)", y=1.04)
    fig.text(0.01, -0.08, "paper: gains flatten beyond K = 5; τ = 1 beats 0.1 and 3.0; "
             f"M 10 → 100 adds +{paper.SENSITIVITY_M_GAIN} points (drawn from the kit's smallest M)",
             fontsize=8, color="dimgray")
    if name:
        save(fig, name, table)
    return fig


NO_MODEL_TIME = ("bm25", "dense", "random")  # rerank in well under 1 ms: no point on a latency axis


def plot_pareto(table: pd.DataFrame, latency: pd.DataFrame, *, scale: str,
                name: str | None = "corm_fig7_latency"):
    """Fig. 7: reranking latency per query (log) vs biased accuracy (95% CI) for every method
    that spends model time reranking; the paper's CoRM-RAG and LLM-rerank on the same axes.
    ``latency`` is ``experiments.rerank_latency``'s (what was timed, and on what)."""
    set_style()
    fig, ax = plt.subplots(figsize=(9.6, 4.2))
    kit = table[~table["key"].isin(NO_MODEL_TIME)].dropna(subset=["rerank ms/query"]).merge(
        latency[["method", "candidates", "timed queries", "hardware"]].rename(columns={"method": "key"}),
        on="key")
    # the cross-encoders share one latency, so each method gets a colour and a legend entry
    # rather than a label that would overlap its neighbours'
    for (_, row), colour in zip(kit.iterrows(), sns.color_palette("deep", len(kit))):
        ax.errorbar(row["rerank ms/query"], row["biased accuracy"], fmt="o", color=colour, capsize=3,
                    yerr=[[row["biased accuracy"] - row["biased CI low"]],
                          [row["biased CI high"] - row["biased accuracy"]]],
                    label=f"{row['method']} (n = {int(row['n biased'])})")
    published = paper.TABLE1.set_index("key")["biased accuracy"]
    theirs = pd.DataFrame([{"method": f"paper {label}", "key": key, "rerank ms/query": paper.LATENCY_MS[key],
                            "biased accuracy": published[key], "source": "paper"}
                           for key, label in (("corm", "CoRM-RAG"), ("llm-rerank", "LLM-rerank"))])
    ax.scatter(theirs["rerank ms/query"], theirs["biased accuracy"], marker="*", s=160, color=PAPER,
               edgecolor="black", zorder=3, label="paper")
    for _, row in theirs.iterrows():
        ms = row["rerank ms/query"]
        ax.annotate(f"{row['method']} ({ms / 1000:g} s)" if ms >= 1000 else f"{row['method']} ({ms:g} ms)",
                    (ms, row["biased accuracy"]), fontsize=8, color="dimgray", xytext=(0, -16),
                    textcoords="offset points", ha="center")
    ax.set_xscale("log")
    ax.set_xlim(right=4 * max(theirs["rerank ms/query"].max(), kit["rerank ms/query"].max()))  # room for labels
    ax.set_xlabel("reranking latency per query (ms, log)")
    ax.set_ylabel("biased accuracy (%)")
    ax.set_title(f"Fig. 7 latency vs accuracy (scale {scale}; biased queries, 95% CI by question)",
                 fontsize=10)
    first = kit.iloc[0]
    fig.text(0.01, -0.06, f"kit: M = {first['candidates']} candidates, mean of {first['timed queries']} "
             f"queries timed on {first['hardware']}; BM25, dense and random order (< 1 ms) not drawn. "
             "Paper: its own hardware.", fontsize=7, color="dimgray", wrap=True)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False)
    if name:
        save(fig, name, pd.concat([kit.assign(source="kit"), theirs], ignore_index=True))
    return fig
