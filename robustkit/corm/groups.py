"""Listwise training groups for the Evidence Critic (CoRM-RAG §3.3), and the relevance CE's.

For each (training question i, perturbation k): one positive from the clean query's candidates
with s > 0, N negatives from the perturbed query's candidates with s = 0, every passage paired
with the *perturbed* query x̃ₖ (``soft_groups``: the same slots labelled by the soft utility). The relevance cross-encoder's groups mirror them one for one
with the clean query and "contains a gold alias" labels over the same candidates. Groups are split by question, never
by rewrite (``crossencoder.groups.split_groups``), so no rewrite of a validation question is
trained on.
"""
from __future__ import annotations

import random
from collections import defaultdict
from typing import Sequence



def build_groups(labels: Sequence[dict], perturbations: Sequence[dict], texts: dict[str, str], *,
                 n_negatives: int, seed: int = 0, k_prime: int | None = None,
                 drop_type: str | None = None) -> tuple[list[dict], dict]:
    """Listwise training groups exactly as CoRM-RAG builds them.

    For each (question i, perturbation k): one positive sampled from the *clean* pool with
    s > 0, and up to N negatives sampled from the candidates retrieved for x̃ₖ (the perturbed
    pool) with s = 0; the group is skipped when there is no positive. Every document is paired
    with the perturbed query x̃ₖ.

    Args:
        labels: teacher records (question_id, doc_id, in_clean_pool, perturbed_k, outcomes).
        perturbations: adversary records (question_id, k, type, text).
        texts: doc id → passage text shown to the critic.
        n_negatives: N.
        k_prime: use only the first K′ perturbations (1..K) and recompute s from them (Fig. 6);
            None: all K.
        drop_type: leave out one perturbation type, upsampling the rest to the same number of
            groups (Fig. 5).

    Returns (groups, stats) where stats counts skipped slots and groups short of N negatives.
    """
    if n_negatives < 1:
        raise ValueError(f"N (negatives per group) must be >= 1, got {n_negatives}")
    if not labels:
        raise ValueError("empty label pool: no teacher records to build groups from")
    k_all = max(len(r["outcomes"]) for r in labels)
    # None means all K; 0 is refused, not read as "all" (it would silently train on every rewrite)
    if k_prime is not None and (isinstance(k_prime, bool) or not isinstance(k_prime, int)
                                or not 1 <= k_prime <= k_all):
        raise ValueError(f"K' must be in 1..{k_all}, got k_prime={k_prime!r}: k_prime uses the first K' "
                         f"perturbations of the {k_all}; pass None for all of them")
    k_use = k_all if k_prime is None else k_prime
    rng = random.Random(seed)
    by_question = _by_question(labels)
    groups, stats = [], {"slots": 0, "skipped (no positive)": 0, "short of N negatives": 0}
    for p in perturbations:
        if p["k"] >= k_use:
            continue
        stats["slots"] += 1
        candidates = by_question.get(p["question_id"])
        if candidates is None:
            raise ValueError(f"perturbation of {p['question_id']!r} has no teacher labels")
        s = {r["doc_id"]: sum(r["outcomes"][:k_use]) / k_use for r in candidates}
        positives = [r["doc_id"] for r in candidates if r["in_clean_pool"] and s[r["doc_id"]] > 0]
        negatives = [r["doc_id"] for r in candidates if p["k"] in r["perturbed_k"] and s[r["doc_id"]] == 0]
        if not positives:
            stats["skipped (no positive)"] += 1
            continue
        positive = rng.choice(positives)
        chosen = rng.sample(negatives, min(n_negatives, len(negatives)))
        stats["short of N negatives"] += len(chosen) < n_negatives
        groups.append(_rewrite_group(p, [positive, *chosen], texts, s))
    if drop_type:
        groups = _drop_and_upsample(groups, drop_type, rng)
    return groups, stats


def soft_groups(labels: Sequence[dict], soft: Sequence[dict], perturbations: Sequence[dict],
                texts: dict[str, str], *, n_negatives: int, seed: int = 0) -> tuple[list[dict], dict]:
    """Groups labelled by the soft utility s_soft (``teacher.answer_likelihoods``), the kit's
    alternative to the 0/1 label: for each (question i, perturbation k), the clean-pool candidate
    with the highest s_soft is the positive and up to N of x̃ₖ's pool with a lower s_soft are
    the negatives, every label its s_soft. A slot is skipped only when no such negative exists,
    never for want of a 0/1 positive (the sparsity the soft label is meant to fix)."""
    if n_negatives < 1:
        raise ValueError(f"N (negatives per group) must be >= 1, got {n_negatives}")
    s_soft = soft_by_key(labels, soft)
    rng = random.Random(seed)
    by_question = _by_question(labels)
    groups, stats = [], {"slots": 0, "skipped (no negative)": 0, "short of N negatives": 0}
    for p in perturbations:
        stats["slots"] += 1
        candidates = by_question[p["question_id"]]
        clean = [r for r in candidates if r["in_clean_pool"]]
        if not clean:
            stats["skipped (no negative)"] += 1
            continue
        best = max(clean, key=lambda r: s_soft[r["key"]])
        negatives = [r["doc_id"] for r in candidates if p["k"] in r["perturbed_k"]
                     and s_soft[r["key"]] < s_soft[best["key"]]]
        if not negatives:
            stats["skipped (no negative)"] += 1
            continue
        chosen = rng.sample(negatives, min(n_negatives, len(negatives)))
        stats["short of N negatives"] += len(chosen) < n_negatives
        score = {r["doc_id"]: s_soft[r["key"]] for r in candidates}
        groups.append(_rewrite_group(p, [best["doc_id"], *chosen], texts, score))
    return groups, stats


def soft_by_key(labels: Sequence[dict], soft: Sequence[dict]) -> dict[str, float]:
    """s_soft by label key, checked to cover every label record (soft labels of other labels
    would otherwise pair silently with the wrong candidates)."""
    s_soft = {r["key"]: r["s_soft"] for r in soft}
    missing = next((r["key"] for r in labels if r["key"] not in s_soft), None)
    if missing is not None:
        raise ValueError(f"label record {missing!r} has no soft label: soft labels of other labels?")
    return s_soft


def relevance_groups(labels: Sequence[dict], critic_groups: Sequence[dict], questions: dict[str, str],
                     texts: dict[str, str], *, n_negatives: int, seed: int = 0) -> list[dict]:
    """Groups for the relevance cross-encoder: clean query, label = passage contains a gold alias.

    One group per critic group (the same question, a fresh draw of one gold-bearing positive
    and up to N other candidates), so both train on the same number of groups, hence the same
    optimiser steps, over the same questions and candidates. A critic group whose question has
    no gold-bearing candidate is replaced by a redrawn group of another question, keeping the
    count equal.
    """
    if n_negatives < 1:
        raise ValueError(f"N (negatives per group) must be >= 1, got {n_negatives}")
    rng = random.Random(seed)
    by_question = _by_question(labels)

    def draw(qid: str) -> dict:
        candidates = by_question[qid]
        relevant = [r["doc_id"] for r in candidates if r["has_gold"]]
        other = [r["doc_id"] for r in candidates if not r["has_gold"]]
        docs = [rng.choice(relevant), *rng.sample(other, min(n_negatives, len(other)))]
        return {"question_id": qid, "k": -1, "type": "clean", "query": questions[qid],
                "doc_ids": docs, "docs": [texts[d] for d in docs],
                "labels": [1.0] + [0.0] * (len(docs) - 1)}

    with_gold = {qid for qid, rs in by_question.items() if any(r["has_gold"] for r in rs)}
    mirrored = [g["question_id"] for g in critic_groups if g["question_id"] in with_gold]
    if not mirrored:
        return []
    fill = [rng.choice(mirrored) for _ in range(len(critic_groups) - len(mirrored))]
    return [draw(qid) for qid in mirrored + fill]


def _by_question(labels: Sequence[dict]) -> dict[str, list[dict]]:
    by_question = defaultdict(list)
    for record in labels:
        by_question[record["question_id"]].append(record)
    return by_question


def _rewrite_group(p: dict, docs: list[str], texts: dict[str, str], label: dict[str, float]) -> dict:
    """One group for perturbation ``p``: its rewrite as the query, ``docs`` labelled by ``label``."""
    return {"question_id": p["question_id"], "k": p["k"], "type": p["type"], "query": p["text"],
            "doc_ids": docs, "docs": [texts[d] for d in docs], "labels": [label[d] for d in docs]}


def _drop_and_upsample(groups: list[dict], drop_type: str, rng: random.Random) -> list[dict]:
    kept = [g for g in groups if g["type"] != drop_type]
    if len(kept) == len(groups):
        raise ValueError(f"no group has perturbation type {drop_type!r}")
    return kept + [rng.choice(kept) for _ in range(len(groups) - len(kept))]
