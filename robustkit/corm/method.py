"""CoRM-RAG's methods: Algorithm 1 (risk-aware RAG with abstention) and the kit's retrieval prior.

Risk-aware RAG (CoRM-RAG §3.4, Algorithm 1): rerank by the Evidence Critic, abstain when no
candidate is safe.

    candidates ← Retrieve(x, M)
    S ← Critic(x, candidates); sort candidates by S, descending
    if S[0] < γ: return "Abstain: Insufficient reliable evidence", confidence S[0]
    context ← [dᵢ : S[i] ≥ γ][:C]
    return Generate(x, context), confidence S[0]

γ = None is forced generation (the top C candidates, whatever their scores): Table 1's setting,
where Algorithm 1 is exactly ``baselines.RerankedRAG`` with the critic as reranker.

The kit's extension, a retrieval prior: the paper reranks by the critic alone. A critic distilled
from tens of groups on a CPU can lose what the first stage knows (from the bare bi-encoder init
it ranked far below the dense retriever it reranks), so the kit also shows the interpolation

    score(x, d) = (1 − λ) · zscore(logit S(x, d)) + λ · zscore(dense(x, d))

with both standardised over the query's M candidates (their scales differ), λ = 0 being the
pure critic and λ = 1 the dense order. λ is read off held-out *training* questions (the critic's
validation split, biased queries), never a test question; it is shown beside the pure critic,
never instead of it.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from robustkit.baselines import CrossEncoderReranker, RerankedRAG
from robustkit.config import check_knob

LAMBDAS = tuple(round(0.1 * i, 1) for i in range(11))


class RiskAwareRAG(RerankedRAG):
    """Algorithm 1 over any retriever, reranker and generator, batched over queries — a ``Method``.

    Args:
        gamma: the safety threshold γ on the reranker's scores (σ(z) ∈ [0, 1] for the critic);
            None answers every query (forced generation).
        Other arguments as ``RerankedRAG`` (the critic is the reranker for CoRM-RAG).
    """

    def __init__(self, retriever, reranker, generator, corpus, *, gamma: float | None = None, **kwargs):
        if gamma is not None:  # checked first: nothing is built for a bad threshold
            check_knob("gamma (None for forced generation)", gamma, low=0, high=1)
        super().__init__(retriever, reranker, generator, corpus, **kwargs)
        self.gamma = gamma

    def context(self, ids, scores):
        return select_context(ids, scores, self.gamma, self.c)


def select_context(ranked_ids: Sequence[str], scores: Sequence[float], gamma: float | None,
                   c: int) -> list[str]:
    """Algorithm 1's context: candidates with S ≥ γ, best first, at most C; empty = abstain."""
    if gamma is None:
        return list(ranked_ids[:c])
    return [d for d, s in zip(ranked_ids, scores) if s >= gamma][:c]


# --- the kit's retrieval prior ------------------------------------------------------------------

def _zscore(values: np.ndarray) -> np.ndarray:
    spread = values.std()
    return (values - values.mean()) / spread if spread > 0 else np.zeros_like(values)


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p.astype(np.float64), 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def interpolate(critic: np.ndarray, first_stage: np.ndarray, lam: float) -> np.ndarray:
    """One query's combined scores from the critic's σ(z) and the first stage's scores."""
    return ((1 - lam) * _zscore(_logit(np.asarray(critic)))
            + lam * _zscore(np.asarray(first_stage, dtype=np.float64))).astype(np.float32)


class PriorReranker:
    """A cross-encoder scorer's logits interpolated with the first stage's scores (a ``Reranker``).

    Its scores are standardised, not probabilities, so it ranks (Table 1, Recall@k) but does not
    abstain: Algorithm 1's γ is defined on σ(z).
    """

    llm_calls_per_candidate = 0

    def __init__(self, name: str, scorer, lam: float):
        check_knob("prior weight λ", lam, low=0, high=1)
        self.name, self.lam = name, lam
        self.critic = CrossEncoderReranker(name, scorer)

    def score(self, queries, candidates, first_stage):
        critic = self.critic.score(queries, candidates, first_stage)
        return [interpolate(c, f, self.lam) for c, f in zip(critic, first_stage)]

    def identity(self) -> dict:
        return {**self.critic.identity(), "prior weight": self.lam}

    def uncached(self) -> "PriorReranker":
        return PriorReranker(self.name, self.critic.scorer.uncached(), self.lam)


def choose_lambda(critic: Sequence[np.ndarray], first_stage: Sequence[np.ndarray],
                  relevant: Sequence[Sequence[bool]], lambdas: Sequence[float] = LAMBDAS
                  ) -> tuple[float, list[dict]]:
    """λ with the highest mean reciprocal rank of the first relevant candidate, over queries that
    have one; ties go to the λ nearest 0.5 (neither score preferred without evidence).

    Returns (λ, one row per λ: mrr, n queries)."""
    from robustkit.metrics import mrr

    usable = [i for i, rel in enumerate(relevant) if any(rel)]
    if not usable:
        raise ValueError("no query with a relevant candidate to choose the prior weight λ on")
    rows = []
    for lam in lambdas:
        check_knob("prior weight λ", lam, low=0, high=1)
        ranks = [mrr(interpolate(critic[i], first_stage[i], lam), np.asarray(relevant[i], float))
                 for i in usable]
        rows.append({"lambda": lam, "mrr": float(np.mean(ranks)), "n": len(usable)})
    best = max(rows, key=lambda r: (round(r["mrr"], 9), -abs(r["lambda"] - 0.5)))
    return best["lambda"], rows
