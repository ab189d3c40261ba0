"""CoRM-RAG's evaluation run (§4): every method on the same questions, staged.

    queries = test_queries(cfg)                          # each test question clean and biased
    results = run_methods(cfg, ["dense", "corm"], queries)  # one row per (method, query), scored

``run_methods`` answers the clean and the biased version of every test question with each method
(``corm.build``) — same dense candidates (BM25 retrieves its own), same generator, same context
size C — through the kit's one ``Method`` interface, and keeps, per query, the ranking, the scores,
the answer and whether it is right. The paper's tables and figures are then pure functions of that
table (``corm.experiments``), which ``corm.figures`` draws beside the paper's numbers.
"""
from __future__ import annotations

import time
from typing import Sequence

import pandas as pd

from robustkit import resources
from robustkit import methods as kit_methods
from robustkit.corm import train
from robustkit.corm.build import build
from robustkit.corm.config import CormSettings, settings
from robustkit.corm.data import run_dir
from robustkit.corm.experiments import ablation_changes, accuracy_ci
from robustkit.data.records import PERTURBATION_TYPES, Corpus, Question, Rewrite, has_answer
from robustkit.device import cpu_info
from robustkit.methods import Query
from robustkit.metrics import first_relevant_rank


def test_queries(cfg: CormSettings = None) -> pd.DataFrame:
    """One row per query: each test question clean, and each of its biased rewrites."""
    return queries_for(*train.test_set(cfg))


def queries_for(questions: Sequence[Question], rewrites: Sequence[Rewrite]) -> pd.DataFrame:
    """The queries table of any questions and biased rewrites of them (hand-written, or the
    adversary's: ``train.adversary_rewrites``): each question clean, then each rewrite, any
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


def run_methods(cfg: CormSettings, names: Sequence[str], queries: pd.DataFrame, *,
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
        system = build(name, cfg, m=m, corpus=corpus, retriever=retriever)
        frames.append(kit_methods.evaluate({name: system}, asked, run_dir(cfg) / "results"))
    results = pd.concat(frames, ignore_index=True)
    results["ranked_ids"] = [trace["ranked_ids"] for trace in results["trace"]]
    results["gold_ids_ranked"] = [[d for d in ranked if has_answer(searched[d], answers)]
                                  for ranked, answers in zip(results["ranked_ids"], results["answers"])]
    results["gold_rank"] = [first_relevant_rank(r, g) for r, g in
                            zip(results["ranked_ids"], results["gold_ids_ranked"])]
    return results


def llm_rerank_subset(cfg: CormSettings, queries: pd.DataFrame) -> pd.DataFrame:
    """The queries LLM-rerank is run on: all when ``cfg.llm_rerank_questions`` is 0, else the
    biased queries of that many sampled test questions (the paper reports its biased accuracy
    only, and each query costs one 135M pass per candidate)."""
    cfg = settings(cfg)
    ids = sorted(queries["question_id"].unique())
    if not cfg.llm_rerank_questions:
        return queries
    chosen = set(resources.sample(ids, min(cfg.llm_rerank_questions, len(ids)), cfg.scale.seed))
    return queries[queries["question_id"].isin(chosen) & (queries["condition"] == "biased")]


def rerank_latency(cfg: CormSettings, names: Sequence[str], queries: Sequence[str]) -> pd.DataFrame:
    """Reranking time per query (ms) for M dense candidates, measured now, with no cache, after
    one untimed warm-up pair, and where: the CPU (its threads) or GPU it ran on."""
    cfg = settings(cfg)
    import torch

    cpu = cpu_info()
    hardware = (torch.cuda.get_device_name() if torch.cuda.is_available()
                else f"{cpu['model']} ({cpu['isa']}, {torch.get_num_threads()} threads, fp32)")
    rows = []
    for name in names:
        system = build(name, cfg)
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


def critic_scores(cfg: CormSettings, query: str, passages: dict, variants: Sequence[str]) -> pd.DataFrame:
    """σ(z) of each critic variant for one query and a few labelled passages (label → Passage)."""
    texts = [p.content for p in passages.values()]
    return pd.DataFrame({"passage": list(passages), **{
        v: train.critic_scorer(cfg, v).score([query] * len(texts), texts) for v in variants}}).round(3)


def ablation(cfg: CormSettings, queries: pd.DataFrame) -> pd.DataFrame:
    """Fig. 5: critics trained without one perturbation type (upsampled to the same number of
    groups) against the critic trained on all types, on the same biased queries
    (``ablation_changes``)."""
    variants = [f"no-{t}" for t in PERTURBATION_TYPES]
    biased = queries[queries["condition"] == "biased"]
    return ablation_changes(run_methods(settings(cfg), ["corm", *variants], biased), variants)


def sensitivity(cfg: CormSettings, queries: pd.DataFrame,
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
    rows = [{"knob": knob, "value": value, **accuracy_ci(by_method[name])}
            for knob, variants in (("K", k_variants), ("τ", tau_variants))
            for value, name in variants.items()]
    for m in m_values or sorted({max(cfg.context_size, cfg.m_inference // 4),
                                 cfg.m_inference // 2, cfg.m_inference}):
        frame = by_method["corm"] if m == cfg.m_inference else run_methods(cfg, ["corm"], biased, m=m)
        rows.append({"knob": "M", "value": m, **accuracy_ci(frame)})
    return pd.DataFrame(rows).round(1)
