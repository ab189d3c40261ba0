"""Metrics: answer scoring, retrieval recall, selective prediction and paired significance.

Answer metrics follow the SQuAD / NQ-open evaluation (normalised exact match and token F1,
best over gold aliases). Selective prediction follows Geifman & El-Yaniv: sweep a confidence
threshold, plot accuracy on the answered subset against coverage, and summarise by AURC.
"""
from __future__ import annotations

from collections import Counter
from typing import Iterable, Sequence

import numpy as np

from robustkit.data.records import contains_answer, normalize_answer


def exact_match(prediction: str, answers: Iterable[str]) -> float:
    """1.0 when the normalised prediction equals a normalised gold answer."""
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(a) for a in answers))


def token_f1(prediction: str, answers: Iterable[str]) -> float:
    """Best token-overlap F1 between the prediction and any gold answer."""
    pred = normalize_answer(prediction).split()
    best = 0.0
    for answer in answers:
        gold = normalize_answer(answer).split()
        common = sum((Counter(pred) & Counter(gold)).values())
        if common:
            precision, recall = common / len(pred), common / len(gold)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


def substring_match(prediction: str, answers: Iterable[str]) -> float:
    """1.0 when a normalised gold answer occurs (as whole words) in the prediction.

    The usual accuracy for chatty generators that wrap the answer in a sentence.
    """
    return float(contains_answer(prediction, answers))


def recall_at_k(ranked_ids: Sequence[str], relevant: Iterable[str], k: int) -> float:
    """1.0 when any relevant id is among the first ``k`` ranked ids."""
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    relevant = set(relevant)
    return float(any(doc in relevant for doc in ranked_ids[:k]))


def first_relevant_rank(ranked_ids: Sequence[str], relevant: Iterable[str]) -> int | None:
    """1-based rank of the first relevant id, or None when none is ranked."""
    relevant = set(relevant)
    return next((i + 1 for i, doc in enumerate(ranked_ids) if doc in relevant), None)


def ndcg_at_k(scores: Sequence[float], gains: Sequence[float], k: int) -> float:
    """NDCG@k with linear gains: Σ_{i<k} g_(i) / log2(i + 2), over the ideal ordering's value."""
    scores, gains = _paired(scores, gains)
    discounts = 1.0 / np.log2(np.arange(2, min(k, len(gains)) + 2))
    ranked = gains[np.argsort(-scores, kind="stable")][:k]
    ideal = np.sort(gains)[::-1][:k]
    best = float(ideal @ discounts[:len(ideal)])
    return float(ranked @ discounts[:len(ranked)]) / best if best > 0 else 0.0


def mrr(scores: Sequence[float], gains: Sequence[float]) -> float:
    """Reciprocal rank of the first item with positive gain, ranked by score (0 when none)."""
    scores, gains = _paired(scores, gains)
    ranked = gains[np.argsort(-scores, kind="stable")]
    hits = np.flatnonzero(ranked > 0)
    return 1.0 / (hits[0] + 1) if len(hits) else 0.0


def risk_coverage(confidence: Sequence[float], correct: Sequence[float]) -> dict[str, np.ndarray]:
    """Selective accuracy at every coverage obtained by answering the most confident first.

    Returns arrays ``coverage`` (k/n), ``accuracy`` (mean correctness of the top-k) and
    ``threshold`` (the k-th highest confidence, i.e. the γ that yields that coverage).
    """
    conf, corr = _paired(confidence, correct)
    order = np.argsort(-conf, kind="stable")
    n = len(conf)
    answered = np.arange(1, n + 1)
    return {"coverage": answered / n, "accuracy": np.cumsum(corr[order]) / answered,
            "threshold": conf[order]}


def aurc(confidence: Sequence[float], correct: Sequence[float]) -> float:
    """Area under the risk–coverage curve: mean selective risk over all coverages (lower = better)."""
    curve = risk_coverage(confidence, correct)
    return float(np.mean(1.0 - curve["accuracy"]))


def accuracy_at_coverage(confidence: Sequence[float], correct: Sequence[float],
                         coverage: float) -> float:
    """Selective accuracy when answering the ``coverage`` fraction with highest confidence."""
    if not 0 < coverage <= 1:
        raise ValueError(f"coverage must be in (0, 1], got {coverage}")
    curve = risk_coverage(confidence, correct)
    k = max(1, int(round(coverage * len(curve["coverage"]))))
    return float(curve["accuracy"][k - 1])


def expected_calibration_error(confidence: Sequence[float], correct: Sequence[float],
                               n_bins: int = 10) -> float:
    """ECE = Σ_b (|B_b| / n) · |acc(B_b) − conf(B_b)| over equal-width confidence bins."""
    conf, corr = _paired(confidence, correct)
    if conf.min() < 0 or conf.max() > 1:
        raise ValueError("ECE needs confidences in [0, 1]")
    bins = np.minimum((conf * n_bins).astype(int), n_bins - 1)
    ece = 0.0
    for b in np.unique(bins):
        mask = bins == b
        ece += mask.mean() * abs(corr[mask].mean() - conf[mask].mean())
    return float(ece)


def mcnemar(correct_a: Sequence[float], correct_b: Sequence[float]) -> dict[str, float]:
    """Exact McNemar test on paired correctness (statsmodels); b/c are the discordant counts."""
    from statsmodels.stats.contingency_tables import mcnemar as _mcnemar

    a, b = _paired(correct_a, correct_b)
    a, b = a.astype(bool), b.astype(bool)
    table = [[int(np.sum(a & b)), int(np.sum(a & ~b))], [int(np.sum(~a & b)), int(np.sum(~a & ~b))]]
    result = _mcnemar(table, exact=True)
    return {"a_only": table[0][1], "b_only": table[1][0], "p_value": float(result.pvalue)}


def format_p(p: float, relation: bool = False) -> str:
    """A p-value for a table ("0.0312", or "< 1e-4" below that — never "0"); with ``relation``,
    for a sentence ("= 0.0312" / "< 1e-4")."""
    if p < 1e-4:
        return "< 1e-4"
    return f"= {p:.3g}" if relation else f"{p:.3g}"


def bootstrap_ci(values: Sequence[float], n_resamples: int = 2000, confidence: float = 0.95,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean (scipy)."""
    from scipy.stats import bootstrap

    values = np.asarray(values, dtype=float)
    if len(values) < 2 or np.all(values == values[0]):
        return float(values.mean()), float(values.mean())
    result = bootstrap((values,), np.mean, n_resamples=n_resamples, confidence_level=confidence,
                       method="percentile", random_state=seed)
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def _paired(a: Sequence[float], b: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"expected two 1-D sequences of equal length, got {a.shape} and {b.shape}")
    if len(a) == 0:
        raise ValueError("expected at least one item, got none")
    return a, b
