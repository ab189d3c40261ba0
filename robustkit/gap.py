"""The relevance–robustness gap: biased rewrites pull similarity retrieval toward
premise-matching evidence, and the reader follows it (notebook 00; the problem all four methods
address). ``python -m robustkit gap`` prints it for data/mini.
"""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from robustkit.data.records import Corpus, Question, Rewrite
from robustkit.metrics import recall_at_k, substring_match
from robustkit.reader import answer_with_context


def relevance_robustness_gap(corpus: Corpus, questions: Sequence[Question],
                             rewrites: Sequence[Rewrite], retriever, generator=None, *,
                             k: int = 5, context_size: int = 3) -> pd.DataFrame:
    """How biased rewrites pull similarity retrieval toward premise-matching evidence.

    For every question and each of its rewrites, retrieve top-``k`` for the clean question and
    for the rewrite and record whether a premise-matching passage (the rewrite's
    ``premise_ids``) is at rank 1 / within top-k, whether gold is; and, with a generator,
    whether the answer from the top-``context_size`` passages is correct.

    Returns one row per (question, rewrite type, condition ∈ {clean, biased}).
    """
    by_id = {q.id: q for q in questions}
    pairs = [(by_id[r.question_id], r) for r in rewrites if r.question_id in by_id]
    if not pairs:
        raise ValueError("no rewrite belongs to the given questions")
    queries = [text for q, r in pairs for text in (q.text, r.text)]
    hits = retriever.search(queries, max(k, context_size))
    rows = []
    for i, (question, rewrite) in enumerate(pairs):
        for condition, ranked in (("clean", hits[2 * i]), ("biased", hits[2 * i + 1])):
            ids = [h.doc_id for h in ranked]
            rows.append({
                "question_id": question.id, "type": rewrite.type, "condition": condition,
                "query": question.text if condition == "clean" else rewrite.text,
                "premise@1": recall_at_k(ids, rewrite.premise_ids, 1),
                f"premise@{k}": recall_at_k(ids, rewrite.premise_ids, k),
                "gold@1": recall_at_k(ids, question.gold_ids, 1),
                f"gold@{k}": recall_at_k(ids, question.gold_ids, k),
                "context_ids": ids[:context_size], "answers": question.answers,
            })
    table = pd.DataFrame(rows)
    if generator is not None:
        contexts = [[corpus[d] for d in ids] for ids in table["context_ids"]]
        table["prediction"] = answer_with_context(generator, list(table["query"]), contexts,
                                                  desc="answering")
        table["correct"] = [substring_match(p, a) for p, a in zip(table["prediction"],
                                                                     table["answers"])]
    return table.drop(columns=["answers"])


def compare_retrievers(retrievers: dict, questions: Sequence[Question], corpus: Corpus,
                       k: int = 3) -> pd.DataFrame:
    """Top-k titles per question for each retriever, and whether gold is at rank 1."""
    rows = []
    for name, retriever in retrievers.items():
        for question, hits in zip(questions, retriever.search([q.text for q in questions], k)):
            rows.append({"question": question.text[:45], "retriever": name,
                         f"top-{k}": " | ".join(corpus[h.doc_id].title for h in hits),
                         "gold@1": hits[0].doc_id in question.gold_ids})
    return pd.DataFrame(rows)


def summarize_gap(table: pd.DataFrame) -> pd.DataFrame:
    """Mean of every rate per perturbation type and condition (clean vs biased)."""
    metrics = [c for c in table.columns if "@" in c or c == "correct"]
    return table.groupby(["type", "condition"])[metrics].mean().unstack("condition").round(3)


def gap_examples(table: pd.DataFrame, rewrite_type: str = "false_premise") -> pd.DataFrame:
    """Questions answered correctly when clean and wrongly when biased, with a premise passage
    at rank 1 for the biased query: the relevance–robustness gap in single cases."""
    wide = table[table["type"] == rewrite_type].pivot(index="question_id", columns="condition")
    hit = ((wide[("correct", "clean")] == 1) & (wide[("correct", "biased")] == 0)
           & (wide[("premise@1", "biased")] == 1))
    picked = wide[hit]
    return pd.DataFrame({"clean query": picked[("query", "clean")],
                         "clean answer": picked[("prediction", "clean")],
                         "biased query": picked[("query", "biased")],
                         "biased top-1": picked[("context_ids", "biased")].str[0],
                         "biased answer": picked[("prediction", "biased")]})
