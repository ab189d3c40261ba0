"""Listwise groups on cheap labels for the relevance cross-encoder, the split by question, and
the check of any groups before training.

A group is ``{question_id, query, doc_ids, docs, labels}``: one query over its candidates, one
label per candidate — here "the passage contains a gold alias", no model call. CoRM-RAG's
teacher groups (``corm.groups``) have the same shape, so one loop trains both.
"""
from __future__ import annotations

import math
import numbers
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


def check_groups(groups: Sequence[dict], what: str = "training group", *, by_question: bool = False) -> None:
    """Refuse groups the training loop cannot learn from or score, before any model loads or file
    is written: each group needs a ``query`` (text), ``docs`` (at least one passage) and one label
    in [0, 1] per passage (``labels``); ``by_question``: also the ``question_id`` that
    ``split_groups`` holds out whole questions by. Left through, such groups train without an
    error and report a validation NDCG@3 that means nothing. The ValueError names the group (its
    index and question_id), the field, the value and the fix.
    """
    if not groups:
        raise ValueError(f"no {what}s: there is nothing to train or validate on; check where the groups come from")
    for i, group in enumerate(groups):
        if not isinstance(group, dict):
            raise ValueError(f"{what} {i}: expected an object with query, docs and labels, "
                             f"got {type(group).__name__} {group!r:.80}")
        _check_group(group, f"{what} {i}" + (f" (question_id {group['question_id']!r})"
                                             if "question_id" in group else ""), by_question)
    if not any(x > 0 for group in groups for x in group["labels"]):
        raise ValueError(f"every label of every {what} is 0 ({len(groups)} of them): all-zero labels teach the model "
                         "nothing (and NDCG and MRR need a useful passage to rank); give each query's useful "
                         "passages a label above 0, or check how the labels were computed")


def _check_group(group: dict, where: str, by_question: bool) -> None:
    fields = ("question_id", "query", "docs", "labels") if by_question else ("query", "docs", "labels")
    missing = [field for field in fields if field not in group]
    if missing == ["question_id"]:
        raise ValueError(f"{where}: no 'question_id': the split into training and validation holds out "
                         "whole questions by it; add it to every group, or give validation groups of your own")
    if missing:
        raise ValueError(f"{where}: no field(s) {missing}; a group is {{query, docs, labels}}: "
                         "a query, its candidate passages and one label per passage")
    query, docs, labels = group["query"], group["docs"], group["labels"]
    if not isinstance(query, str) or not query.strip():
        raise ValueError(f"{where}: 'query' must be non-empty text, got {query!r:.80}")
    if not isinstance(docs, (list, tuple)):  # a string would be read as one passage per character
        raise ValueError(f"{where}: 'docs' must be a list of passages, got {type(docs).__name__} {docs!r:.80}")
    if not docs:
        raise ValueError(f"{where}: 'docs' is empty: a group ranks at least one passage; drop the group "
                         "or give it its candidates")
    bad = next((j for j, doc in enumerate(docs) if not isinstance(doc, str)), None)
    if bad is not None:
        raise ValueError(f"{where}: docs[{bad}] must be a passage's text, got {docs[bad]!r:.80}")
    if not isinstance(labels, (list, tuple)) or len(labels) != len(docs):
        raise ValueError(f"{where}: {len(docs)} docs but 'labels' is {labels!r:.80}: give one label per "
                         "passage, in the same order")
    for j, x in enumerate(labels):
        if not isinstance(x, numbers.Real) or not math.isfinite(x):
            raise ValueError(f"{where}: labels[{j}] = {x!r} is not a finite number; label the passage "
                             "again, or drop the group")
        if not 0 <= x <= 1:
            raise ValueError(f"{where}: labels[{j}] = {x!r} is outside [0, 1]; a label is a passage's "
                             "usefulness (the teacher's s, a gold alias' 0/1): rescale the labels into [0, 1]")
