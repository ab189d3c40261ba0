"""CoRM-RAG's evaluation (§4): every method on the same questions, as tidy tables.

``run_methods`` answers the clean and the biased version of every test question with each
method — same dense candidates (BM25 retrieves its own), same generator, same context size C —
through the kit's one ``Method`` interface, and keeps, per query, the ranking, the scores, the
answer and whether it is right. The paper's tables and figures are then pure functions of that
table (``table1``, ``risk_coverage_table``, ``recall_table``, ``paired_ranks``, …), which
``corm.figures`` draws beside the paper's numbers (``corm.paper``).
"""
from __future__ import annotations

import time
from typing import Sequence

import numpy as np
import pandas as pd

from robustkit import memo, resources
from robustkit import methods as kit_methods
from robustkit.baselines import (CrossEncoderReranker, FirstStage, LLMReranker, RandomOrder,
                                 RerankedRAG)
from robustkit.corm import paper, pipeline
from robustkit.corm.config import CormConfig, settings
from robustkit.corm.method import PriorReranker, RiskAwareRAG, choose_lambda
from robustkit.data.records import PERTURBATION_TYPES, Corpus, Question, Rewrite, has_answer
from robustkit.device import cpu_info
from robustkit.methods import Query
from robustkit.retrieval import BM25Retriever, DenseRetriever, load_embedder
from robustkit.metrics import (accuracy_at_coverage, aurc, cluster_bootstrap_ci, excess_aurc,
                               expected_calibration_error, first_relevant_rank, format_p,
                               paired_tests, recall_at_k, risk_coverage, threshold_at_coverage)

METHOD_LABELS = {"bm25": "BM25", "dense": "dense (MiniLM)", "random": "random order",
                 "warm-start": "warm start (kit)", "relevance-ce": "relevance CE", "pa-ce": "PA-CE",
                 "llm-rerank": "LLM-rerank",
                 "corm": "CoRM critic", "corm-soft": "CoRM critic, soft labels (kit)",
                 "corm-prior": "CoRM critic + dense prior (kit)"}


def test_queries(cfg: CormConfig | None = None) -> pd.DataFrame:
    """One row per query: each test question clean, and each of its biased rewrites."""
    return queries_for(*pipeline.test_set(cfg))


def queries_for(questions: Sequence[Question], rewrites: Sequence[Rewrite]) -> pd.DataFrame:
    """The queries table of any questions and biased rewrites of them (hand-written, or the
    adversary's: ``pipeline.adversary_rewrites``): each question clean, then each rewrite, any
    number per question and type. A question's first rewrite of a type is ``<id>|<type>``, a
    further one ``<id>|<type>|<n>``."""
    by_id = {q.id: q for q in questions}
    if unknown := sorted({r.question_id for r in rewrites} - set(by_id)):
        raise ValueError(f"rewrites of question(s) {unknown[:5]} that are not among the {len(by_id)} questions given")
    rows = [{"query_id": q.id, "question_id": q.id, "condition": "clean", "type": "clean",
             "query": q.text, "answers": q.answers, "gold_ids": q.gold_ids} for q in questions]
    seen: dict[tuple[str, str], int] = {}
    for r in rewrites:
        n = seen[r.question_id, r.type] = seen.get((r.question_id, r.type), 0) + 1
        rows.append({"query_id": f"{r.question_id}|{r.type}" + (f"|{n}" if n > 1 else ""),
                     "question_id": r.question_id, "condition": "biased", "type": r.type, "query": r.text,
                     "answers": by_id[r.question_id].answers, "gold_ids": by_id[r.question_id].gold_ids})
    return pd.DataFrame(rows)


def method(cfg: CormConfig | None, name: str, *, m: int | None = None, gamma: float | None = None,
           corpus: Corpus | None = None, retriever=None) -> RerankedRAG:
    """One method by name, over the scale's corpus, dense candidates and reader — or over
    ``corpus`` (a user's own), searched by ``retriever`` (default: dense retrieval over it with
    the scale's embedder); the trained critics are the scale's, whatever the corpus.

    ``bm25`` and ``dense``: the first stage alone; ``random``: the dense candidates in a random
    order; ``llm-rerank``: the reader judging each candidate; any critic variant of
    ``pipeline.CRITIC_VARIANTS`` (trained on demand): that cross-encoder reranking — CoRM's
    variants through Algorithm 1 (``RiskAwareRAG``, γ = None is forced generation), the
    relevance CE, PA-CE and the kit's relevance warm start (``warm-start``, the init they all
    share) as plain reranked RAG; ``corm-prior``: the critic on top of the dense scores
    (``corm.method``'s retrieval prior, the kit's extension); ``corm-soft``: the critic distilled from the soft
    utility s_soft instead of the 0/1 label (the kit's, same groups count and steps).
    """
    cfg = settings(cfg)
    scale, reader = cfg.scale, resources.generator_for(cfg.scale)
    corpus, dense, bm25 = _searched(scale, corpus, retriever, name)
    common = dict(m=min(m or cfg.m_inference, len(corpus)), c=cfg.context_size,
                  max_words=scale.max_passage_words)
    if name == "bm25":
        return RerankedRAG(bm25, FirstStage(name), reader, corpus, **common)
    if name == "dense":
        return RerankedRAG(dense, FirstStage(name), reader, corpus, **common)
    if name == "random":  # the dense top-M in a seeded random order
        return RerankedRAG(dense, RandomOrder(scale.seed), reader, corpus, **common)
    if name == "llm-rerank":
        return RerankedRAG(dense, LLMReranker(reader, scale.max_passage_words), reader, corpus, **common)
    if name == "corm-prior":  # the kit's extension: the critic on top of the dense scores
        return RerankedRAG(dense, PriorReranker(name, pipeline.critic_scorer(cfg, "corm"),
                                                prior_weight(cfg)[0]), reader, corpus, **common)
    reranker = CrossEncoderReranker(name, pipeline.critic_scorer(cfg, name))
    if name in ("relevance-ce", "pa-ce", "warm-start"):
        return RerankedRAG(dense, reranker, reader, corpus, **common)
    return RiskAwareRAG(dense, reranker, reader, corpus, gamma=gamma, **common)


def _searched(scale, corpus: Corpus | None, retriever, name: str):
    """(corpus, dense retriever, BM25 retriever) for ``method``: the scale's, or over ``corpus``."""
    if corpus is None:
        if retriever is not None:
            raise ValueError("a retriever needs the corpus it searches: pass corpus= too")
        return (resources.corpus_for(scale), resources.retriever_for(scale),
                resources.bm25_for(scale) if name == "bm25" else None)
    if retriever is None:
        retriever = DenseRetriever(corpus, load_embedder(scale))
    return corpus, retriever, BM25Retriever(corpus) if name == "bm25" else None


def run_methods(cfg: CormConfig | None, names: Sequence[str], queries: pd.DataFrame, *,
                m: int | None = None, corpus: Corpus | None = None, retriever=None) -> pd.DataFrame:
    """Forced generation (γ off) for every named method and query; one row per (method, query),
    with where the first gold-bearing passage landed in each ranking (looked up in the corpus
    searched: the scale's, or ``corpus`` with ``retriever`` as ``method`` takes them). Each
    method's rows are staged under ``runs/<scale>/corm/results/`` (``methods.evaluate``: a
    manifest per method, whose identity names the corpus).

    LLM-rerank answers only the biased queries of ``cfg.llm_rerank_questions`` test questions
    (a seeded sample; every query when 0), so its rows — and every paired comparison with it —
    cover that subset, as the tables' n columns say.
    """
    cfg = settings(cfg)
    frames, searched = [], corpus if corpus is not None else resources.corpus_for(cfg.scale)
    for name in names:
        asked = llm_rerank_subset(cfg, queries) if name == "llm-rerank" else queries
        system = method(cfg, name, m=m, corpus=corpus, retriever=retriever)
        frames.append(kit_methods.evaluate({name: system}, asked, pipeline.run_dir(cfg) / "results"))
    results = pd.concat(frames, ignore_index=True)
    results["ranked_ids"] = [trace["ranked_ids"] for trace in results["trace"]]
    results["gold_ids_ranked"] = [[d for d in ranked if has_answer(searched[d], answers)]
                                  for ranked, answers in zip(results["ranked_ids"], results["answers"])]
    results["gold_rank"] = [first_relevant_rank(r, g) for r, g in
                            zip(results["ranked_ids"], results["gold_ids_ranked"])]
    return results


def llm_rerank_subset(cfg: CormConfig | None, queries: pd.DataFrame) -> pd.DataFrame:
    """The queries LLM-rerank is run on: all when ``cfg.llm_rerank_questions`` is 0, else the
    biased queries of that many sampled test questions (the paper reports its biased accuracy
    only, and each query costs one 135M pass per candidate)."""
    cfg = settings(cfg)
    ids = sorted(queries["question_id"].unique())
    if not cfg.llm_rerank_questions:
        return queries
    chosen = set(resources.sample(ids, min(cfg.llm_rerank_questions, len(ids)), cfg.scale.seed))
    return queries[queries["question_id"].isin(chosen) & (queries["condition"] == "biased")]


def rerank_latency(cfg: CormConfig | None, names: Sequence[str], queries: Sequence[str]) -> pd.DataFrame:
    """Reranking time per query (ms) for M dense candidates, measured now, with no cache, after
    one untimed warm-up pair, and where: the CPU (its threads) or GPU it ran on."""
    cfg = settings(cfg)
    import torch

    cpu = cpu_info()
    hardware = (torch.cuda.get_device_name() if torch.cuda.is_available()
                else f"{cpu['model']} ({cpu['isa']}, {torch.get_num_threads()} threads, fp32)")
    rows = []
    for name in names:
        system = method(cfg, name)
        hits = system.retriever.search(list(queries), system.m)
        candidates = [[system.corpus[h.doc_id] for h in row] for row in hits]
        reranker = system.reranker.uncached()  # time real model calls, not cache hits
        # one untimed pair first: the first forward pass pays for allocations and kernel choice
        reranker.score(list(queries[:1]), [candidates[0][:1]], [[hits[0][0].score]])
        start = time.perf_counter()
        reranker.score(list(queries), candidates, [[h.score for h in row] for row in hits])
        rows.append({"method": name, "rerank ms/query": 1000 * (time.perf_counter() - start) / len(queries),
                     "candidates": system.m, "timed queries": len(queries), "hardware": hardware})
    return pd.DataFrame(rows)


def gamma_at_coverage(cfg: CormConfig | None, coverage: float = 0.8, variant: str = "corm") -> float:
    """The γ at which Algorithm 1 answers ``coverage`` of the *validation* questions' perturbed
    queries (held-out training questions, never a test question): the highest threshold with
    P(S[0] ≥ γ) ≥ coverage, read off their S[0] over the same M dense candidates as at test."""
    if not 0 < coverage <= 1:  # checked before any critic is trained
        raise ValueError(f"coverage must be in (0, 1], got {coverage}")
    _, val_groups, _ = pipeline.training_groups(cfg)
    queries = sorted({g["query"] for g in val_groups})
    return threshold_at_coverage([scores[0] for _, scores in method(cfg, variant).rank(queries)],
                                 coverage)


def prior_weight(cfg: CormConfig | None = None, variant: str = "corm") -> tuple[float, pd.DataFrame]:
    """The retrieval prior's λ (``corm.method``), chosen on the critic's *validation* questions'
    biased queries (held-out training questions) over the same M dense candidates as at test:
    the λ whose ranking puts a gold-bearing passage highest (MRR). Returns (λ, MRR per λ).

    Chosen once per process and config: ``method(cfg, "corm-prior")`` asks for it each time."""
    lam, rows = _prior_weight(settings(cfg), variant)
    return lam, pd.DataFrame(rows)


@memo.cached(8, per_runs_folder=True)
def _prior_weight(cfg: CormConfig, variant: str) -> tuple[float, list[dict]]:
    _, val_groups, _ = pipeline.training_groups(cfg)
    answers = {q.id: q.answers for q in pipeline.train_questions(cfg)}
    queries = sorted({(g["query"], g["question_id"]) for g in val_groups})
    system = method(cfg, "dense")
    hits = system.retriever.search([q for q, _ in queries], system.m)
    candidates = [[system.corpus[h.doc_id] for h in row] for row in hits]
    critic = pipeline.critic_scorer(cfg, variant)
    scores = CrossEncoderReranker(variant, critic).score([q for q, _ in queries], candidates, None)
    relevant = [[has_answer(d, answers[qid]) for d in docs] for (_, qid), docs in zip(queries, candidates)]
    return choose_lambda(scores, [[h.score for h in row] for row in hits], relevant)


def compare_on_query(systems: dict, query: str) -> pd.DataFrame:
    """Algorithm 1 step by step on one query, for several systems: the best score S[0], the
    passages it reads (none when it abstains) and its answer."""
    rows = []
    for label, system in systems.items():
        answer = system.answer([Query("q", "q", query)])[0]
        rows.append({"system": label, "S[0]": round(answer.confidence, 3),
                     "context": [system.corpus[d].title for d in answer.passage_ids],
                     "answer": answer.text})
    return pd.DataFrame(rows)


def critic_scores(cfg: CormConfig | None, query: str, passages: dict, variants: Sequence[str]) -> pd.DataFrame:
    """σ(z) of each critic variant for one query and a few labelled passages (label → Passage)."""
    texts = [p.content for p in passages.values()]
    return pd.DataFrame({"passage": list(passages), **{
        v: pipeline.critic_scorer(cfg, v).score([query] * len(texts), texts) for v in variants}}).round(3)


def table1(results: pd.DataFrame, latency: pd.DataFrame | None = None) -> pd.DataFrame:
    """Accuracy on clean and biased queries, robustness gap, latency. The 95% CI is a percentile
    bootstrap that resamples questions, so several rewrites of one question count once."""
    rows = []
    for method, frame in results.groupby("method", sort=False):
        clean = frame.loc[frame["condition"] == "clean", "correct"]
        biased_rows = frame[frame["condition"] == "biased"]
        biased = biased_rows["correct"]
        low, high = cluster_bootstrap_ci(biased.to_numpy(), biased_rows["question_id"].to_numpy())
        rows.append({"method": METHOD_LABELS.get(method, method), "key": method,
                     "clean accuracy": 100 * clean.mean(), "biased accuracy": 100 * biased.mean(),
                     "biased 95% CI": f"{100 * low:.1f}–{100 * high:.1f}",
                     "biased CI low": 100 * low, "biased CI high": 100 * high,
                     "robustness gap": 100 * (clean.mean() - biased.mean()),
                     "n clean": len(clean), "n biased": len(biased)})
    table = pd.DataFrame(rows)
    if latency is not None:
        table = table.merge(latency[["method", "rerank ms/query"]].rename(columns={"method": "key"}),
                            on="key", how="left")
    return table.assign(source="kit").round(1)


def significance(results: pd.DataFrame, reference: str = "corm") -> pd.DataFrame:
    """Exact McNemar test of the reference method against every other on the biased queries
    (``metrics.paired_tests``): improvements, regressions, n, p, uncorrected (one per row). With
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
    rate, success@k); methods absent from ``results`` are left out."""
    rows = []
    for method in [m for m in methods if m in set(results["method"])]:
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


def ablation(cfg: CormConfig | None, queries: pd.DataFrame) -> pd.DataFrame:
    """Fig. 5: critics trained without one perturbation type (upsampled to the same number of
    groups) against the critic trained on all types, on the same biased queries
    (``ablation_changes``)."""
    variants = [f"no-{t}" for t in PERTURBATION_TYPES]
    biased = queries[queries["condition"] == "biased"]
    return ablation_changes(run_methods(settings(cfg), ["corm", *variants], biased), variants)


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


def sensitivity(cfg: CormConfig | None, queries: pd.DataFrame,
                m_values: Sequence[int] | None = None) -> pd.DataFrame:
    """Fig. 6: biased accuracy (95% CI by question, n) as K (perturbations used in training), τ
    and M (candidates at inference) vary, one knob at a time around the defaults."""
    cfg = settings(cfg)
    biased = queries[queries["condition"] == "biased"]
    k_variants = {k: (f"k-{k}" if k < cfg.k_perturbations else "corm")
                  for k in range(1, cfg.k_perturbations + 1)}
    tau_variants = {0.1: "tau-0.1", 1.0: "corm", 3.0: "tau-3"}
    names = list(dict.fromkeys([*k_variants.values(), *tau_variants.values()]))
    results = run_methods(cfg, names, biased)  # each critic scored once
    by_method = dict(tuple(results.groupby("method")))
    rows = [{"knob": knob, "value": value, **_accuracy_ci(by_method[name])}
            for knob, variants in (("K", k_variants), ("τ", tau_variants))
            for value, name in variants.items()]
    for m in m_values or sorted({max(cfg.context_size, cfg.m_inference // 4),
                                 cfg.m_inference // 2, cfg.m_inference}):
        frame = by_method["corm"] if m == cfg.m_inference else run_methods(cfg, ["corm"], biased, m=m)
        rows.append({"knob": "M", "value": m, **_accuracy_ci(frame)})
    return pd.DataFrame(rows).round(1)


def _accuracy_ci(frame: pd.DataFrame) -> dict:
    low, high = cluster_bootstrap_ci(frame["correct"].to_numpy(float), frame["question_id"].to_numpy())
    return {"biased accuracy": 100 * frame["correct"].mean(), "CI low": 100 * low,
            "CI high": 100 * high, "n": len(frame)}


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
        other = by_key.loc[row["vs"]]
        better = "better" if row["improvements"] > row["regressions"] else "worse"
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
