"""Listwise groups on cheap labels for the relevance cross-encoder, and the split by question.

A group is ``{question_id, query, doc_ids, docs, labels}``: one query over its candidates, one
label per candidate — here "the passage contains a gold alias", no model call. CoRM-RAG's
teacher groups (``corm.groups``) have the same shape, so one loop trains both.
"""
from __future__ import annotations

import random
from typing import Sequence

from robustkit.data.records import contains_answer


def alias_groups(questions: Sequence[dict], candidates: Sequence[Sequence[str]],
                 texts: dict[str, str], *, n_negatives: int, seed: int = 0) -> tuple[list[dict], dict]:
    """Relevance groups on cheap labels: the question, label = passage contains a gold alias.

    One group per question whose candidates (its dense top-M, best first) hold a gold-bearing
    passage: that passage (the best-ranked one, the hardest to tell apart) and up to N of the
    candidates without the answer, shuffled so no position gives the label away.

    Args:
        questions: ``{"id", "text", "answers"}`` per question, aligned with ``candidates``.
        candidates: doc ids per question.
        texts: doc id → passage text (the "contains" check reads the same text the model sees).

    Returns (groups, stats) where stats counts questions without a gold-bearing candidate.
    """
    if n_negatives < 1:
        raise ValueError(f"N (negatives per group) must be >= 1, got {n_negatives}")
    if len(questions) != len(candidates):
        raise ValueError(f"{len(questions)} questions but {len(candidates)} candidate lists")
    rng = random.Random(seed)
    groups, stats = [], {"questions": len(questions), "skipped (no gold candidate)": 0,
                         "skipped (no negative)": 0}
    for question, ids in zip(questions, candidates):
        gold = [d for d in ids if contains_answer(texts[d], question["answers"])]
        other = [d for d in ids if d not in gold]
        if not gold or not other:
            stats["skipped (no gold candidate)" if not gold else "skipped (no negative)"] += 1
            continue
        docs = [gold[0], *rng.sample(other, min(n_negatives, len(other)))]
        rng.shuffle(docs)
        groups.append({"question_id": question["id"], "k": -1, "type": "clean",
                       "query": question["text"], "doc_ids": docs, "docs": [texts[d] for d in docs],
                       "labels": [float(d == gold[0]) for d in docs]})
    if not groups:
        raise ValueError(f"no relevance group: none of {len(questions)} questions has a "
                         "gold-bearing candidate and a negative")
    return groups, stats


def split_groups(groups: Sequence[dict], val_fraction: float = 0.15, seed: int = 0):
    """Hold out whole questions (never a question's other perturbations) for validation."""
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction!r}")
    qids = sorted({g["question_id"] for g in groups})
    random.Random(seed).shuffle(qids)
    if len(qids) < 2:
        raise ValueError(f"splitting needs groups of at least 2 questions, got {len(qids)}")
    held = set(qids[:max(1, round(val_fraction * len(qids)))])
    return ([g for g in groups if g["question_id"] not in held],
            [g for g in groups if g["question_id"] in held])
