"""The relevance–robustness gap: biased rewrites pull similarity retrieval toward
premise-matching evidence, and the reader follows it (notebook 00; the problem all four methods
address). ``python -m robustkit gap`` prints it for data/mini.
"""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from robustkit.data.records import Corpus, Question, Rewrite
from robustkit.metrics import cluster_bootstrap_ci, recall_at_k, substring_match
from robustkit.reader import answer_with_context

RATES = ("premise@1", "gold@1", "correct")  # the rates the gap figure draws


def relevance_robustness_gap(corpus: Corpus, questions: Sequence[Question],
                             rewrites: Sequence[Rewrite], retriever, generator=None, *,
                             k: int = 5, context_size: int = 3) -> pd.DataFrame:
    """How biased rewrites pull similarity retrieval toward premise-matching evidence.

    For every question and each of its rewrites, retrieve top-``k`` for the clean question and
    for the rewrite and record whether a premise-matching passage (the rewrite's
    ``premise_ids``) is at rank 1 / within top-k, whether gold is; and, with a generator,
    whether the answer from the top-``context_size`` passages is correct.

    Returns one row per (question, rewrite type, condition ∈ {clean, biased}), with the
    retriever's ``name`` (``bm25``, ``dense`` …) so a figure can set it beside the paper's.
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
                "retriever": getattr(retriever, "name", type(retriever).__name__),
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


def gap_rates(table: pd.DataFrame, rates: Sequence[str] = RATES, *, paper: pd.DataFrame | None = None,
              n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Each rate per perturbation type and condition with its 95% CI, and the paper's comparable
    value: the table ``plots.plot_gap`` draws and saves.

    The question is the unit: CIs are percentile bootstraps resampling questions
    (``metrics.cluster_bootstrap_ci``). With ``paper`` (a published table with ``key``,
    ``method`` and ``biased accuracy`` in %, such as ``corm.paper.TABLE1``: Biased-NQ, all bias
    types pooled) the paper's row of the same retriever follows as a rate; a retriever the paper
    does not run gets none.

    Args:
        table: ``relevance_robustness_gap``'s output.
        rates: the rate columns to summarise (those missing, e.g. ``correct`` without a
            generator, are skipped).

    Returns:
        One row per (type, condition, metric) — ``rate``, ``CI low``, ``CI high``, ``n``
        (questions), ``retriever``, ``paper method`` (empty), ``source`` = ``kit`` — then the
        paper's row (``type`` = ``all (Biased-NQ)``, ``condition`` = ``biased``, ``metric`` =
        ``correct``, no CI, ``source`` = ``paper``).
    """
    missing = [c for c in ("question_id", "type", "condition") if c not in table.columns]
    if missing:
        raise ValueError(f"gap_rates needs column(s) {missing}; the table has {list(table.columns)}")
    metrics = [m for m in rates if m in table.columns]
    if table.empty or not metrics:
        raise ValueError(f"gap_rates got no rows or none of the rates {list(rates)}; "
                         f"the table has {list(table.columns)}")
    retrievers = table["retriever"].unique() if "retriever" in table.columns else [None]
    if len(retrievers) > 1:
        raise ValueError(f"gap_rates got several retrievers {sorted(retrievers)}; summarise one at a time")
    rows = []
    for metric in metrics:
        for (kind, condition), part in table.groupby(["type", "condition"], sort=True):
            low, high = cluster_bootstrap_ci(part[metric], part["question_id"], n_resamples, seed=seed)
            rows.append({"type": kind, "condition": condition, "metric": metric,
                         "rate": float(part[metric].mean()), "CI low": low, "CI high": high,
                         "n": part["question_id"].nunique(), "retriever": retrievers[0],
                         "paper method": None, "source": "kit"})
    if "correct" in metrics and paper is not None:
        rows += _paper_rows(retrievers[0], paper)
    return pd.DataFrame(rows).astype({"n": "Int64"})


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


def _paper_rows(retriever: str | None, paper: pd.DataFrame) -> list[dict]:
    """The paper's biased accuracy of ``retriever`` as a rate (none when the paper does not run
    it). Its reader and data differ from the kit's: a level to set beside, not to match."""
    published = paper[paper["key"] == retriever] if retriever else paper.iloc[:0]
    return [{"type": "all (Biased-NQ)", "condition": "biased", "metric": "correct",
             "rate": row["biased accuracy"] / 100, "CI low": None, "CI high": None, "n": None,
             "retriever": retriever, "paper method": row["method"], "source": "paper"}
            for _, row in published.iterrows()]
