"""CoRM-RAG's claims broken down by passage kind (notebooks 02-04): gold, premise-matching or
distractor, relative to one question.

- **gold**: one of the question's gold passages, or any passage holding a gold alias (the rule
  Recall@k and the warm start use);
- **premise-matching**: written to match a biased rewrite's false premise or wrong belief —
  known only where the data says so (``data/mini``'s rewrites list their ``premise_ids``; NQ-open
  has no such list, so there every non-gold passage is a distractor);
- **distractor**: everything else.
"""
from __future__ import annotations

from typing import Callable, Sequence

import pandas as pd

from robustkit import resources
from robustkit.corm.build import build
from robustkit.corm.config import CormSettings, settings
from robustkit.corm.groups import soft_by_key
from robustkit.corm.pipeline import test_queries
from robustkit.data import mini_rewrites
from robustkit.data.records import has_answer
from robustkit.metrics import separation_auc

KINDS = ("gold", "premise-matching", "distractor")


def passage_kinds(cfg: CormSettings = None) -> Callable[[str, str], str]:
    """``kind_of(question_id, doc_id)`` over the scale's training and test questions."""
    cfg = settings(cfg)
    corpus = resources.corpus_for(cfg.scale)
    questions = {q.id: q for q in [*resources.train_questions(cfg.scale),
                                   *resources.test_questions(cfg.scale)]}
    premise: dict[str, set[str]] = {}
    if cfg.scale.dataset == "mini":
        for rewrite in mini_rewrites():
            premise.setdefault(rewrite.question_id, set()).update(rewrite.premise_ids)

    def kind_of(question_id: str, doc_id: str) -> str:
        if question_id not in questions:
            raise KeyError(f"question {question_id!r} is not a {cfg.scale.name} training or test question")
        question = questions[question_id]
        if doc_id in question.gold_ids or has_answer(corpus[doc_id], question.answers):
            return "gold"
        return "premise-matching" if doc_id in premise.get(question_id, ()) else "distractor"

    return kind_of


def labels_by_kind(cfg: CormSettings, labels: Sequence[dict],
                   soft: Sequence[dict] | None = None) -> pd.DataFrame:
    """The teacher's utility s per passage kind: how many candidates, their mean s, and the share
    the teacher calls useful under at least one rewrite (s > 0) and under all (s = 1); with
    ``soft`` (``train.soft_labels``, aligned with ``labels``), the mean and median s_soft."""
    kind_of = passage_kinds(cfg)
    frame = pd.DataFrame({"kind": [kind_of(r["question_id"], r["doc_id"]) for r in labels],
                          "s": [r["s"] for r in labels]})
    aggregates = {"candidates": ("s", "count"), "mean s": ("s", "mean"),
                  "share s > 0": ("s", lambda s: (s > 0).mean()),
                  "share s = 1": ("s", lambda s: (s == 1).mean())}
    if soft is not None:
        frame["s_soft"] = _aligned_soft(labels, soft)
        aggregates |= {"mean s_soft": ("s_soft", "mean"), "median s_soft": ("s_soft", "median")}
    table = frame.groupby("kind").agg(**aggregates)
    return table.reindex([k for k in KINDS if k in table.index]).round(3)


def label_separation(cfg: CormSettings, labels: Sequence[dict], soft: Sequence[dict]) -> pd.DataFrame:
    """How well each label tells gold passages from the rest, one row per label (s, s_soft):
    AUC gold vs non-gold (ties count half, the Mann-Whitney U), the questions whose
    highest-labelled candidate is gold (ties: the share of gold among the tied), and the
    questions that give the critic any positive (a candidate with label > 0)."""
    kind_of = passage_kinds(cfg)
    frame = pd.DataFrame({"question_id": [r["question_id"] for r in labels],
                          "gold": [kind_of(r["question_id"], r["doc_id"]) == "gold" for r in labels],
                          "s": [r["s"] for r in labels], "s_soft": _aligned_soft(labels, soft)})
    rows = []
    for label in ("s", "s_soft"):
        gold, other = frame.loc[frame["gold"], label], frame.loc[~frame["gold"], label]
        auc = separation_auc(gold, other)
        top = frame[frame[label] == frame.groupby("question_id")[label].transform("max")]
        rows.append({"label": label, "AUC gold vs other": round(auc, 3),
                     "gold ranked first (questions)": round(top.groupby("question_id")["gold"].mean().sum(), 1),
                     "questions with a positive": int(frame[frame[label] > 0]["question_id"].nunique()),
                     "questions": int(frame["question_id"].nunique()), "candidates": len(frame)})
    return pd.DataFrame(rows).set_index("label")


def _aligned_soft(labels: Sequence[dict], soft: Sequence[dict]) -> list[float]:
    by_key = soft_by_key(labels, soft)
    return [by_key[r["key"]] for r in labels]


def top1_by_kind(kind_of: Callable[[str, str], str], ranked: pd.DataFrame) -> pd.DataFrame:
    """Share of queries whose top-ranked passage is of each kind, per method (rows), with n.

    ``ranked`` has one row per (method, query): ``method``, ``question_id``, ``ranked_ids``."""
    kinds = pd.DataFrame({"method": ranked["method"].to_numpy(),
                          "kind": [kind_of(q, ids[0]) for q, ids in zip(ranked["question_id"], ranked["ranked_ids"])]})
    shares = pd.crosstab(kinds["method"], kinds["kind"], normalize="index")
    shares = shares.reindex(columns=list(KINDS), fill_value=0.0).mul(100).round(1)
    shares.columns = [f"{k} at rank 1 (%)" for k in shares.columns]
    order = list(dict.fromkeys(ranked["method"]))
    return shares.loc[order].assign(n=kinds.groupby("method").size().loc[order])


def rank_test_queries(cfg: CormSettings, names: Sequence[str], condition: str = "biased") -> pd.DataFrame:
    """Each named method's ranking of the test queries (no reading): method, question_id,
    query, ranked_ids — what ``top1_by_kind`` takes."""
    queries = test_queries(cfg)
    queries = queries[queries["condition"] == condition]
    frames = []
    for name in names:
        ranked = build(name, cfg).rank(list(queries["query"]))
        frames.append(pd.DataFrame({"method": name, "question_id": queries["question_id"].to_numpy(),
                                    "query": queries["query"].to_numpy(),
                                    "ranked_ids": [ids for ids, _ in ranked]}))
    return pd.concat(frames, ignore_index=True)


