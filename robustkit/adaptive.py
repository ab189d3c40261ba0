"""Adaptive-retrieval baselines: Self-RAG and CRAG as control flows over any generator.

Both papers fine-tune their own models (Self-RAG emits reflection tokens; CRAG trains a T5
retrieval evaluator). The kit keeps their *control flow* and swaps the trained parts for what it
has, said plainly here and in notebook 05:

- ``SelfRAG``: retrieve k → [IsRelevant] per passage → one answer per relevant passage →
  [IsSupported] per answer → keep the answer with the best critique score. The reflection
  decisions are the generator's P("yes") to a yes/no question (a 135M model cannot be trusted to
  emit the tokens itself).
- ``CRAG``: retrieve k → a retrieval evaluator scores each passage → *correct* (the best passage
  clears ``upper``: keep the passages above ``lower``), *incorrect* (none clears ``lower``: discard
  them, rewrite the query, retrieve again from the same frozen corpus — CRAG's web search has no
  offline counterpart) or *ambiguous* (both) → read. CRAG trains a T5 evaluator; the kit's
  stand-in is any scorer with ``score(queries, passages)`` — FVA-RAG's runs pass the kit's
  relevance cross-encoder (``crossencoder.relevance_scorer``) — and without one the dense
  retriever's own question–passage cosine, with thresholds set on training questions
  (``calibrate_thresholds``), never on evaluated ones.

Both stay within the budget every FVA-RAG comparison uses: at most two retrieval calls of k.
"""
from __future__ import annotations

import hashlib
import time
from typing import Sequence

import numpy as np

from robustkit.config import check_knob
from robustkit.data.records import Corpus, Passage
from robustkit.methods import Answer, Query, check_queries, derived_identity, spread_latency
from robustkit.reader import READER_VERSION, answer_with_context
from robustkit.retrieval import split_per_query, top_passages

IS_RELEVANT = ("Passage: {passage}\n\nQuestion: {question}\nIs this passage relevant to the "
               "question? Answer yes or no.")
IS_SUPPORTED = ("Passage: {passage}\n\nQuestion: {question}\nAnswer: {answer}\nIs the answer "
                "fully supported by the passage? Answer yes or no.")
CLOSED_BOOK = "Answer in at most 10 words: {question}"
REWRITE = ("Rewrite this question as a short web search query that would find a reliable answer.\n"
           "Question: {question}\nQuery:")
# names the prompts in artifact manifests: an edited prompt never reuses old answers
PROMPT_VERSION = hashlib.sha256("\x00".join((IS_RELEVANT, IS_SUPPORTED, CLOSED_BOOK, REWRITE)).encode()).hexdigest()[:12]


class SelfRAG:
    """Self-RAG's retrieve → critique → generate → critique → choose loop, prompted — a ``Method``."""

    name = "self-rag"

    def __init__(self, retriever, generator, corpus: Corpus, *, k: int = 3,
                 relevance_threshold: float = 0.5, max_words: int | None = None, answer_tokens: int = 24):
        check_knob("k", k, integer=True, low=1)
        check_knob("relevance_threshold", relevance_threshold, low=0, high=1)
        check_knob("answer_tokens", answer_tokens, integer=True, low=1)
        self.retriever, self.generator, self.corpus = retriever, generator, corpus
        self.k, self.relevance_threshold, self.answer_tokens = k, relevance_threshold, answer_tokens
        self.max_words = max_words or generator.scale.max_passage_words

    def answer(self, queries: Sequence[Query]) -> list[Answer]:
        queries = check_queries(queries)
        start = time.perf_counter()
        texts = [q.text for q in queries]
        docs = top_passages(self.retriever, self.corpus, texts, self.k)
        relevance = self._yes([IS_RELEVANT.format(passage=self._clip(d), question=q)
                               for q, row in zip(texts, docs) for d in row], "IsRelevant")
        relevance = split_per_query(relevance, docs)
        kept = [[j for j, p in enumerate(rel) if p >= self.relevance_threshold] for rel in relevance]
        pairs = [(i, j) for i, js in enumerate(kept) for j in js]
        candidates = answer_with_context(self.generator, [texts[i] for i, _ in pairs],
                                         [[docs[i][j]] for i, j in pairs], max_words=self.max_words,
                                         max_new_tokens=self.answer_tokens, desc="Self-RAG answers")
        support = self._yes([IS_SUPPORTED.format(passage=self._clip(docs[i][j]), question=texts[i], answer=a)
                             for (i, j), a in zip(pairs, candidates)], "IsSupported")
        closed = [i for i, js in enumerate(kept) if not js]  # no relevant passage: answer without one
        closed_answers = dict(zip(closed, self.generator.generate(
            [CLOSED_BOOK.format(question=texts[i]) for i in closed], max_new_tokens=self.answer_tokens,
            desc="Self-RAG closed-book")))
        by_query: dict[int, list] = {}
        for (i, j), a, s in zip(pairs, candidates, support):
            by_query.setdefault(i, []).append((float(relevance[i][j] + s), j, a, float(s)))
        answers = []
        for i, query in enumerate(queries):
            options = by_query.get(i, [])
            if options:
                score, j, text, sup = max(options, key=lambda o: o[0])  # first best on ties
                used, trace = [docs[i][j].id], {"selfrag_path": "retrieve", "is_supported": sup}
            else:
                score, text, used, trace = 0.0, closed_answers[i], [], {"selfrag_path": "no relevant passage"}
            answers.append(Answer(
                query.id, query.question_id, self.name, text, confidence=score / 2, passage_ids=used,
                retrieval_calls=1, model_calls=len(docs[i]) + 2 * len(options) + (not options),
                trace={**trace, "is_relevant": [float(p) for p in relevance[i]],
                       "candidates": [o[2] for o in options]}))
        spread_latency(answers, start)
        return answers

    def identity(self) -> dict:
        """What decides its answers (``methods.evaluate`` stages results under it): every
        constructor argument (``methods.derived_identity``) and its prompts."""
        return derived_identity(self, prompts={"reader": READER_VERSION, "adaptive": PROMPT_VERSION})

    def _yes(self, prompts: list[str], desc: str) -> np.ndarray:
        probs = self.generator.option_probabilities(prompts, desc=desc) if prompts else []
        return np.array([p[0] for p in probs], dtype=np.float32)

    def _clip(self, passage: Passage) -> str:
        return " ".join(passage.content.split()[:self.max_words])


class CRAG:
    """Corrective RAG: grade the retrieval, then use it, replace it, or combine — a ``Method``."""

    name = "crag"

    def __init__(self, retriever, generator, corpus: Corpus, *, upper: float, lower: float,
                 evaluator=None, k: int = 3, max_words: int | None = None, answer_tokens: int = 24):
        check_knob("k", k, integer=True, low=1)
        check_knob("upper", upper)
        check_knob("lower", lower)
        if not lower <= upper:
            raise ValueError(f"CRAG needs lower <= upper, got lower={lower}, upper={upper}")
        self.retriever, self.generator, self.corpus, self.evaluator = retriever, generator, corpus, evaluator
        self.k, self.upper, self.lower, self.answer_tokens = k, upper, lower, answer_tokens
        self.max_words = max_words or generator.scale.max_passage_words

    def answer(self, queries: Sequence[Query]) -> list[Answer]:
        queries = check_queries(queries)
        start = time.perf_counter()
        texts = [q.text for q in queries]
        docs, scores = graded_retrieval(self.retriever, self.corpus, texts, self.k, self.evaluator)
        actions = [self.action(s) for s in scores]
        redo = [i for i, a in enumerate(actions) if a != "correct"]
        rewrites = self.generator.generate([REWRITE.format(question=texts[i]) for i in redo],
                                           max_new_tokens=24, desc="CRAG rewrites") if redo else []
        rewrites = [r or texts[i] for i, r in zip(redo, rewrites)]  # an empty rewrite searches q itself
        second = dict(zip(redo, top_passages(self.retriever, self.corpus, rewrites, self.k) if redo else []))
        contexts = []
        for i, action in enumerate(actions):
            kept = [d for d, s in zip(docs[i], scores[i]) if s >= self.lower] if action != "incorrect" else []
            if action == "correct":
                kept = kept or docs[i][:1]
            extra = [d for d in second.get(i, []) if d.id not in {p.id for p in kept}]
            contexts.append((kept + extra)[:self.k])
        texts_out = answer_with_context(self.generator, texts, contexts, max_words=self.max_words,
                                        max_new_tokens=self.answer_tokens, desc="CRAG answers")
        rewrite_of = dict(zip(redo, rewrites))
        answers = [Answer(q.id, q.question_id, self.name, text, confidence=float(s.max()) if len(s) else 0.0,
                          passage_ids=[d.id for d in ctx], retrieval_calls=1 + (i in second),
                          model_calls=1 + (i in second),
                          trace={"crag_action": actions[i], "evaluator_scores": [float(x) for x in s],
                                 "rewrite": rewrite_of.get(i)})
                   for i, (q, text, ctx, s) in enumerate(zip(queries, texts_out, contexts, scores))]
        spread_latency(answers, start)
        return answers

    def identity(self) -> dict:
        """What decides its answers: every constructor argument (``methods.derived_identity``) —
        the evaluator (a stored cross-encoder, or None for the dense cosine) and the thresholds it
        was calibrated to among them — and its prompts."""
        return derived_identity(self, prompts={"reader": READER_VERSION, "adaptive": PROMPT_VERSION})

    def action(self, scores: np.ndarray) -> str:
        best = float(scores.max()) if len(scores) else float("-inf")
        return "correct" if best >= self.upper else ("incorrect" if best < self.lower else "ambiguous")


def calibrate_thresholds(retriever, corpus: Corpus, questions: Sequence[str], k: int = 3,
                         quantiles: tuple[float, float] = (1 / 3, 2 / 3),
                         evaluator=None) -> tuple[float, float]:
    """CRAG's (lower, upper) as quantiles of the best evaluator score over ``questions`` — pass
    training questions: thresholds set on evaluated ones would tune the baseline on its test."""
    if len(questions) < 2:
        raise ValueError(f"calibrating CRAG's thresholds needs >= 2 questions, got {len(questions)}")
    low, high = quantiles
    if not 0 <= low <= high <= 1:
        raise ValueError(f"quantiles must satisfy 0 <= low <= high <= 1, got {quantiles}")
    _, scores = graded_retrieval(retriever, corpus, list(questions), k, evaluator)
    best = [s.max() for s in scores]
    return float(np.quantile(best, low)), float(np.quantile(best, high))


def graded_retrieval(retriever, corpus: Corpus, texts: Sequence[str], k: int,
                     evaluator=None) -> tuple[list[list[Passage]], list[np.ndarray]]:
    """One retrieval call and a relevance grade per passage: the evaluator's
    ``score(queries, passages)``, or without one the retriever's own scores."""
    hits = retriever.search(list(texts), k)
    docs = [[corpus[h.doc_id] for h in row] for row in hits]
    if evaluator is None:
        return docs, [np.array([h.score for h in row], dtype=np.float32) for row in hits]
    flat = evaluator.score([q for q, row in zip(texts, docs) for _ in row], [d.content for row in docs for d in row])
    return docs, split_per_query(np.asarray(flat, dtype=np.float32), docs)
