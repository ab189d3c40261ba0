"""Risk-aware RAG (CoRM-RAG §3.4, Algorithm 1): rerank by the Evidence Critic, abstain when no
candidate is safe.

    candidates ← Retrieve(x, M)
    S ← Critic(x, candidates); sort candidates by S, descending
    if S[0] < γ: return "Abstain: Insufficient reliable evidence", confidence S[0]
    context ← [dᵢ : S[i] ≥ γ][:C]
    return Generate(x, context), confidence S[0]

γ = None is forced generation (the top C candidates, whatever their scores): Table 1's setting,
where Algorithm 1 is exactly ``baselines.RerankedRAG`` with the critic as reranker.
"""
from __future__ import annotations

from typing import Sequence

from robustkit.baselines import RerankedRAG
from robustkit.config import check_knob


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
