"""What each of notebook 04's tables and figures shows, as sentences computed from it.

Each function reads one of ``corm.experiments``' tables and states what it shows — the numbers,
which differences are significant, where the paper's value lies — so the notebook's prose never
types a number its run did not print. ``experiments.findings`` is the closing statement.
"""
from __future__ import annotations

import pandas as pd

from robustkit.corm import paper
from robustkit.metrics import extreme_names, format_p

LEVEL = 0.05  # the significance level every sentence uses, before any correction


def table1(table: pd.DataFrame, tests: pd.DataFrame) -> str:
    """Table 1: the best row, the critic against dense RAG and the warm start it grew from, and
    which paired tests pass the Bonferroni level for the number of comparisons made."""
    by_key, by_vs = table.set_index("key"), tests.set_index("method")
    best = table.loc[table["biased accuracy"].idxmax()]
    critic = by_key.loc["corm"]
    level = LEVEL / max(len(tests), 1)
    leaders = extreme_names(table.set_index("method")["biased accuracy"])  # every tie named
    lines = [f"Highest biased accuracy: {leaders} ({best['biased accuracy']:.1f}%, n = "
             f"{int(best['n biased'])}); the CoRM critic {critic['biased accuracy']:.1f}% "
             f"(95% CI {critic['biased 95% CI']})."]
    if "dense" in by_vs.index:
        dense = by_vs.loc["dense"]
        lines.append(f"Critic vs dense RAG ({by_key.loc['dense', 'biased accuracy']:.1f}%): "
                     f"{int(dense['only reference right'])} questions only the critic gets right, "
                     f"{int(dense['only method right'])} only dense; exact McNemar p {format_p(dense['p'], relation=True)}.")
    if "warm-start" in by_key.index:
        change = critic["biased accuracy"] - by_key.loc["warm-start", "biased accuracy"]
        lines.append(f"Distillation moved the critic {change:+.1f} points from the warm start it "
                     f"started from ({by_key.loc['warm-start', 'biased accuracy']:.1f}%).")
    passing = [by_key.loc[vs, "method"] for vs, row in by_vs.iterrows() if row["p"] < level]
    lines.append(f"{len(tests)} comparisons, Bonferroni level {level:.3g}: "
                 + (f"the critic differs significantly from {', '.join(passing)} only."
                    if passing else "no difference is significant."))
    return "\n".join(lines)


def risk_coverage(coverage: pd.DataFrame) -> str:
    """Fig. 3: what abstaining buys each method, and whether its confidence is a risk signal at
    all: a confidence unrelated to correctness keeps the risk at 1 − accuracy at every coverage,
    so its AURC is 1 − accuracy; a useful one stays below that."""
    rows = coverage.set_index("method")
    lines = []
    for method, r in rows.iterrows():
        chance = 1 - r["acc@100%"]
        # AURC weighs every coverage at once: a confidence no better than chance over the whole curve
        # can still be right more often at one coverage (its top half, say) than answering all
        verdict = ("below: over the whole curve its confidence orders its answers better than chance"
                   if r["AURC"] < chance else
                   "not below: over the whole curve its confidence orders its answers no better than chance"
                   + (f", though its most confident half is right {100 * (r['acc@50%'] - r['acc@100%']):.1f} "
                      "points more often than answering all" if r["acc@50%"] > r["acc@100%"] else ""))
        lines.append(f"{method}: {100 * r['acc@100%']:.1f}% answering all, {100 * r['acc@80%']:.1f}% at 80% "
                     f"coverage, {100 * r['acc@50%']:.1f}% at 50% (n = {int(r['n'])}); AURC {r['AURC']:.3f} "
                     f"against {chance:.3f} for a random confidence — {verdict}.")
    lines.append(f"Paper (CoRM-RAG): {100 * paper.FULL_COVERAGE:.1f} → {100 * paper.RISK_COVERAGE[0][1]:.1f} → "
                 f"{100 * paper.RISK_COVERAGE[1][1]:.1f}%.")
    return "\n".join(lines)


def recall(recall_at: pd.DataFrame, shares: dict, x: str = "relevance-ce", y: str = "corm") -> str:
    """Fig. 4: how often a gold passage comes first per reranker, and the paired first-gold ranks."""
    first = recall_at[recall_at["k"] == 1].set_index("method")
    listed = ", ".join(f"{m} {100 * r['recall']:.1f}%" for m, r in first.iterrows())
    n = int(first["n"].iloc[0]) if len(first) else 0
    return (f"A gold passage first (Recall@1, {n} biased queries with gold in the pool): {listed}.\n"
            f"First gold passage: {y} ahead of {x} on {shares[f'{y} better']:.1%}, behind on "
            f"{shares[f'{x} better']:.1%}, tied on {shares['tie']:.1%} of {shares['n']} queries "
            f"(paper: critic ahead {paper.PAIRED['critic better']:.1%}, behind {paper.PAIRED['CE better']:.1%}).")


def ablation(changes: pd.DataFrame) -> str:
    """Fig. 5: leaving a type out of training, the change on that type's test queries with its CI,
    beside the paper's drop."""
    lines = []
    for _, row in changes.iterrows():
        left_out = row["critic"].removeprefix("no-")
        if row["test type"] != left_out:
            continue
        spans_zero = row["change CI low"] <= 0 <= row["change CI high"]
        if row["change CI low"] == row["change CI high"]:  # every question changed alike: no interval to draw
            spread = ("no query's outcome changed" if row["change"] == 0 else
                      f"every query changed by the same {row['change']:+.1f}") + f", n = {int(row['n'])}"
        else:
            spread = (f"95% CI {row['change CI low']:+.1f} to {row['change CI high']:+.1f}, n = {int(row['n'])}"
                      f"{', includes zero' if spans_zero else ''}")
        line = f"Without {left_out}: {row['change']:+.1f} points on {left_out} queries ({spread})"
        if left_out in paper.ABLATION:
            full, without = paper.ABLATION[left_out]
            line += f"; paper {without - full:+.1f}"
        lines.append(line + ".")
    return "\n".join(lines)


def sensitivity(table: pd.DataFrame) -> str:
    """Fig. 6: per knob, the accuracies and whether every interval overlaps every other."""
    lines = []
    for knob, part in table.groupby("knob", sort=False):
        values = ", ".join(f"{v:g}: {a:.1f}%" for v, a in zip(part["value"], part["biased accuracy"]))
        overlap = part["CI low"].max() <= part["CI high"].min()
        lines.append(f"{knob} — {values}; "
                     + ("every 95% interval overlaps every other." if overlap else "some intervals do not overlap."))
    lines.append(f"Paper: gains flatten beyond K = 5, τ = 1 is best, and M 10 → 100 adds "
                 f"{paper.SENSITIVITY_M_GAIN:.1f} points.")
    return "\n".join(lines)


def cost(table: pd.DataFrame, critic: str = "corm", llm: str = "llm-rerank") -> str:
    """Fig. 7: reranking latency of the critic against the LLM reranker, beside the paper's ratio."""
    ms = table.set_index("key")["rerank ms/query"]
    ratio = paper.LATENCY_MS[llm] / paper.LATENCY_MS[critic]
    return (f"Reranking one query: critic {ms[critic]:.0f} ms, LLM-rerank {ms[llm]:.0f} ms "
            f"({ms[llm] / ms[critic]:.0f}× the critic; paper {ratio:.0f}×: "
            f"{paper.LATENCY_MS[llm] / 1000:.0f} s vs {paper.LATENCY_MS[critic]} ms).")


def findings(table: pd.DataFrame, tests: pd.DataFrame, coverage: pd.DataFrame, shares: dict) -> str:
    """The run's headline numbers as sentences, with what is and is not significant."""
    by_key = table.set_index("key")
    corm = by_key.loc["corm"]
    lines = [f"CoRM critic: {corm['clean accuracy']:.1f}% clean, {corm['biased accuracy']:.1f}% biased "
             f"(95% CI {corm['biased 95% CI']}, by question), robustness gap "
             f"{corm['robustness gap']:.1f} points.",
             f"Reference CoRM critic against {len(tests)} methods: exact McNemar at question level, "
             f"uncorrected (with Bonferroni the level would be {0.05 / max(len(tests), 1):.3g})."]
    for _, row in tests.iterrows():
        other = by_key.loc[row["method"]]
        better = "better" if row["only reference right"] > row["only method right"] else "worse"
        verdict = (f"CoRM significantly {better}" if row["p"] < 0.05
                   else "no significant difference")
        lines.append(f"vs {other['method']}: {other['biased accuracy']:.1f}% biased; "
                     f"exact McNemar p {format_p(row['p'], relation=True)} ({verdict} at 0.05).")
    rc = coverage.set_index("method").loc["corm"]
    lines.append(f"Abstaining on the least confident 20% moves CoRM's biased accuracy "
                 f"{100 * rc['acc@100%']:.1f} → {100 * rc['acc@80%']:.1f}%, at 50% coverage "
                 f"{100 * rc['acc@50%']:.1f}% (paper: {100 * paper.FULL_COVERAGE:.1f} → "
                 f"{100 * paper.RISK_COVERAGE[0][1]:.1f} → {100 * paper.RISK_COVERAGE[1][1]:.1f}).")
    lines.append(f"First gold passage ranked higher by the critic than by the relevance CE on "
                 f"{shares['corm better']:.1%} of queries, lower on {shares['relevance-ce better']:.1%}, "
                 f"tied on {shares['tie']:.1%} (paper: {paper.PAIRED['critic better']:.1%} / "
                 f"{paper.PAIRED['CE better']:.1%} / {paper.PAIRED['tie']:.1%}).")
    return "\n".join(lines)


def label_findings(by_kind: pd.DataFrame, separation: pd.DataFrame) -> str:
    """What notebook 02's two label tables show, as sentences computed from them: whether the 0/1
    label gives robust (gold) evidence s > 0 and sycophantic (premise-matching) evidence s = 0,
    and which label tells gold from the rest better."""
    share = by_kind["share s > 0"]
    lines = [f"s > 0 for {share.get('gold', float('nan')):.1%} of gold candidates, "
             f"{share.get('premise-matching', float('nan')):.1%} of premise-matching ones and "
             f"{share.get('distractor', float('nan')):.1%} of distractors."]
    s, soft = separation.loc["s"], separation.loc["s_soft"]
    better = "s_soft" if soft["AUC gold vs other"] > s["AUC gold vs other"] else "s"
    lines.append(f"Gold vs the rest: AUC {s['AUC gold vs other']:.3f} for s, {soft['AUC gold vs other']:.3f} "
                 f"for s_soft ({better} separates better); the top-labelled candidate is gold for "
                 f"{s['gold ranked first (questions)']:g} (s) and {soft['gold ranked first (questions)']:g} (s_soft) "
                 f"of {int(s['questions'])} questions; {int(s['questions with a positive'])} and "
                 f"{int(soft['questions with a positive'])} of them give the critic a positive.")
    return "\n".join(lines)


def rank1_findings(top1: pd.DataFrame, reference: str = "dense", critic: str = "corm") -> str:
    """What ``top1_by_kind``'s table shows, as sentences: the reference's premise-matching and gold
    shares at rank 1, the range the rerankers span, and where the critic sits in it."""
    gold, premise = "gold at rank 1 (%)", "premise-matching at rank 1 (%)"
    base, others = top1.loc[reference], top1.drop(index=reference)
    n = int(top1["n"].iloc[0])
    lines = [f"{reference}: a premise-matching passage first for {base[premise]:.1f}% of the biased "
             f"queries, a gold one for {base[gold]:.1f}%.",
             f"The {len(others)} rerankers: premise-matching first {others[premise].min():.1f}–"
             f"{others[premise].max():.1f}%, gold first {others[gold].min():.1f}–{others[gold].max():.1f}%."]
    if critic in others.index:
        row = others.loc[critic]
        lines.append(f"{critic}: premise-matching {row[premise]:.1f}% "
                     f"(lowest: {extreme_names(others[premise], 'min')}), "
                     f"gold {row[gold]:.1f}% (highest: {extreme_names(others[gold])}).")
    lines.append(f"Each row is {n} queries: one query moves a share by {100 / n:.1f} points.")
    return "\n".join(lines)
