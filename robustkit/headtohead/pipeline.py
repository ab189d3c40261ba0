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
from robustkit import resources
from robustkit.adaptive import CRAG, SelfRAG, calibrate_thresholds
from robustkit.alignrag import config as alignrag_config
from robustkit.alignrag import pipeline as alignrag_pipeline
from robustkit.alignrag.method import SELF, AlignRAG
from robustkit.alignrag.train import critic_generator
from robustkit.baselines import CrossEncoderReranker, RerankedRetriever
from robustkit.config import runs_dir
from robustkit.corm import experiments as corm_experiments
from robustkit.corm import pipeline as corm_pipeline
from robustkit.corm.config import settings as corm_settings
from robustkit.counterrefine import pipeline as counterrefine_pipeline
from robustkit.counterrefine.config import settings as counterrefine_settings
from robustkit.counterrefine.method import CounterRefine
from robustkit.fva import pipeline as fva_pipeline
from robustkit.fva.config import settings as fva_settings
from robustkit.fva.method import FVARAG
from robustkit.headtohead.config import HeadToHeadConfig, settings
from robustkit.retrieval import DenseRetriever, load_embedder

REFERENCE = "dense"  # every paired test compares with vanilla dense RAG
# CoRM-RAG's rerankers and the baselines it compares them with: each reranks the scale's dense top M
CORM_FAMILY = ("bm25", "dense", "random", "relevance-ce", "pa-ce", "llm-rerank", "corm", "corm+abstain")
# where each method comes from (the tables' "paper" column)
PAPERS = {"bm25": "baseline", "dense": "baseline", "random": "baseline", "relevance-ce": "baseline",
          "pa-ce": "CoRM-RAG (baseline)", "llm-rerank": "CoRM-RAG (baseline)", "corm": "CoRM-RAG",
          "corm+abstain": "CoRM-RAG", "self-rag": "FVA-RAG (baseline)", "crag": "FVA-RAG (baseline)",
          "fva-rag": "FVA-RAG", "counterrefine": "CounterRefine", "self-refine": "AlignRAG (baseline)",
          "alignrag": "AlignRAG", "fva-rag+corm": "composed (kit)", "counterrefine+corm": "composed (kit)"}
LABELS = {**corm_experiments.METHOD_LABELS, "corm": "CoRM critic (forced)",
          "corm+abstain": "CoRM critic + abstention", "self-rag": "Self-RAG", "crag": "CRAG",
          "fva-rag": "FVA-RAG", "counterrefine": "CounterRefine", "self-refine": "Self-Refine",
          "alignrag": "AlignRAG (CDA, CPO critic)", "fva-rag+corm": "FVA-RAG over the CoRM critic",
          "counterrefine+corm": "CounterRefine over the CoRM critic"}


def run_dir(cfg: HeadToHeadConfig | None = None) -> Path:
    path = runs_dir(settings(cfg).scale) / "headtohead"
    path.mkdir(parents=True, exist_ok=True)
    return path


def queries(cfg: HeadToHeadConfig | None = None) -> pd.DataFrame:
    """CoRM's test queries of ``cfg.n_questions`` test questions (a seeded sample; all when 0):
    one row per query with ``condition`` (clean/biased), ``type`` (clean or the bias type) and the
    gold ``answers``."""
    cfg = settings(cfg)
    table = corm_experiments.test_queries(corm_settings(cfg.scale))
    chosen = resources.sample(sorted(table["question_id"].unique()), cfg.n_questions, cfg.scale.seed)
    return table[table["question_id"].isin(set(chosen))].reset_index(drop=True)


def system(cfg: HeadToHeadConfig | None, name: str, *, retriever=None, corpus=None):
    """The method ``name`` (one of ``config.METHODS``) over the scale's corpus, dense retriever
    and reader, with its own notebook's knobs; trained parts reused when staged, trained if not.
    ``corpus`` (a user's own) replaces the scale's, searched by ``retriever`` (needed for the
    methods outside CoRM-RAG's, which builds dense retrieval over it by default); trained parts
    stay the scale's."""
    cfg = settings(cfg)
    scale = cfg.scale
    if retriever is not None and corpus is None:
        raise ValueError("a retriever needs the corpus it searches: pass corpus= too")
    if corpus is not None and retriever is None and name not in CORM_FAMILY:
        raise ValueError(f"{name!r} over another corpus needs its retriever: pass retriever= too")
    if name in CORM_FAMILY:
        corm, over = corm_settings(scale), dict(corpus=corpus, retriever=retriever)
        if name == "corm+abstain":  # Algorithm 1 with γ set on validation queries, never on test ones
            return corm_experiments.method(corm, "corm", gamma=corm_experiments.gamma_at_coverage(corm, cfg.coverage),
                                           **over)
        return corm_experiments.method(corm, name, **over)
    generator = resources.generator_for(scale)
    dense, corpus = (retriever, corpus) if corpus is not None else (resources.retriever_for(scale),
                                                                    resources.corpus_for(scale))
    if name.endswith("+corm"):  # composed: robust evidence first (the critic reranks dense's top M), then the method
        corm = corm_settings(scale)
        critic = CrossEncoderReranker("corm", corm_pipeline.critic_scorer(corm, "corm"))
        dense, name = RerankedRetriever(dense, critic, m=corm.m_inference), name.removesuffix("+corm")
    if name in ("self-rag", "crag", "fva-rag"):
        fva = fva_settings(scale)
        words = fva.max_words or None
        if name == "self-rag":
            return SelfRAG(dense, generator, corpus, k=fva.k, max_words=words)
        if name == "crag":  # thresholds from training questions, as FVA-RAG's runs set them
            grader = fva_pipeline.crag_evaluator(fva)
            lower, upper = calibrate_thresholds(dense, corpus, [q.text for q in resources.train_questions(scale)],
                                                fva.k, evaluator=grader)
            return CRAG(dense, generator, corpus, upper=upper, lower=lower, evaluator=grader, k=fva.k,
                        max_words=words)
        return FVARAG(dense, generator, corpus, fva_pipeline.adjudicator(fva), k=fva.k, m=fva.m_kill_queries,
                      tau=fva.tau, max_words=words, draft_tokens=fva.draft_tokens, kill_tokens=fva.kill_tokens,
                      revision_tokens=fva.revision_tokens)
    if name == "counterrefine":  # the REVISE threshold notebook 06 calibrated on short-answer training questions
        refine = counterrefine_settings(scale)
        short = next(s for s in counterrefine_pipeline.eval_sets(refine) if not s.multihop)
        threshold = counterrefine_pipeline.calibrate(refine, short)["revise_above"]
        return CounterRefine(dense, generator, corpus, k=refine.k, max_snippets=refine.max_snippets,
                             decoding=refine.decoding, revise_above=threshold, max_words=refine.max_words or None,
                             draft_tokens=refine.draft_tokens, refine_tokens=refine.refine_tokens, name=name)
    if name in ("self-refine", "alignrag"):  # AlignRAG's CDA uses its CPO-trained critic
        align = alignrag_config.settings(scale)
        critic = SELF if name == "self-refine" else critic_generator(align, "cpo")
        return AlignRAG(dense, generator, corpus, critic=critic, iterations=align.iterations, k=align.k,
                        max_words=align.max_words or scale.max_passage_words, rationale_tokens=align.rationale_tokens,
                        answer_tokens=align.answer_tokens, critique_tokens=align.critique_tokens, name=name)
    raise ValueError(f"unknown method {name!r}; expected one of {list(cfg.methods)}")


def run(cfg: HeadToHeadConfig | None = None, asked: pd.DataFrame | None = None, *, corpus=None,
        retriever=None) -> pd.DataFrame:
    """Every method of ``cfg.methods`` on ``queries(cfg)`` — or on ``asked``, any queries table
    (``corm.experiments.queries_for`` builds one from a user's questions and rewrites, any number
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
             TWO_HOP_ALIGNRAG: ("dense", "self-refine", "alignrag")}
# why the other methods are not run on a set, by (set, method) or by method (the tables show this
# instead of a hole)
NOT_RUN = {
    (TWO_HOP_ALIGNRAG, "counterrefine"): f"run on these questions with its own reader ({TWO_HOP_COUNTERREFINE})",
    **{(TWO_HOP_COUNTERREFINE, m): f"run on these questions with AlignRAG's reader ({TWO_HOP_ALIGNRAG})"
       for m in ("self-refine", "alignrag")},
    **dict.fromkeys(CORM_FAMILY[2:], "CoRM-RAG's reranker, run here on biased factual questions (sections 1-5)"),
    "bm25": "a baseline of CoRM-RAG's, run here on biased factual questions (sections 1-5)",
    "fva-rag+corm": "a composition run here on biased factual questions (section 6)",
    "counterrefine+corm": "a composition run here on biased factual questions (section 6)",
    "self-rag": "FVA-RAG's baseline, built for misconception questions",
    "crag": "FVA-RAG's baseline, built for misconception questions",
    "fva-rag": "built for misconception questions (TruthfulQA)",
    "counterrefine": "its validator accepts short answers only; misconception answers are sentences",
    "self-refine": "AlignRAG's baseline, run where AlignRAG runs: short-answer questions",
    "alignrag": "its critic learned from short-answer questions, not misconceptions",
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
    fva = fva_settings(cfg.scale)
    misconceptions = fva_pipeline.eval_sets(fva)[0]  # data/mini's at tiny, TruthfulQA beyond
    judge, grader = fva_pipeline.adjudicator(fva), fva_pipeline.crag_evaluator(fva)
    frames = [fva_pipeline.scored(fva, misconceptions, cache, judge, grader).assign(set=name)
              for name, cache in (("misconceptions", "A"), ("misconceptions + debunking", "B"))]
    refine = counterrefine_settings(cfg.scale)
    two_hop = next(s for s in counterrefine_pipeline.eval_sets(refine) if s.multihop)
    refined = counterrefine_pipeline.scored(refine, two_hop)
    aligned = alignrag_pipeline.scored(alignrag_config.settings(cfg.scale))
    aligned = aligned[(aligned["dataset"] == two_hop.name)
                      & aligned["method"].isin([alignrag_pipeline.VANILLA, "self-refine", "alignrag (cpo)"])]
    aligned = aligned.assign(method=aligned["method"].replace({"alignrag (cpo)": "alignrag",
                                                               alignrag_pipeline.VANILLA: "dense"}))
    shared = set(refined["question_id"]) & set(aligned["question_id"])
    frames += [part[part["question_id"].isin(shared)].assign(set=name)
               for part, name in ((refined, TWO_HOP_COUNTERREFINE), (aligned, TWO_HOP_ALIGNRAG))]
    rows = pd.concat(frames, ignore_index=True)
    rows["method"] = rows["method"].replace({"vanilla": "dense", counterrefine_pipeline.BASELINE: "dense"})
    keep = [method in BUILT_FOR[name] for method, name in zip(rows["method"], rows["set"])]
    return rows[keep].assign(paper=lambda t: t["method"].map(PAPERS)).reset_index(drop=True)
