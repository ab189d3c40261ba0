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
from robustkit.plots import KIT, PALETTE, PAPER, require_columns, save, set_style


def plot_perturbations(records: list[dict], *, scale: str, name: str | None = "perturbations"):
    """(a) LLM-written vs template-fallback rewrites per type; (b) rejection rate per validator."""
    set_style()
    frame = pd.DataFrame(records)
    share = (frame.groupby("type")["source"].value_counts(normalize=True).rename("share")
             .reset_index())
    attempts = pd.DataFrame([{"type": r["type"], "rule": rule, "rejected": float(not ok)}
                             for r in records for a in r["attempts"] for rule, ok in a["checks"].items()])
    rejection = attempts.groupby(["type", "rule"])["rejected"].mean().reset_index()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.6), width_ratios=[1, 1.6], layout="constrained")
    sns.barplot(data=share, x="type", y="share", hue="source", ax=left,
                hue_order=["llm", "template"], palette=["#55A868", "#C44E52"])
    left.set_title("where each rewrite came from")
    left.tick_params(axis="x", rotation=20)
    pivot = rejection.pivot(index="rule", columns="type", values="rejected")
    sns.heatmap(pivot, annot=True, fmt=".0%", cmap="Reds", vmin=0, vmax=1, cbar=False, ax=right)
    right.set_title("share of LLM attempts each validator rejected\n(blank: the rule does not apply)")
    right.set(ylabel="validator")
    right.grid(False)
    right.tick_params(axis="x", rotation=20)
    fig.suptitle(f"Perturbation synthesis (scale {scale}, {frame['question_id'].nunique()} "
                 f"questions, {len(frame)} rewrites, {len(attempts) // max(1, attempts['rule'].nunique())} "
                 "attempts)")
    if name:
        save(fig, name, share.merge(rejection, on="type", how="outer"))
    return fig


def plot_labels(labels: list[dict], *, scale: str, name: str | None = "teacher_labels"):
    """The share of candidates at each teacher utility s, by candidate pool and by whether the
    passage holds the gold answer, with the candidates behind each bar (n). The CSV holds the
    drawn bars: panel, group, s, count, n (the group's candidates) and share = count / n."""
    set_style()
    frame = pd.DataFrame(labels)
    frame["pool"] = frame["in_clean_pool"].map({True: "clean pool", False: "perturbed pool only"})
    frame["evidence"] = frame["has_gold"].map({True: "contains gold answer", False: "no gold answer"})
    frame["s"] = frame["s"].round(2)
    levels = sorted(frame["s"].unique())
    bars = pd.DataFrame([{"panel": panel, "group": group, "s": s, "count": int((part["s"] == s).sum()),
                          "n": len(part)}
                         for panel in ("pool", "evidence") for group, part in frame.groupby(panel)
                         for s in levels])
    bars["share"] = bars["count"] / bars["n"]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), sharey=True, layout="constrained")
    for ax, (panel, part) in zip(axes, bars.groupby("panel", sort=False)):
        groups = list(dict.fromkeys(part["group"]))
        width = 0.8 / len(groups)
        for j, (group, colour) in enumerate(zip(groups, sns.color_palette("deep", len(groups)))):
            rows = part[part["group"] == group]
            x = np.arange(len(levels)) + (j - (len(groups) - 1) / 2) * width
            drawn = ax.bar(x, rows["share"], width, color=colour, label=f"{group} (n = {rows['n'].iloc[0]})")
            ax.bar_label(drawn, labels=rows["count"].astype(str), fontsize=7, padding=1, color="dimgray")
        ax.set_xticks(np.arange(len(levels)), [f"{s:g}" for s in levels])
        ax.set(xlabel="teacher utility s(x, d)", ylim=(0, 1.1))
        ax.set_title(f"s by {'candidate pool' if panel == 'pool' else 'evidence'}", fontsize=10)
        ax.legend(fontsize=8, loc="upper center", frameon=False)
    axes[0].set_ylabel("share of the group's candidates")
    fig.suptitle(f"Teacher labels (scale {scale}, {frame['question_id'].nunique()} questions, {len(frame)} "
                 "candidates; the number on a bar counts its candidates)", fontsize=10)
    if name:
        save(fig, name, bars[["panel", "group", "s", "count", "n", "share"]])
    return fig


def plot_training(history: pd.DataFrame, *, scale: str, name: str | None = "critic_training"):
    """Top: each critic's training loss per optimiser step and its validation loss, one panel per
    critic (their objectives differ, so their losses share no scale). Bottom: validation NDCG@3
    and MRR from before the first step (step 0, ``split == "start"``: the model it starts from,
    ``pipeline.training_history``) to each epoch's last step. Each critic is validated on its own
    held-out groups and labels (``val groups`` of them), so the curves show how each moves, not
    which critic is better (``pipeline.compare_on_validation`` scores them on one set)."""
    require_columns(history, ["critic", "split", "step", "epoch", "loss", "ndcg@3", "mrr"],
             "history (pipeline.training_history)")
    set_style()
    critics = list(dict.fromkeys(history["critic"]))
    colours = dict(zip(critics, sns.color_palette("deep", len(critics))))
    groups = (history.groupby("critic")["val groups"].first() if "val groups" in history.columns else {})
    val = history[history["split"].isin(["start", "val"])].sort_values(["critic", "step"], kind="stable")
    started = set(val.loc[val["split"] == "start", "critic"])
    fig = plt.figure(figsize=(9, 6.4), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[1, 1.15])
    for ax, critic in zip(np.atleast_1d(top.subplots(1, len(critics), sharex=True)), critics):
        part = history[(history["critic"] == critic) & (history["split"] == "train")]
        checks = val[val["critic"] == critic]
        ax.plot(part["step"], part["loss"], color=colours[critic], alpha=0.9, lw=1.2, label="training loss")
        ax.plot(checks["step"], checks["loss"], color="black", marker="o", ms=4, lw=0.8, ls="--",
                label="validation loss")
        ax.set_title(f"{critic}: loss\n(its own objective)", fontsize=9)
        ax.set_xlabel("optimiser step", fontsize=9)
        ax.tick_params(labelsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=7, loc="upper right", frameon=False)
    for ax, metric in zip(bottom.subplots(1, 2, sharex=True), ["ndcg@3", "mrr"]):
        for critic in critics:
            part = val[val["critic"] == critic]
            n = f", {int(groups[critic])} groups" if critic in groups else ""
            ax.plot(part["step"], part[metric], marker="o", ms=4, color=colours[critic], label=f"{critic}{n}")
            first = part[part["split"] == "start"]
            ax.scatter(first["step"], first[metric], s=40, facecolor="white", edgecolor=colours[critic], zorder=3)
        ax.set_title(f"validation {metric.upper()}: each critic on its own held-out\n"
                     "groups and labels (not comparable across critics)", fontsize=9)
        ax.set(ylim=(-0.02, 1.05))
        ax.set_xlabel("optimiser step", fontsize=9)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=8, loc="lower right", frameon=False)
    start = ("open circle at step 0: before the first step (the model it starts from)" if started == set(critics)
             else "no validation before the first step in this history")
    fig.text(0.01, -0.01, f"{start}; then after each epoch. Critics on one set: "
             "rk.corm.compare_on_validation(cfg, critics)", va="top", fontsize=7, color="dimgray")
    fig.suptitle(f"Critic distillation (scale {scale}; {int(history['epoch'].max())} epochs, "
                 f"{int(history['step'].max())} steps each)", fontsize=11)
    if name:
        save(fig, name, history)
    return fig


# --- Table 1 and Figures 3–7 ---------------------------------------------------------------

def plot_table1(table: pd.DataFrame, *, scale: str, name: str | None = "corm_table1"):
    """Clean and biased accuracy per method, each with its 95% CI, and the paper's biased
    accuracy as labelled markers on the same axis (systems the kit does not run are named below)."""
    set_style()
    kit = table[["method", "key", "clean accuracy", "clean CI low", "clean CI high", "biased accuracy",
                 "biased 95% CI", "biased CI low", "biased CI high", "n biased"]]
    published = paper.TABLE1.dropna(subset=["key"]).merge(kit[["key"]].reset_index(), on="key")
    fig, ax = plt.subplots(figsize=(8, 0.55 * len(kit) + 2.0))
    rows = np.arange(len(kit))
    ax.barh(rows - 0.2, kit["clean accuracy"], height=0.4, color=PALETTE["clean"],
            xerr=[kit["clean accuracy"] - kit["clean CI low"], kit["clean CI high"] - kit["clean accuracy"]],
            error_kw={"ecolor": "dimgray", "elinewidth": 1, "capsize": 3}, label="kit, clean (95% CI)")
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
    """Fig. 3: selective accuracy vs coverage as γ sweeps, with its 95% CI by question as a band
    (``experiments.risk_coverage_table``: from ``min_answered`` answered queries on; the few most
    confident answers before it are drawn as points, without a band), each beside what a random
    confidence would give (its base accuracy). The top axis counts the queries answered; the
    paper's published points are labelled stars. The CSV holds the curves and the stars."""
    require_columns(curves, ["method", "coverage", "accuracy", "answered", "CI low", "CI high"],
             "curves (experiments.risk_coverage_table)")
    require_columns(summary, ["method", "AURC", "E-AURC", "ECE", "acc@100%", "n"], "summary")
    set_style()
    stats = summary.set_index("method")
    methods = list(dict.fromkeys(curves["method"]))
    colours = dict(zip(methods, sns.color_palette("deep", len(methods))))
    fig, ax = plt.subplots(figsize=(7.5, 5.6), layout="constrained")
    fewest = []
    for method in methods:
        curve, row, colour = curves[curves["method"] == method], stats.loc[method], colours[method]
        band = curve.dropna(subset=["CI low", "CI high"])
        if len(band):
            fewest.append(int(band["answered"].min()))
            ax.fill_between(band["coverage"], band["CI low"], band["CI high"], color=colour, alpha=0.2,
                            lw=0, label=f"{method}: 95% CI by question")
            first = curve.index.get_loc(band.index[0])
            ax.plot(curve["coverage"].iloc[:first + 1], curve["accuracy"].iloc[:first + 1], color=colour,
                    lw=0.8, marker="o", ms=3, alpha=0.8)  # the first few answers: each point one more query
            curve = curve.iloc[first:]
        ax.plot(curve["coverage"], curve["accuracy"], color=colour, lw=1.8,
                label=f"{method} (AURC {row['AURC']:.3f}, E-AURC {row['E-AURC']:.3f}, ECE {row['ECE']:.3f})")
        # a confidence unrelated to correctness keeps the base accuracy at every coverage
        ax.axhline(row["acc@100%"], color=colour, ls="--", lw=0.9, alpha=0.8,
                   label=f"{method}, random confidence ({row['acc@100%']:.1%})")
    if fewest:
        ax.axvspan(0, min(fewest) / int(summary["n"].max()), color="0.92", zorder=0)
        ax.text(0.006, 0.985, f"fewer than {min(fewest)}\nanswered: no CI", fontsize=7, color="dimgray",
                va="top", transform=ax.get_xaxis_transform())
    stars = pd.DataFrame([(1.0, paper.FULL_COVERAGE), *paper.RISK_COVERAGE], columns=["coverage", "accuracy"])
    ax.scatter(stars["coverage"], stars["accuracy"], marker="*", s=170, color=PAPER, edgecolor="black",
               zorder=4, label="paper: CoRM-RAG (Biased-NQ)")
    for c, acc in zip(stars["coverage"], stars["accuracy"]):  # above the highest star, below the others
        high = acc == stars["accuracy"].max()
        ax.annotate(f"paper {acc:.1%}\nat {c:.0%}", (c, acc), xytext=(-8 if c > 0.9 else 8, 9 if high else -9),
                    textcoords="offset points", ha="right" if c > 0.9 else "left", va="bottom" if high else "top",
                    fontsize=7, color="dimgray",
                    bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8})
    if summary["n"].nunique() == 1:  # one query count: coverage and queries answered are one scale
        n = int(summary["n"].iloc[0])
        top = ax.secondary_xaxis("top", functions=(lambda c: c * n, lambda k: k / n))
        top.set_xlabel("queries answered", fontsize=9)
        top.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(xlim=(0, 1.02), ylim=(-0.03, 1.05), xlabel="coverage (share of queries answered)",
           ylabel="selective accuracy")
    ax.set_title(f"Fig. 3 risk–coverage on biased queries (scale {scale}, n = {int(summary['n'].max())})",
                 fontsize=10)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, frameon=False)
    if name:
        level = summary[["method", "acc@100%"]].rename(columns={"acc@100%": "random-confidence accuracy"})
        save(fig, name, pd.concat([curves.merge(level, on="method").assign(source="kit"),
                                   stars.assign(method="paper: CoRM-RAG", source="paper")], ignore_index=True))
    return fig


def plot_recall_and_ranks(recall: pd.DataFrame, pairs: pd.DataFrame, shares: dict, *, scale: str,
                          x: str = "relevance-ce", y: str = "corm",
                          name: str | None = "corm_fig4_recall_ranks"):
    """(a) Recall@k of gold-bearing passages with 95% CI bands (k on a log axis only when M is
    large); (b) on how many queries y ranks the first
    gold passage higher than x, lower, or level — beside the paper's shares. The CSV holds (a)'s
    curves, (b)'s per-query ranks and its shares."""
    require_columns(recall, ["method", "k", "recall", "CI low", "CI high", "n"], "recall (experiments.recall_table)")
    set_style()
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.6), layout="constrained")
    methods = list(dict.fromkeys(recall["method"]))
    colours = dict(zip(methods, sns.color_palette(n_colors=len(methods))))
    for method, line in recall.groupby("method", sort=False):
        left.plot(line["k"], line["recall"], marker="o", ms=3, color=colours[method], label=method)
        left.fill_between(line["k"], line["CI low"], line["CI high"], color=colours[method], alpha=0.12, lw=0)
    for method, points in paper.RECALL.items():  # each paper marker in its kit method's colour
        left.scatter(list(points), list(points.values()), marker="*", s=140, zorder=3,
                     color=colours.get(method, PAPER), edgecolor="black", label=f"paper: {method}")
    depth = int(recall["k"].max())
    if depth > 20:  # the paper's M = 100: a log axis keeps k = 1…5 readable
        left.set_xscale("log")
    else:
        left.set_xticks(range(1, depth + 1))
    left.set(xlabel="k (passages read)", ylabel="Recall@k", ylim=(0, 1.02))
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
        if knob == "M":  # the paper's gain starts from its M = 10: drawn from the kit's M nearest 10
            base = part.iloc[int((part["value"] - 10).abs().argmin())]
            x = base["value"] * 1.25  # beside the kit's point, clear of its error bar
            ax.annotate("", xy=(x, base["biased accuracy"] + paper.SENSITIVITY_M_GAIN),
                        xytext=(x, base["biased accuracy"]),
                        arrowprops={"arrowstyle": "->", "color": PAPER, "linewidth": 1.5})
            ax.set_xlim(right=max(ax.get_xlim()[1], x * 1.2))
            ax.text(x, base["biased accuracy"] + paper.SENSITIVITY_M_GAIN,
                    f"paper: +{paper.SENSITIVITY_M_GAIN}\nfor M 10 → 100 ", color="dimgray", fontsize=8,
                    ha="right", va="center")
    np.atleast_1d(axes)[0].set_ylabel("biased accuracy (%)")
    fig.suptitle(f"Fig. 6 sensitivity (scale {scale}, n = {table['n'].iloc[0]} biased queries; "
                 "95% CI by question)", y=1.04)
    fig.text(0.01, -0.08, "paper: gains flatten beyond K = 5; τ = 1 beats 0.1 and 3.0; "
             f"M 10 → 100 adds +{paper.SENSITIVITY_M_GAIN} points (drawn from the kit's M nearest 10)",
             fontsize=8, color="dimgray")
    if name:
        save(fig, name, table)
    return fig


NO_MODEL_TIME = ("bm25", "dense", "random")  # rerank in well under 1 ms: no point on a latency axis
PAPER_LATENCY = (("corm", "CoRM-RAG"), ("llm-rerank", "LLM-rerank"))  # the paper's Fig. 7 points


def plot_pareto(table: pd.DataFrame, latency: pd.DataFrame, *, scale: str,
                name: str | None = "corm_fig7_latency"):
    """Fig. 7: for every method that spends model time reranking, its biased accuracy (95% CI by
    question) beside its reranking latency per query (log), one row per method, fastest first.
    The cross-encoders all take 200-300 ms and LLM-rerank seconds: on one scatter they hide each
    other, in rows each keeps its own line and its numbers. The paper's CoRM-RAG and LLM-rerank are
    labelled stars just under their kit counterpart's row. ``latency`` is
    ``experiments.rerank_latency``'s (what was timed, and on what); the CSV holds both panels."""
    require_columns(table, ["method", "key", "biased accuracy", "biased CI low", "biased CI high", "n biased",
                     "rerank ms/query"], "table (experiments.table1 with latency)")
    set_style()
    kit = (table[~table["key"].isin(NO_MODEL_TIME)].dropna(subset=["rerank ms/query"])
           [["method", "key", "biased accuracy", "biased CI low", "biased CI high", "n biased", "rerank ms/query"]]
           .merge(latency[["method", "candidates", "timed queries", "hardware"]].rename(columns={"method": "key"}),
                  on="key").sort_values("rerank ms/query", kind="stable").reset_index(drop=True))
    published = paper.TABLE1.set_index("key")["biased accuracy"]
    theirs = pd.DataFrame([{"method": f"paper: {label}", "key": key, "biased accuracy": published[key],
                            "rerank ms/query": paper.LATENCY_MS[key], "source": "paper"}
                           for key, label in PAPER_LATENCY])
    # rows: the kit's methods, fastest first, then any paper method the kit did not time
    extra = theirs[~theirs["key"].isin(kit["key"])]
    labels = [m if n == kit["n biased"].max() else f"{m} (n = {int(n)})"
              for m, n in zip(kit["method"], kit["n biased"])] + [f"{m} (not run here)" for m in extra["method"]]
    row_of = {**dict(zip(kit["key"], range(len(kit)))), **dict(zip(extra["key"], range(len(kit), len(labels))))}
    theirs["row"] = theirs["key"].map(row_of)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 0.5 * len(labels) + 1.9), sharey=True,
                                      width_ratios=[1.25, 1], layout="constrained")
    fig.get_layout_engine().set(wspace=0.08)  # the panels' end and start ticks (100, 10²) stay apart
    rows, off = np.arange(len(kit)), 0.3  # the paper's star sits just under its row's kit point
    acc = kit["biased accuracy"]
    left.errorbar(acc, rows, xerr=[acc - kit["biased CI low"], kit["biased CI high"] - acc], fmt="o", color=KIT,
                  capsize=3, label="kit (95% CI by question)")
    right.scatter(kit["rerank ms/query"], rows, marker="o", color=KIT, zorder=3, label="kit")
    for y, (_, row) in zip(rows, kit.iterrows()):
        left.annotate(f"{row['biased accuracy']:.1f}", (row["biased CI high"], y), xytext=(4, 0),
                      textcoords="offset points", va="center", fontsize=7)
        right.annotate(_ms(row["rerank ms/query"]), (row["rerank ms/query"], y), xytext=(6, 0),
                       textcoords="offset points", va="center", fontsize=7)
    for ax, column, text in ((left, "biased accuracy", lambda v: f"{v:.1f}"), (right, "rerank ms/query", _ms)):
        ax.scatter(theirs[column], theirs["row"] + off, marker="*", s=140, color=PAPER, edgecolor="black",
                   zorder=4, label="paper (Biased-NQ, its hardware)")
        for _, row in theirs.iterrows():
            ax.annotate(f"{row['method']} {text(row[column])}", (row[column], row["row"] + off), xytext=(7, 0),
                        textcoords="offset points", va="center", fontsize=7, color="dimgray")
    left.set_yticks(range(len(labels)), labels, fontsize=8)
    left.set_ylim(len(labels) - 0.4, -0.6)
    left.set(xlim=(0, 100), xlabel="biased accuracy (%)")
    left.set_title("accuracy on biased queries (95% CI by question)", fontsize=9)
    ms = pd.concat([kit["rerank ms/query"], theirs["rerank ms/query"]])
    right.set_xscale("log")
    right.set_xlim(10 ** np.floor(np.log10(ms.min())), ms.max() * 12)  # a decade tick left, label room right
    right.set_xlabel("reranking latency per query (ms, log)")
    right.set_title("reranking latency per query", fontsize=9)
    handles, names = left.get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncol=2, fontsize=8, frameon=False)
    first = kit.iloc[0] if len(kit) else None
    fig.suptitle(f"Fig. 7 latency vs accuracy (scale {scale})" + (
        f"\nkit: M = {first['candidates']} candidates, mean of {first['timed queries']} queries timed on "
        f"{first['hardware']}; BM25, dense and random order (< 1 ms) not drawn" if first is not None else ""),
        fontsize=10)
    if name:
        save(fig, name, pd.concat([kit.assign(source="kit"), theirs.drop(columns="row")], ignore_index=True))
    return fig


def _ms(ms: float) -> str:
    return f"{ms / 1000:.3g} s" if ms >= 1000 else f"{ms:.0f} ms"
