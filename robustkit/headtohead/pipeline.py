"""The head-to-head's run: every method of the four papers and their baselines on the same
questions, corpus, generator, dense retriever and judge — one staged results table.

    asked = rk.headtohead.queries(cfg)    # each test question clean and with its biased rewrite
    results = rk.headtohead.run(cfg)      # one row per (method, query), scored

The questions are CoRM-RAG's test queries (data/mini at tiny, NQ-open over its oracle corpus at
small): each question clean and rewritten by the adversary under one of the three bias types.
Every method reads the scale's corpus through the same dense retriever and the same reader, and
is scored by normalised match. Each keeps the knobs its own notebook runs it with — CoRM's M
candidates and context C, FVA-RAG's k and m, CounterRefine's k and snippet cap, AlignRAG's T —
so the retrieval budgets differ by design; the tables report each method's retrieval and model
calls beside its accuracy. Its trained parts are the ones notebooks 03–07 train (reused when
staged): CoRM's critics, the NLI adjudicator, CRAG's evaluator, AlignRAG's critic.

Results are staged per method under ``runs/<scale>/headtohead/results/`` (``methods.evaluate``).
This folder is the one place that imports the method folders: it composes them, it adds none.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from robustkit import methods as kit_methods
from robustkit import registry, resources
from robustkit.alignrag import pipeline as alignrag_pipeline
from robustkit.alignrag.config import AlignRAGConfig
from robustkit.config import runs_dir
from robustkit.corm.config import CormConfig
from robustkit.corm.pipeline import test_queries
from robustkit.counterrefine import pipeline as counterrefine_pipeline
from robustkit.counterrefine.config import CounterRefineConfig
from robustkit.counterrefine.data import eval_sets as counterrefine_sets
from robustkit.fva import pipeline as fva_pipeline
from robustkit.fva.config import FVAConfig
from robustkit.fva.data import eval_sets as fva_sets
from robustkit.headtohead.config import HeadToHeadConfig, settings
from robustkit.retrieval import DenseRetriever, load_embedder

REFERENCE = "dense"  # every paired test compares with vanilla dense RAG
# CoRM-RAG's rerankers and the baselines it compares them with: each reranks the scale's dense top M
CORM_FAMILY = ("bm25", "dense", "random", "relevance-ce", "pa-ce", "llm-rerank", "corm", "corm+abstain")
PAPERS = {i: registry.paper(i) for i in registry.ids()}  # where each method comes from (the tables' "paper")
LABELS = {i: registry.label(i) for i in registry.ids()}


def run_dir(cfg: HeadToHeadConfig | None = None) -> Path:
    path = runs_dir(settings(cfg).scale) / "headtohead"
    path.mkdir(parents=True, exist_ok=True)
    return path


def queries(cfg: HeadToHeadConfig | None = None) -> pd.DataFrame:
    """CoRM's test queries of ``cfg.n_questions`` test questions (a seeded sample; all when 0):
    one row per query with ``condition`` (clean/biased), ``type`` (clean or the bias type) and the
    gold ``answers``."""
    cfg = settings(cfg)
    table = test_queries(cfg.config_for(CormConfig))
    chosen = resources.sample(sorted(table["question_id"].unique()), cfg.n_questions, cfg.scale.seed)
    return table[table["question_id"].isin(set(chosen))].reset_index(drop=True)


def system(cfg: HeadToHeadConfig | None, name: str, *, retriever=None, corpus=None):
    """The method ``name`` (a registry id) over the scale's corpus, dense retriever and reader, with
    the config its paper runs it with in ``cfg.configs`` (its notebook's defaults unless tuned);
    trained parts reused when staged, trained if not. ``corpus`` (a user's own) replaces the
    scale's, searched by ``retriever`` (needed beyond CoRM-RAG's methods, which build dense
    retrieval over it by default); trained parts stay the scale's."""
    cfg = settings(cfg)
    return registry.build(name, cfg.configs, corpus=corpus, retriever=retriever)


def run(cfg: HeadToHeadConfig | None = None, asked: pd.DataFrame | None = None, *, corpus=None,
        retriever=None) -> pd.DataFrame:
    """Every method of ``cfg.methods`` on ``queries(cfg)`` — or on ``asked``, any queries table
    (``corm.pipeline.queries_for`` builds one from a user's questions and rewrites, any number
    per question) over ``corpus`` searched by ``retriever`` — scored by normalised match; one row
    per (method, query) with the method's ``paper``. Staged per method (the staged identity names
    the corpus): a finished method is read back, an interrupted run resumes at the first
    unfinished one."""
    cfg = settings(cfg)
    asked = queries(cfg) if asked is None else asked
    if corpus is not None and retriever is None:
        retriever = DenseRetriever(corpus, load_embedder(cfg.scale))
    frames = []
    for name in cfg.methods:
        print(f"[robustkit] head to head: {name} ({cfg.methods.index(name) + 1} of {len(cfg.methods)})", flush=True)
        method = system(cfg, name, corpus=corpus, retriever=retriever)
        frames.append(kit_methods.evaluate({name: method}, asked, run_dir(cfg) / "results"))
    results = pd.concat(frames, ignore_index=True)
    return results.assign(paper=results["method"].map(PAPERS))


# The sets some methods were built for, beyond the shared biased queries. Each is read from (or run
# beside) its own method's pipeline, so that method's paper knobs, corpus and judge hold there.
# The two-hop questions come twice, once per reader: CounterRefine's draft and AlignRAG's plain RAG
# read them with different prompts and passages, and each method is tested against its own.
TWO_HOP_COUNTERREFINE, TWO_HOP_ALIGNRAG = "two-hop, CounterRefine's reader", "two-hop, AlignRAG's reader"
BUILT_FOR = {"misconceptions": ("dense", "self-rag", "crag", "fva-rag"),
             "misconceptions + debunking": ("dense", "self-rag", "crag", "fva-rag"),
             TWO_HOP_COUNTERREFINE: ("dense", "counterrefine"),
             TWO_HOP_ALIGNRAG: ("dense", "self-refine", "alignrag-cpo")}
# why the other methods are not run on a set, by (set, method) or by method (the tables show this
# instead of a hole)
NOT_RUN = {
    (TWO_HOP_ALIGNRAG, "counterrefine"): f"run on these questions with its own reader ({TWO_HOP_COUNTERREFINE})",
    **{(TWO_HOP_COUNTERREFINE, m): f"run on these questions with AlignRAG's reader ({TWO_HOP_ALIGNRAG})"
       for m in ("self-refine", "alignrag-cpo")},
    **dict.fromkeys(CORM_FAMILY[2:], "CoRM-RAG's reranker, run here on biased factual questions (sections 1-5)"),
    "bm25": "a baseline of CoRM-RAG's, run here on biased factual questions (sections 1-5)",
    "fva-rag+corm": "a composition run here on biased factual questions (section 6)",
    "counterrefine+corm": "a composition run here on biased factual questions (section 6)",
    "self-rag": "FVA-RAG's baseline, built for misconception questions",
    "crag": "FVA-RAG's baseline, built for misconception questions",
    "fva-rag": "built for misconception questions (TruthfulQA)",
    "counterrefine": "its validator accepts short answers only; misconception answers are sentences",
    "self-refine": "AlignRAG's baseline, run where AlignRAG runs: short-answer questions",
    "alignrag-cpo": "its critic learned from short-answer questions, not misconceptions",
}


def built_for(cfg: HeadToHeadConfig | None = None) -> pd.DataFrame:
    """The methods on the sets they were built for, read from their own pipelines' staged results
    (notebooks 05-07; run there if not staged yet), one row per (set, method, question):

    - ``misconceptions`` and ``misconceptions + debunking``: FVA-RAG, Self-RAG, CRAG and dense RAG
      (FVA-RAG's vanilla) on misconception questions (data/mini's at tiny, TruthfulQA beyond) over
      the corpus without and with debunking passages (FVA-RAG's caches A and B), by TruthfulQA's
      truth rule;
    - the two-hop questions both papers' runs answered (data/mini's at tiny, HotpotQA beyond;
      AlignRAG's sample is a subset of CounterRefine's), by normalised match, once per reader:
      CounterRefine beside its own draft (Baseline-RAG) as dense RAG, and Self-Refine and AlignRAG's
      CDA (CPO critic) beside AlignRAG's plain RAG as dense RAG. Both read the same corpus through
      the same retriever; each keeps its own knobs, prompts and passages."""
    cfg = settings(cfg)
    fva = cfg.config_for(FVAConfig)
    misconceptions = fva_sets(fva)[0]  # data/mini's at tiny, TruthfulQA beyond
    frames = [fva_pipeline.scored(fva, misconceptions, cache).assign(set=name)
              for name, cache in (("misconceptions", "A"), ("misconceptions + debunking", "B"))]
    refine = cfg.config_for(CounterRefineConfig)
    two_hop = next(s for s in counterrefine_sets(refine) if s.multihop)
    refined = counterrefine_pipeline.scored(refine, two_hop)
    aligned = alignrag_pipeline.scored(cfg.config_for(AlignRAGConfig))
    aligned = aligned[(aligned["dataset"] == two_hop.name)
                      & aligned["method"].isin(BUILT_FOR[TWO_HOP_ALIGNRAG])]
    shared = set(refined["question_id"]) & set(aligned["question_id"])
    frames += [part[part["question_id"].isin(shared)].assign(set=name)
               for part, name in ((refined, TWO_HOP_COUNTERREFINE), (aligned, TWO_HOP_ALIGNRAG))]
    rows = pd.concat(frames, ignore_index=True)
    keep = [method in BUILT_FOR[name] for method, name in zip(rows["method"], rows["set"])]
    return rows[keep].assign(paper=lambda t: t["method"].map(PAPERS)).reset_index(drop=True)
