"""CoRM-RAG's evaluation (§4) as tidy tables: pure functions of a run's scored rows
(``corm.pipeline.run_methods``) — ``table1``, ``significance``, ``risk_coverage_table``,
``recall_table``, ``paired_ranks``, ``ablation_changes`` … — which ``corm.figures`` draws beside
the paper's numbers (``corm.paper``).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from robustkit.metrics import (accuracy_at_coverage, aurc, cluster_bootstrap_ci, excess_aurc,
                               expected_calibration_error, paired_tests, recall_at_k,
                               risk_coverage)

METHOD_LABELS = {"bm25": "BM25", "dense": "dense (MiniLM)", "random": "random order",
                 "warm-start": "warm start (kit)", "relevance-ce": "relevance CE", "pa-ce": "PA-CE",
                 "llm-rerank": "LLM-rerank",
                 "corm": "CoRM critic", "corm-soft": "CoRM critic, soft labels (kit)",
                 "corm-prior": "CoRM critic + dense prior (kit)"}


def table1(results: pd.DataFrame, latency: pd.DataFrame | None = None) -> pd.DataFrame:
    """Accuracy on clean and biased queries, robustness gap, latency. The 95% CI is a percentile
    bootstrap that resamples questions, so several rewrites of one question count once."""
    rows = []
    for method, frame in results.groupby("method", sort=False):
        clean_rows, biased_rows = frame[frame["condition"] == "clean"], frame[frame["condition"] == "biased"]
        clean, biased = clean_rows["correct"], biased_rows["correct"]
        clean_low, clean_high = (cluster_bootstrap_ci(clean.to_numpy(), clean_rows["question_id"].to_numpy())
                                 if len(clean) else (float("nan"), float("nan")))  # a biased-only run
        low, high = cluster_bootstrap_ci(biased.to_numpy(), biased_rows["question_id"].to_numpy())
        rows.append({"method": METHOD_LABELS.get(method, method), "key": method,
                     "clean accuracy": 100 * clean.mean(), "biased accuracy": 100 * biased.mean(),
                     "biased 95% CI": f"{100 * low:.1f}–{100 * high:.1f}",
                     "clean CI low": 100 * clean_low, "clean CI high": 100 * clean_high,
                     "biased CI low": 100 * low, "biased CI high": 100 * high,
                     "robustness gap": 100 * (clean.mean() - biased.mean()),
                     "n clean": len(clean), "n biased": len(biased)})
    table = pd.DataFrame(rows)
    if latency is not None:
        table = table.merge(latency[["method", "rerank ms/query"]].rename(columns={"method": "key"}),
                            on="key", how="left")
    return table.assign(source="kit").round(1)


def significance(results: pd.DataFrame, reference: str = "corm") -> pd.DataFrame:
    """Exact McNemar test of every other method against the reference on the biased queries
    (``metrics.paired_tests``): n, the questions only the method and only the reference got
    right, p, uncorrected (one per row; ``family`` names what ``comparisons`` counts). With
    one biased query per question (the kit's protocol) the biased queries are pooled; with
    several (of different types) each bias type is tested apart — one query per question in each,
    so the pairs stay independent."""
    biased = results[results["condition"] == "biased"]
    several = biased.duplicated(["method", "question_id"]).any()
    return paired_tests(biased, reference, by=["type"] if several else ())


def risk_coverage_table(results: pd.DataFrame, methods: Sequence[str] = ("corm", "relevance-ce"),
                        condition: str = "biased", *, min_answered: int = 10, band_points: int = 200,
                        seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Selective accuracy vs coverage as γ sweeps (answer the most confident first), and per
    method AURC, E-AURC (AURC above an oracle ranking's), ECE and accuracy at 80% / 50% coverage.

    Each curve point holds how many queries are ``answered`` there and a 95% CI of its selective
    accuracy (``CI low``, ``CI high``): a percentile bootstrap over the *questions* among the
    answered queries (``metrics.cluster_bootstrap_ci``, ``seed``), so several rewrites of one
    question count once. It is left empty (NaN) below ``min_answered`` queries, where a
    percentile bootstrap of a handful of 0/1 outcomes collapses to a point (all wrong: 0–0), and
    on long curves computed at ``band_points`` evenly spaced points only (a bootstrap per point).
    """
    curves, summary = [], []
    for method in methods:
        frame = results[(results["method"] == method) & (results["condition"] == condition)]
        conf, correct = frame["confidence"].to_numpy(), frame["correct"].to_numpy(float)
        curve = pd.DataFrame(risk_coverage(conf, correct)).assign(method=method)
        curve["answered"] = np.rint(curve["coverage"] * len(frame)).astype(int)
        curve["CI low"] = curve["CI high"] = np.nan
        questions = frame["question_id"].to_numpy()
        order = np.argsort(-conf, kind="stable")  # the answered queries at a point are a prefix
        eligible = np.flatnonzero(curve["answered"].to_numpy() >= min_answered)
        picks = np.unique(np.linspace(0, len(eligible) - 1, min(len(eligible), band_points)).round().astype(int))
        for i in eligible[picks]:
            answered = order[:curve.at[i, "answered"]]
            answered = answered[np.argsort(questions[answered], kind="stable")]  # row order cannot matter
            curve.loc[i, ["CI low", "CI high"]] = cluster_bootstrap_ci(correct[answered], questions[answered],
                                                                       seed=seed)
        curves.append(curve)
        summary.append({"method": method, "AURC": aurc(conf, correct),
                        "E-AURC": excess_aurc(conf, correct),
                        "ECE": expected_calibration_error(conf, correct),
                        "acc@100%": correct.mean(), "acc@80%": accuracy_at_coverage(conf, correct, 0.8),
                        "acc@50%": accuracy_at_coverage(conf, correct, 0.5), "n": len(frame)})
    return pd.concat(curves, ignore_index=True), pd.DataFrame(summary).round(3)


def recall_table(results: pd.DataFrame,
                 methods: Sequence[str] = ("dense", "random", "relevance-ce", "corm", "corm-soft",
                                           "corm-prior"),
                 condition: str = "biased") -> pd.DataFrame:
    """Recall@k (k = 1…M) of a gold-bearing passage, on queries whose pool contains one (the hit
    rate, success@k), with its 95% CI resampling questions; methods absent from ``results`` are
    left out."""
    rows = []
    for method in [m for m in methods if m in set(results["method"])]:
        frame = results[(results["method"] == method) & (results["condition"] == condition)]
        frame = frame[frame["gold_ids_ranked"].map(len) > 0]
        depth = max(len(r) for r in frame["ranked_ids"])
        for k in range(1, depth + 1):
            hits = [recall_at_k(r, g, k) for r, g in zip(frame["ranked_ids"], frame["gold_ids_ranked"])]
            low, high = cluster_bootstrap_ci(hits, frame["question_id"].to_numpy())
            rows.append({"method": method, "k": k, "recall": float(np.mean(hits)), "CI low": low,
                         "CI high": high, "n": len(frame)})
    return pd.DataFrame(rows)


def paired_ranks(results: pd.DataFrame, x: str = "relevance-ce", y: str = "corm",
                 condition: str = "biased") -> tuple[pd.DataFrame, dict]:
    """First-gold rank under two rerankers, per query with gold in the pool; win/loss/tie shares."""
    keys = ["question_id", "type"]
    biased = results[results["condition"] == condition]
    left = biased[biased["method"] == x].set_index(keys)["gold_rank"].rename(x)
    right = biased[biased["method"] == y].set_index(keys)["gold_rank"].rename(y)
    pairs = pd.concat([left, right], axis=1).dropna().reset_index()
    shares = {f"{y} better": float((pairs[y] < pairs[x]).mean()),
              f"{x} better": float((pairs[y] > pairs[x]).mean()),
              "tie": float((pairs[y] == pairs[x]).mean()), "n": len(pairs)}
    return pairs, shares


def accuracy_by_type(results: pd.DataFrame) -> pd.DataFrame:
    """Biased accuracy per method and perturbation type (rows: method, columns: type)."""
    biased = results[results["condition"] == "biased"]
    return (100 * biased.groupby(["method", "type"])["correct"].mean()).unstack("type").round(1)


def ablation_changes(results: pd.DataFrame, variants: Sequence[str],
                     reference: str = "corm") -> pd.DataFrame:
    """Per (variant, test type): the reference's and the variant's biased accuracy on the same
    queries, the paired change (points), its 95% CI (bootstrap over questions) and n."""
    biased = results[results["condition"] == "biased"]
    base = biased[biased["method"] == reference].set_index("query_id")["correct"]
    rows = []
    for variant in variants:
        for kind, part in biased[biased["method"] == variant].groupby("type", sort=False):
            ref = base.loc[part["query_id"]].to_numpy(float)
            diff = part["correct"].to_numpy(float) - ref
            low, high = cluster_bootstrap_ci(diff, part["question_id"].to_numpy())
            rows.append({"critic": variant, "test type": kind, "reference": reference,
                         "reference accuracy": 100 * ref.mean(),
                         "accuracy": 100 * part["correct"].mean(), "change": 100 * diff.mean(),
                         "change CI low": 100 * low, "change CI high": 100 * high, "n": len(part)})
    return pd.DataFrame(rows).round(1)


def accuracy_ci(frame: pd.DataFrame) -> dict:
    low, high = cluster_bootstrap_ci(frame["correct"].to_numpy(float), frame["question_id"].to_numpy())
    return {"biased accuracy": 100 * frame["correct"].mean(), "CI low": 100 * low,
            "CI high": 100 * high, "n": len(frame)}


