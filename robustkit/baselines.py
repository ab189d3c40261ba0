"""Baselines every method is compared with: vanilla RAG and the rerankers.

``RerankedRAG`` is vanilla retrieve-then-read RAG with an optional reranker in between:
retrieve top-M, rerank, read the top C — a ``Method``. Every reranker shares one interface,
``score(queries, candidates, first_stage) -> one array per query``, so BM25 and dense (the
first stage's own order), a random order, a trained cross-encoder (relevance CE, PA-CE, the
CoRM critic) and LLM-rerank are interchangeable, and CoRM-RAG's Algorithm 1 is this class plus a threshold.
"""
from __future__ import annotations

import hashlib
import time
from typing import Protocol, Sequence

import numpy as np

from robustkit.config import check_knob
from robustkit.data.records import Corpus, Passage
from robustkit.llm import check_strings
from robustkit.methods import Answer, Query, check_queries, derived_identity, spread_latency
from robustkit.reader import READER_VERSION, answer_with_context
from robustkit.retrieval import Hit, split_per_query


class Reranker(Protocol):
    name: str
    llm_calls_per_candidate: int  # language-model calls it spends per candidate (LLM-rerank: 1)

    def score(self, queries: Sequence[str], candidates: Sequence[Sequence[Passage]],
              first_stage: Sequence[Sequence[float]]) -> list[np.ndarray]: ...

    def identity(self) -> dict:
        """What decides its scores, for the manifests of staged results."""
        ...

    def uncached(self) -> "Reranker":
        """The same reranker computing every score afresh (for timing real model calls)."""
        ...


class FirstStage:
    """Keep the retriever's own order and scores (the BM25 and dense baselines)."""

    llm_calls_per_candidate = 0

    def __init__(self, name: str):
        self.name = name

    def score(self, queries, candidates, first_stage):
        return [np.asarray(s, dtype=np.float32) for s in first_stage]

    def identity(self) -> dict:
        return {"reranker": self.name}

    def uncached(self) -> "FirstStage":
        return self  # nothing cached


class RandomOrder:
    """A uniformly random order of the candidates: the floor any claimed ranking must clear.

    Each query's order is drawn from a generator seeded by (seed, query text), so it does not
    depend on which other queries share the batch; its "confidence" is as random as its order.
    """

    name = "random"
    llm_calls_per_candidate = 0

    def __init__(self, seed: int):
        self.seed = seed

    def score(self, queries, candidates, first_stage):
        return [np.random.default_rng(self._entropy(q)).random(len(docs), dtype=np.float32)
                for q, docs in zip(queries, candidates)]

    def identity(self) -> dict:
        return {"reranker": self.name, "seed": self.seed}

    def uncached(self) -> "RandomOrder":
        return self  # nothing cached

    def _entropy(self, query: str) -> int:
        digest = hashlib.sha256(f"{self.seed}|{query}".encode()).digest()
        return int.from_bytes(digest[:8], "little")


class CrossEncoderReranker:
    """A trained cross-encoder scorer (``scorer.score(queries, passages)`` → σ(z) ∈ [0, 1])."""

    llm_calls_per_candidate = 0

    def __init__(self, name: str, scorer):
        self.name, self.scorer = name, scorer

    def score(self, queries, candidates, first_stage):
        flat_q = [q for q, docs in zip(queries, candidates) for _ in docs]
        flat_d = [d.content for docs in candidates for d in docs]
        return split_per_query(self.scorer.score(flat_q, flat_d), candidates)

    def identity(self) -> dict:
        return {"reranker": self.name, "cross-encoder": self.scorer.identity()}

    def uncached(self) -> "CrossEncoderReranker":
        return CrossEncoderReranker(self.name, self.scorer.uncached())


class LLMReranker:
    """LLM-rerank: the generator judges each candidate, scored by P("yes").

    The prompt asks for relevance *and* the ability to correct a misconception, as in CoRM-RAG's
    baseline. Pointwise yes/no scoring is one forward pass per candidate, the cheapest form; the
    paper's listwise prompt to a 14B model is beyond a 135M model.
    """

    name = "llm-rerank"
    llm_calls_per_candidate = 1

    PROMPT = ("Passage: {passage}\n\nQuestion: {question}\nDoes this passage answer the question "
              "correctly, even if the question assumes something false? Answer yes or no.")

    def __init__(self, generator, max_words: int = 80):
        self.generator, self.max_words = generator, max_words

    def score(self, queries, candidates, first_stage):
        prompts = [self.PROMPT.format(passage=" ".join(d.content.split()[:self.max_words]), question=q)
                   for q, docs in zip(queries, candidates) for d in docs]
        yes = [p[0] for p in self.generator.option_probabilities(prompts, desc="llm-rerank")]
        return split_per_query(np.array(yes, dtype=np.float32), candidates)

    def identity(self) -> dict:
        return {"reranker": self.name, "generator": self.generator.identity(), "max_words": self.max_words,
                "prompt": hashlib.sha256(self.PROMPT.encode()).hexdigest()[:12]}

    def uncached(self) -> "LLMReranker":
        return LLMReranker(self.generator.with_cache(False), self.max_words)


class RerankedRAG:
    """Retrieve top-M, rerank, answer from the top C: vanilla RAG when the reranker is the
    first stage itself. A ``Method``.

    Args:
        retriever: first stage, ``search(queries, m)``.
        reranker: a ``Reranker``.
        generator: a ``robustkit.llm.Generator`` (the reader).
        corpus: passage lookup.
        m: M, candidates per query; c: C, passages in the reader's context.
        name: the method's name in results (default: the reranker's).
    """

    def __init__(self, retriever, reranker: Reranker, generator, corpus: Corpus, *, m: int = 100,
                 c: int = 3, max_words: int = 80, name: str | None = None):
        check_knob("C (context size)", c, integer=True, low=1)
        check_knob("M (candidates)", m, integer=True, low=1)
        check_knob("max_words", max_words, integer=True, low=1)
        if m < c:
            raise ValueError(f"M ({m}) must be >= C ({c}): the context is chosen among the candidates")
        self.retriever, self.reranker, self.generator, self.corpus = retriever, reranker, generator, corpus
        self.m, self.c, self.max_words = m, c, max_words
        self.name = name or reranker.name

    def rank(self, queries: Sequence[str]) -> list[tuple[list[str], np.ndarray]]:
        """Retrieve top-M and rerank: (ids sorted best first, their scores) per query."""
        check_strings("queries", queries, 'e.g. rank(["who wrote hamlet"])')
        reranked = RerankedRetriever(self.retriever, self.reranker, m=self.m, corpus=self.corpus)
        return reranked.ranked(list(queries), self.m)

    def context(self, ids: Sequence[str], scores: np.ndarray) -> list[str]:
        """The passages the reader sees: the top C (CoRM's Algorithm 1 adds a threshold)."""
        return list(ids[:self.c])

    def identity(self) -> dict:
        """What decides its answers (``methods.evaluate`` stages results under it): every
        constructor argument (``methods.derived_identity``) and the reader's prompt."""
        return derived_identity(self, prompts={"reader": READER_VERSION})

    def answer(self, queries: Sequence[Query]) -> list[Answer]:
        queries = check_queries(queries)
        start = time.perf_counter()
        answers = []
        for query, (ids, scores) in zip(queries, self.rank([q.text for q in queries])):
            context = self.context(ids, scores)
            answers.append(Answer(
                query.id, query.question_id, self.name, ABSTAIN, not context,
                float(scores[0]) if len(scores) else 0.0, context, retrieval_calls=1,
                model_calls=self.reranker.llm_calls_per_candidate * len(ids) + bool(context),
                trace={"ranked_ids": ids, "scores": [float(s) for s in scores]}))
        reading = [a for a in answers if not a.abstained]  # an abstention skips generation
        texts = answer_with_context(self.generator, [q.text for q, a in zip(queries, answers) if not a.abstained],
                                    [[self.corpus[d] for d in a.passage_ids] for a in reading],
                                    max_words=self.max_words)
        for a, text in zip(reading, texts):
            a.text = text
        spread_latency(answers, start)
        return answers


class RerankedRetriever:
    """A retriever whose top k is the first stage's top M reordered by a reranker: any method
    that takes a retriever (FVA-RAG, CounterRefine …) can read, say, the CoRM critic's most
    robust evidence first. Hits carry the reranker's scores."""

    def __init__(self, base, reranker: Reranker, *, m: int, corpus: Corpus | None = None):
        check_knob("M (candidates)", m, integer=True, low=1)
        self.base, self.reranker, self.m = base, reranker, m
        self.corpus = corpus if corpus is not None else base.corpus  # passage lookup (default: the base's)
        self.name = f"{getattr(base, 'name', 'retriever')}+{reranker.name}"

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        check_knob("k", k, integer=True, low=1)
        if isinstance(queries, str):
            raise TypeError("queries must be a list of strings, not one string; wrap it in a list")
        queries = list(queries)
        if not queries:
            return []
        return [[Hit(doc, float(score), rank) for rank, (doc, score) in enumerate(zip(ids[:k], scores[:k]))]
                for ids, scores in self.ranked(queries, max(self.m, k))]

    def ranked(self, queries: list[str], m: int) -> list[tuple[list[str], np.ndarray]]:
        """The first stage's top ``m`` per query, reordered: (ids best first, their scores)."""
        hits = self.base.search(queries, m)
        candidates = [[self.corpus[h.doc_id] for h in row] for row in hits]
        scores = self.reranker.score(queries, candidates, [[h.score for h in row] for row in hits])
        ranked = []
        for docs, s in zip(candidates, scores):
            order = np.argsort(-s, kind="stable")
            ranked.append(([docs[i].id for i in order], s[order]))
        return ranked

    def identity(self) -> dict:
        return {"retriever": self.name, "base": self.base.identity(), "reranker": self.reranker.identity(),
                "m": self.m}


ABSTAIN = "Abstain: Insufficient reliable evidence"
