"""Risk-aware RAG (CoRM-RAG §3.4, Algorithm 1) and the rerankers it is compared with.

    candidates ← Retrieve(x, M)
    S ← Critic(x, candidates); sort candidates by S, descending
    if S[0] < γ: return "Abstain: Insufficient reliable evidence", confidence S[0]
    context ← [dᵢ : S[i] ≥ γ][:C]
    return Generate(x, context), confidence S[0]

γ = None is forced generation (the top C candidates, whatever their scores): Table 1's setting.
Every reranker shares one interface, ``score(queries, candidates) -> one array per query``, so
BM25, dense, the relevance cross-encoder, PA-CE, LLM-rerank and the critic are interchangeable.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

import numpy as np

from robustkit.data.records import Corpus, Passage
from robustkit.rag import answer_with_context

ABSTAIN = "Abstain: Insufficient reliable evidence"


class Reranker(Protocol):
    name: str

    def score(self, queries: Sequence[str], candidates: Sequence[Sequence[Passage]],
              first_stage: Sequence[Sequence[float]]) -> list[np.ndarray]: ...


class FirstStage:
    """Keep the retriever's own order and scores (the BM25 and dense baselines)."""

    def __init__(self, name: str):
        self.name = name

    def score(self, queries, candidates, first_stage):
        return [np.asarray(s, dtype=np.float32) for s in first_stage]


class CrossEncoderReranker:
    """A trained cross-encoder (the Evidence Critic, PA-CE or the relevance CE): σ(z) ∈ [0, 1]."""

    def __init__(self, name: str, scorer):
        self.name, self.scorer = name, scorer

    def score(self, queries, candidates, first_stage):
        flat_q = [q for q, docs in zip(queries, candidates) for _ in docs]
        flat_d = [d.content for docs in candidates for d in docs]
        return _per_query(self.scorer.score(flat_q, flat_d), candidates)


class LLMReranker:
    """LLM-rerank: the generator judges each candidate, scored by P("yes").

    The prompt asks for relevance *and* the ability to correct a misconception, as in the paper's
    baseline. Pointwise yes/no scoring is one forward pass per candidate, the cheapest form; the
    paper's listwise prompt to a 14B model is beyond a 135M model.
    """

    name = "llm-rerank"

    def __init__(self, generator, max_words: int = 80):
        self.generator, self.max_words = generator, max_words

    def score(self, queries, candidates, first_stage):
        prompts = [f"Passage: {' '.join(d.content.split()[:self.max_words])}\n\nQuestion: {q}\n"
                   "Does this passage answer the question correctly, even if the question assumes "
                   "something false? Answer yes or no."
                   for q, docs in zip(queries, candidates) for d in docs]
        yes = [p[0] for p in self.generator.option_probabilities(prompts, desc="llm-rerank")]
        return _per_query(np.array(yes, dtype=np.float32), candidates)


@dataclass
class RAGResult:
    query: str
    answer: str
    abstained: bool
    confidence: float  # S[0], the best candidate's score
    context_ids: list[str] = field(default_factory=list)
    ranked_ids: list[str] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)


class RiskAwareRAG:
    """Algorithm 1 over any retriever, reranker and generator, batched over queries.

    Args:
        retriever: first stage, ``search(queries, m)``.
        reranker: a ``Reranker``; the critic for CoRM-RAG.
        generator: a ``robustkit.llm.Generator`` (the reader).
        corpus: passage lookup.
        m: M, candidates per query; c: C, the most passages in the context.
    """

    def __init__(self, retriever, reranker: Reranker, generator, corpus: Corpus, *, m: int = 100,
                 c: int = 3, max_words: int = 80):
        if c < 1:
            raise ValueError(f"C (context size) must be >= 1, got {c}")
        if m < c:
            raise ValueError(f"M ({m}) must be >= C ({c}): the context is chosen among the candidates")
        self.retriever, self.reranker, self.generator, self.corpus = retriever, reranker, generator, corpus
        self.m, self.c, self.max_words = m, c, max_words

    def rank(self, queries: Sequence[str]) -> list[tuple[list[str], np.ndarray]]:
        """Retrieve top-M and rerank: (ids sorted best first, their scores) per query."""
        hits = self.retriever.search(list(queries), self.m)
        candidates = [[self.corpus[h.doc_id] for h in row] for row in hits]
        scores = self.reranker.score(queries, candidates, [[h.score for h in row] for row in hits])
        ranked = []
        for docs, s in zip(candidates, scores):
            order = np.argsort(-s, kind="stable")
            ranked.append(([docs[i].id for i in order], s[order]))
        return ranked

    def __call__(self, queries: Sequence[str], gamma: float | None = None) -> list[RAGResult]:
        """Answer, or abstain when no candidate's score reaches γ (None: always answer)."""
        if gamma is not None and not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1] (or None for forced generation), got {gamma}")
        results = []
        for query, (ids, scores) in zip(queries, self.rank(queries)):
            confidence = float(scores[0]) if len(scores) else 0.0
            context = select_context(ids, scores, gamma, self.c)
            results.append(RAGResult(query, ABSTAIN, not context, confidence, context, ids,
                                     [float(s) for s in scores]))
        answering = [r for r in results if not r.abstained]  # abstentions skip generation
        answers = answer_with_context(self.generator, [r.query for r in answering],
                                      [[self.corpus[d] for d in r.context_ids] for r in answering],
                                      max_words=self.max_words)
        for result, answer in zip(answering, answers):
            result.answer = answer
        return results


def select_context(ranked_ids: Sequence[str], scores: Sequence[float], gamma: float | None,
                   c: int) -> list[str]:
    """Algorithm 1's context: candidates with S ≥ γ, best first, at most C; empty = abstain."""
    if gamma is None:
        return list(ranked_ids[:c])
    return [d for d, s in zip(ranked_ids, scores) if s >= gamma][:c]


def _per_query(flat: np.ndarray, candidates: Sequence[Sequence[Passage]]) -> list[np.ndarray]:
    """Split scores of the flattened (query, candidate) pairs back into one array per query."""
    return np.split(flat, np.cumsum([len(docs) for docs in candidates])[:-1])
