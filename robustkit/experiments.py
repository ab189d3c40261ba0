"""CoRM-RAG's evaluation (§4): every method on the same questions, as tidy tables.

``run_methods`` answers the clean and the biased version of every test question with each
method — same dense candidates (BM25 retrieves its own), same generator, same context size C —
and keeps, per query, the ranking, the scores, the answer and whether it is right. The paper's
tables and figures are then pure functions of that table (``table1``, ``risk_coverage_table``,
``recall_table``, ``paired_ranks``, …), which ``robustkit.plots`` draws beside the paper's numbers.
"""
from __future__ import annotations

import time
from typing import Sequence

import numpy as np
import pandas as pd

from robustkit import pipeline
from robustkit.config import Scale
from robustkit.corm import CrossEncoderReranker, FirstStage, LLMReranker, RiskAwareRAG
from robustkit.data.records import has_answer
from robustkit.metrics import (accuracy_at_coverage, aurc, bootstrap_ci, expected_calibration_error,
                               first_relevant_rank, mcnemar, recall_at_k, risk_coverage,
                               substring_match)

# The paper's published numbers (CoRM-RAG, Biased-NQ), drawn beside the kit's.
PAPER_TABLE1 = pd.DataFrame([
    ("BM25", None, 28.0), ("Contriever (dense)", None, 39.5), ("Cross-encoder", None, 40.9),
    ("PA-CE", None, 48.0), ("LLM-rerank", None, 51.0), ("Self-RAG", None, 46.5),
    ("CalibRAG", None, 48.0), ("CoRM-RAG", None, 52.6)],
    columns=["method", "clean accuracy", "biased accuracy"]).assign(source="paper")
PAPER_POINTS = {"risk_coverage": [(0.8, 0.620), (0.5, 0.780)], "full_coverage": 0.526,
                "recall": {"relevance-ce": {1: 0.365, 5: 0.668}, "corm": {1: 0.483, 5: 0.778}},
                "paired": {"critic better": 0.457, "CE better": 0.271, "tie": 0.272},
                "latency_ms": {"corm": 215, "llm-rerank": 20000}}
METHOD_LABELS = {"bm25": "BM25", "dense": "dense (MiniLM)", "relevance-ce": "relevance CE",
                 "pa-ce": "PA-CE", "llm-rerank": "LLM-rerank", "corm": "CoRM critic"}


def test_queries(scale: Scale | str | None = None) -> pd.DataFrame:
    """One row per query: each test question clean, and each of its biased rewrites."""
    questions, rewrites = pipeline.test_set(scale)
    by_id = {q.id: q for q in questions}
    rows = [{"question_id": q.id, "condition": "clean", "type": "clean", "query": q.text,
             "answers": q.answers, "gold_ids": q.gold_ids} for q in questions]
    rows += [{"question_id": r.question_id, "condition": "biased", "type": r.type, "query": r.text,
              "answers": by_id[r.question_id].answers, "gold_ids": by_id[r.question_id].gold_ids}
             for r in rewrites]
    return pd.DataFrame(rows)


def rerankers(scale: Scale | str | None = None, names: Sequence[str] | None = None) -> dict:
    """The methods by name. Critic variants from ``pipeline.CRITIC_VARIANTS`` are trained on demand."""
    from robustkit.critic import CriticScorer

    scale = pipeline.scale_of(scale)
    names = names or list(METHOD_LABELS)
    out = {}
    for name in names:
        if name in ("bm25", "dense"):
            out[name] = FirstStage(name)
        elif name == "llm-rerank":
            out[name] = LLMReranker(pipeline.generator_for(scale.name), scale.max_passage_words)
        else:
            out[name] = CrossEncoderReranker(name, CriticScorer(pipeline.critic(scale, name)))
    return out


def run_methods(scale: Scale | str | None, methods: dict, queries: pd.DataFrame, *,
                m: int | None = None) -> pd.DataFrame:
    """Forced generation (γ off) for every method and query; one row per (method, query)."""
    from robustkit.retrieval import BM25Retriever

    scale = pipeline.scale_of(scale)
    corpus = pipeline.corpus_for(scale.name)
    m = m or min(scale.m_inference, len(corpus))
    frames = []
    for name, reranker in methods.items():
        retriever = BM25Retriever(corpus) if name == "bm25" else pipeline.retriever_for(scale.name)
        system = RiskAwareRAG(retriever, reranker, pipeline.generator_for(scale.name), corpus,
                              m=m, c=scale.context_size, max_words=scale.max_passage_words)
        results = system(list(queries["query"]))
        frame = queries.copy()
        frame["method"] = name
        frame["answer"] = [r.answer for r in results]
        frame["correct"] = [substring_match(r.answer, a) for r, a in zip(results, queries["answers"])]
        frame["confidence"] = [r.confidence for r in results]
        frame["ranked_ids"] = [r.ranked_ids for r in results]
        gold = [[d for d in r.ranked_ids if has_answer(corpus[d], a)]
                for r, a in zip(results, queries["answers"])]
        frame["gold_rank"] = [first_relevant_rank(r.ranked_ids, g) for r, g in zip(results, gold)]
        frame["gold_ids_ranked"] = gold
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def rerank_latency(scale: Scale | str | None, methods: dict, queries: Sequence[str], *,
                   m: int | None = None) -> pd.DataFrame:
    """Reranking time per query (ms) for M candidates, measured now, with no cache."""
    scale = pipeline.scale_of(scale)
    corpus = pipeline.corpus_for(scale.name)
    m = m or min(scale.m_inference, len(corpus))
    hits = pipeline.retriever_for(scale.name).search(list(queries), m)
    candidates = [[corpus[h.doc_id] for h in row] for row in hits]
    first = [[h.score for h in row] for row in hits]
    rows = []
    for name, reranker in methods.items():
        if isinstance(reranker, LLMReranker):  # time real model calls, not cache hits
            reranker = LLMReranker(reranker.generator.with_cache(False), reranker.max_words)
        start = time.perf_counter()
        reranker.score(list(queries), candidates, first)
        rows.append({"method": name, "rerank ms/query": 1000 * (time.perf_counter() - start) / len(queries),
                     "candidates": m})
    return pd.DataFrame(rows)


def table1(results: pd.DataFrame, latency: pd.DataFrame | None = None) -> pd.DataFrame:
    """Accuracy on clean and biased queries (95% bootstrap CI), robustness gap, latency."""
    rows = []
    for method, frame in results.groupby("method", sort=False):
        clean = frame.loc[frame["condition"] == "clean", "correct"]
        biased = frame.loc[frame["condition"] == "biased", "correct"]
        low, high = bootstrap_ci(biased.to_numpy())
        rows.append({"method": METHOD_LABELS.get(method, method), "key": method,
                     "clean accuracy": 100 * clean.mean(), "biased accuracy": 100 * biased.mean(),
                     "biased 95% CI": f"{100 * low:.1f}–{100 * high:.1f}",
                     "robustness gap": 100 * (clean.mean() - biased.mean()),
                     "n clean": len(clean), "n biased": len(biased)})
    table = pd.DataFrame(rows)
    if latency is not None:
        table = table.merge(latency[["method", "rerank ms/query"]].rename(columns={"method": "key"}),
                            on="key", how="left")
    return table.assign(source="kit").round(1)


def significance(results: pd.DataFrame, reference: str = "corm") -> pd.DataFrame:
    """Exact McNemar test of the reference method against every other, on biased queries: the
    discordant counts (only the reference right / only the other right) and the p-value."""
    biased = results[results["condition"] == "biased"]
    ref = biased[biased["method"] == reference].set_index(["question_id", "type"])["correct"]
    rows = []
    for method, frame in biased.groupby("method", sort=False):
        if method == reference:
            continue
        other = frame.set_index(["question_id", "type"])["correct"].reindex(ref.index)
        test = mcnemar(ref.to_numpy(), other.to_numpy())
        rows.append({"vs": method, "only reference right": test["a_only"],
                     "only other right": test["b_only"], "p (exact McNemar)": round(test["p_value"], 4)})
    return pd.DataFrame(rows)


def risk_coverage_table(results: pd.DataFrame, methods: Sequence[str] = ("corm", "relevance-ce"),
                        condition: str = "biased") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Selective accuracy vs coverage as γ sweeps (answer the most confident first), and per
    method AURC, ECE and accuracy at 80% / 50% coverage."""
    curves, summary = [], []
    for method in methods:
        frame = results[(results["method"] == method) & (results["condition"] == condition)]
        conf, correct = frame["confidence"].to_numpy(), frame["correct"].to_numpy()
        curve = pd.DataFrame(risk_coverage(conf, correct)).assign(method=method)
        curves.append(curve)
        summary.append({"method": method, "AURC": aurc(conf, correct),
                        "ECE": expected_calibration_error(conf, correct),
                        "acc@100%": correct.mean(), "acc@80%": accuracy_at_coverage(conf, correct, 0.8),
                        "acc@50%": accuracy_at_coverage(conf, correct, 0.5), "n": len(frame)})
    return pd.concat(curves, ignore_index=True), pd.DataFrame(summary).round(3)


def recall_table(results: pd.DataFrame, methods: Sequence[str] = ("dense", "relevance-ce", "corm"),
                 condition: str = "biased") -> pd.DataFrame:
    """Recall@k (k = 1…M) of a gold-bearing passage, on queries whose pool contains one."""
    rows = []
    for method in methods:
        frame = results[(results["method"] == method) & (results["condition"] == condition)]
        frame = frame[frame["gold_ids_ranked"].map(len) > 0]
        depth = max(len(r) for r in frame["ranked_ids"])
        for k in range(1, depth + 1):
            hits = [recall_at_k(r, g, k) for r, g in zip(frame["ranked_ids"], frame["gold_ids_ranked"])]
            rows.append({"method": method, "k": k, "recall": float(np.mean(hits)), "n": len(frame)})
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


def ablation(scale: Scale | str | None, queries: pd.DataFrame) -> pd.DataFrame:
    """Fig. 5: critics trained without one perturbation type (upsampled to the same size),
    biased accuracy per test type."""
    from robustkit.data.records import PERTURBATION_TYPES

    variants = ["corm", *(f"no-{t}" for t in PERTURBATION_TYPES)]
    biased = queries[queries["condition"] == "biased"]
    results = run_methods(scale, rerankers(scale, variants), biased)
    table = accuracy_by_type(results)
    return table.loc[variants].rename(index={"corm": "all types"})


def sensitivity(scale: Scale | str | None, queries: pd.DataFrame,
                m_values: Sequence[int] | None = None) -> pd.DataFrame:
    """Fig. 6: biased accuracy as K (perturbations used in training), τ and M (candidates at
    inference) vary, one knob at a time around the scale's defaults."""
    scale = pipeline.scale_of(scale)
    biased = queries[queries["condition"] == "biased"]
    k_variants = {k: (f"k-{k}" if k < scale.k_perturbations else "corm")
                  for k in range(1, scale.k_perturbations + 1)}
    tau_variants = {0.1: "tau-0.1", 1.0: "corm", 3.0: "tau-3"}
    names = list(dict.fromkeys([*k_variants.values(), *tau_variants.values()]))
    results = run_methods(scale, rerankers(scale, names), biased)  # each critic scored once
    accuracy = 100 * results.groupby("method")["correct"].mean()
    rows = [{"knob": knob, "value": value, "biased accuracy": accuracy[name]}
            for knob, variants in (("K", k_variants), ("τ", tau_variants))
            for value, name in variants.items()]
    corm = rerankers(scale, ["corm"])
    for m in m_values or sorted({max(scale.context_size, scale.m_inference // 4),
                                 scale.m_inference // 2, scale.m_inference}):
        if m == scale.m_inference:  # the default M: already scored above
            rows.append({"knob": "M", "value": m, "biased accuracy": accuracy["corm"]})
            continue
        results_m = run_methods(scale, corm, biased, m=m)
        rows.append({"knob": "M", "value": m, "biased accuracy": 100 * results_m["correct"].mean()})
    return pd.DataFrame(rows).round(1)


def findings(table: pd.DataFrame, tests: pd.DataFrame, coverage: pd.DataFrame, shares: dict) -> str:
    """The run's headline numbers as sentences, with what is and is not significant."""
    by_key = table.set_index("key")
    corm = by_key.loc["corm"]
    lines = [f"CoRM critic: {corm['clean accuracy']:.1f}% clean, {corm['biased accuracy']:.1f}% biased "
             f"(95% CI {corm['biased 95% CI']}), robustness gap {corm['robustness gap']:.1f} points."]
    for _, row in tests.iterrows():
        other = by_key.loc[row["vs"]]
        better = "better" if row["only reference right"] > row["only other right"] else "worse"
        verdict = (f"CoRM significantly {better}" if row["p (exact McNemar)"] < 0.05
                   else "no significant difference")
        lines.append(f"vs {other['method']}: {other['biased accuracy']:.1f}% biased; "
                     f"exact McNemar p = {row['p (exact McNemar)']:.3g} ({verdict} at 0.05).")
    rc = coverage.set_index("method").loc["corm"]
    lines.append(f"Abstaining on the least confident 20% moves CoRM's biased accuracy "
                 f"{100 * rc['acc@100%']:.1f} → {100 * rc['acc@80%']:.1f}%, at 50% coverage "
                 f"{100 * rc['acc@50%']:.1f}% (paper: 52.6 → 62.0 → 78.0).")
    lines.append(f"First gold passage ranked higher by the critic than by the relevance CE on "
                 f"{shares['corm better']:.1%} of queries, lower on {shares['relevance-ce better']:.1%}, "
                 f"tied on {shares['tie']:.1%} (paper: 45.7 / 27.1 / 27.2).")
    return "\n".join(lines)
