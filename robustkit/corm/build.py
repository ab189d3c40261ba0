"""CoRM-RAG's methods by name: its rerankers, the baselines it compares them with, and Algorithm 1.

    rag = build("corm", cfg)                    # the critic reranking the dense top M, forced generation
    rag = build("corm+abstain", cfg)            # Algorithm 1 with γ set on validation queries
    rag = build("dense", cfg, corpus=mine, retriever=dense_over_mine)

Every method reads the scale's corpus through its dense top M (BM25 retrieves its own) and answers
from the top C with the scale's reader; the trained critics are the scale's, whatever the corpus.
``robustkit.registry`` builds any method of the kit by id through this folder's ``build``.
"""
from __future__ import annotations

from robustkit import resources
from robustkit.baselines import CrossEncoderReranker, FirstStage, LLMReranker, RandomOrder, RerankedRAG
from robustkit.corm import train
from robustkit.corm.config import CormConfig
from robustkit.corm.method import PriorReranker, RiskAwareRAG
from robustkit.data.records import Corpus
from robustkit.retrieval import BM25Retriever, DenseRetriever, load_embedder

# the first stage alone, or the dense candidates reordered without a trained model
FIRST_STAGES = ("bm25", "dense", "random", "llm-rerank")
# plain reranked RAG with a cross-encoder: the relevance CE, PA-CE and the warm start they all share
RERANKERS = ("relevance-ce", "pa-ce", "warm-start")
IDS = (*FIRST_STAGES, *RERANKERS, "corm", "corm+abstain", "corm-prior",
       *(v for v in train.CRITIC_VARIANTS if v not in ("corm", "relevance-ce", "pa-ce")))


def build(name: str, cfg: CormConfig, *, corpus: Corpus | None = None, retriever=None, generator=None,
          m: int | None = None, gamma: float | None = None) -> RerankedRAG:
    """One of ``IDS`` over the scale's corpus, dense candidates and reader — or over ``corpus`` (a
    user's own), searched by ``retriever`` (default: dense retrieval over it with the scale's
    embedder), read by ``generator`` (default: the scale's reader).

    ``bm25`` and ``dense``: the first stage alone; ``random``: the dense candidates in a seeded
    random order; ``llm-rerank``: the reader judging each candidate; a critic variant of
    ``train.CRITIC_VARIANTS`` (trained on demand): that cross-encoder reranking — CoRM's
    variants through Algorithm 1 (``RiskAwareRAG``; ``gamma`` None is forced generation), the
    relevance CE, PA-CE and the kit's relevance warm start as plain reranked RAG;
    ``corm+abstain``: Algorithm 1 with γ answering ``cfg.abstain_coverage`` of the validation
    queries (``train.gamma_at_coverage``); ``corm-prior``: the critic on top of the dense
    scores (the kit's extension, ``corm.method``); ``corm-soft``: the critic distilled from the
    soft utility. ``m`` overrides M at inference (Fig. 6's sweep).
    """
    CormConfig.check_build(name, IDS, cfg)
    reader = generator or resources.generator_for(cfg.scale)
    corpus, dense, bm25 = _searched(cfg, corpus, retriever, name)
    common = dict(m=min(m or cfg.m_inference, len(corpus)), c=cfg.context_size,
                  max_words=cfg.scale.max_passage_words)
    if name in FIRST_STAGES:
        reranker = {"bm25": FirstStage(name), "dense": FirstStage(name), "random": RandomOrder(cfg.scale.seed),
                    "llm-rerank": LLMReranker(reader, cfg.scale.max_passage_words)}[name]
        return RerankedRAG(bm25 if name == "bm25" else dense, reranker, reader, corpus, **common)
    if name == "corm-prior":
        lam = train.prior_weight(cfg)[0]
        return RerankedRAG(dense, PriorReranker(name, train.critic_scorer(cfg, "corm"), lam), reader, corpus,
                           **common)
    if name == "corm+abstain":
        gamma = train.gamma_at_coverage(cfg) if gamma is None else gamma
        reranker = CrossEncoderReranker("corm", train.critic_scorer(cfg, "corm"))
        return RiskAwareRAG(dense, reranker, reader, corpus, gamma=gamma, name=name, **common)
    reranker = CrossEncoderReranker(name, train.critic_scorer(cfg, name))
    if name in RERANKERS:
        return RerankedRAG(dense, reranker, reader, corpus, **common)
    return RiskAwareRAG(dense, reranker, reader, corpus, gamma=gamma, **common)


def robust_retriever(cfg: CormConfig, base):
    """``base`` whose top k is its top M reordered by the CoRM critic (most robust evidence first):
    the retriever a composed method (FVA-RAG or CounterRefine over the critic) searches."""
    from robustkit.baselines import RerankedRetriever

    critic = CrossEncoderReranker("corm", train.critic_scorer(cfg, "corm"))
    return RerankedRetriever(base, critic, m=cfg.m_inference)


def _searched(cfg: CormConfig, corpus: Corpus | None, retriever, name: str):
    """(corpus, dense retriever, BM25 retriever) for ``build``: the scale's, or over ``corpus``."""
    if corpus is None:
        if retriever is not None:
            raise ValueError("a retriever needs the corpus it searches: pass corpus= too")
        return (resources.corpus_for(cfg.scale), resources.retriever_for(cfg.scale),
                resources.bm25_for(cfg.scale) if name == "bm25" else None)
    if retriever is None:
        retriever = DenseRetriever(corpus, load_embedder(cfg.scale))
    return corpus, retriever, BM25Retriever(corpus) if name == "bm25" else None
