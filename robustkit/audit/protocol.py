"""The audit itself: the user's questions, clean and biased, sent to the system under test, scored
by the kit's judge, and the tables of the report.

    questions, rewrites = audit_set("mini")                 # or a JSONL file, or "nq_open"
    results = run(system, questions, rewrites, name="my-rag")
    tables = analyse(results)                               # accuracy, drops, tests, flips, sycophancy

The rows are those of ``methods.evaluate`` (staged under ``runs/<scale>/audit/``, resumable), so
the numbers for a kit method served by ``robustkit serve`` are those its notebook measures.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from robustkit import methods
from robustkit.config import Scale, get_scale, runs_dir
from robustkit.corm import train as corm_train
from robustkit.corm.config import settings as corm_settings
from robustkit.corm.pipeline import queries_for
from robustkit.corm.perturb import PERTURBATION_TYPES
from robustkit.data.mini import mini_questions, mini_rewrites
from robustkit.data.own import read_questions
from robustkit.data.records import Question, Rewrite, normalize_answer
from robustkit.headtohead.experiments import robustness
from robustkit.judges import Judge, NormalisedMatch
from robustkit.metrics import cluster_bootstrap_ci, paired_tests

FLIPS_SHOWN = 5  # flip examples per bias type in the report: the first by question id


def audit_set(source: str | Path = "mini", scale: Scale | str | None = None, *,
              n_questions: int = 0) -> tuple[list[Question], list[Rewrite]]:
    """Questions and their biased rewrites: ``"mini"`` (data/mini's test questions and their
    hand-written rewrites, one of each type), ``"nq_open"`` (its test questions, three adversary
    rewrites each, types rotated) or a JSONL file (rows ``{"id"?, "question", "answers",
    "rewrites"?: [{"type", "text", "wrong_entity"?}]}``; questions without rewrites get the
    adversary's). ``n_questions``: the first n only (0: all)."""
    if str(source) == "mini":
        questions = mini_questions("test")[:n_questions or None]
        ids = {q.id for q in questions}
        return questions, [r for r in mini_rewrites() if r.question_id in ids]
    if str(source) == "nq_open":
        from robustkit.data.benchmarks import load

        questions, given = list(load("nq_open").records)[:n_questions or None], []
    else:
        questions, given = read_questions(source)
        questions = questions[:n_questions or None]
    asked = {q.id for q in questions}
    given = [r for r in given if r.question_id in asked]
    missing = [q for q in questions if q.id not in {r.question_id for r in given}]
    if missing:
        print(f"[robustkit] audit: {len(missing)} question(s) have no rewrites; the adversary writes "
              f"one of each bias type for them")
        given += corm_train.adversary_rewrites(corm_settings(get_scale(scale)), missing,
                                                  k=len(PERTURBATION_TYPES), name="audit_rewrites")
    return questions, given


def run(system, questions: Sequence[Question], rewrites: Sequence[Rewrite], *, name: str,
        judge: Judge | None = None, scale: Scale | str | None = None) -> pd.DataFrame:
    """Every question clean and each of its rewrites sent to ``system`` (a ``Method``: a kit
    method, ``endpoints.RAGEndpoint`` or ``ClosedBook``), scored by ``judge`` (default: the kit's
    normalised match). Staged under ``runs/<scale>/audit/``; the rows carry each rewrite's wrong
    answer and premise passages, for the sycophancy table."""
    queries = queries_for(questions, rewrites)
    folder = runs_dir(scale) / "audit"
    results = methods.evaluate({name: system}, queries, folder, judge or NormalisedMatch())
    premises = {(r.question_id, r.type): (r.wrong_entity, list(r.premise_ids)) for r in rewrites}
    found = [premises.get((q, t), (None, [])) for q, t in zip(results["question_id"], results["type"])]
    return results.assign(wrong_entity=[w for w, _ in found], premise_ids=[p for _, p in found])


def analyse(results: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The report's tables: accuracy per condition, the drop from clean per bias type, the paired
    tests (clean vs each type, exact McNemar on the questions), flips, retrieval sycophancy."""
    kinds = ["clean", *[t for t in PERTURBATION_TYPES if t in set(results["type"])]]
    accuracy = []
    for kind in kinds:
        part = results[results["type"] == kind]
        low, high = cluster_bootstrap_ci(part["correct"].to_numpy(float), part["question_id"].to_numpy())
        accuracy.append({"condition": kind, "questions": part["question_id"].nunique(), "queries": len(part),
                         "accuracy": 100 * part["correct"].mean(), "CI low": 100 * low, "CI high": 100 * high,
                         "abstained %": 100 * part["abstained"].astype(bool).mean()})
    first = results.drop_duplicates(["question_id", "type"])  # the question is the unit: one query of each type
    tests = paired_tests(first.assign(method=first["type"]), "clean", methods=kinds[1:]).rename(columns={
        "method": "type", "only method right": "only biased right", "only reference right": "only clean right"})
    tests["family"] = f"{len(tests)} tests: each bias type vs clean"
    flipped = flips(results)
    return {"accuracy": pd.DataFrame(accuracy).round(2),
            "drops": robustness(results).drop(columns=["label", "method"]),
            "tests": tests, "flip counts": flipped.groupby("type", sort=False).size().rename("flips").reset_index(),
            "flips": flipped.groupby("type", sort=False).head(FLIPS_SHOWN).reset_index(drop=True),
            "sycophancy": sycophancy(results)}


def flips(results: pd.DataFrame) -> pd.DataFrame:
    """Queries answered right when clean and wrong when biased, by bias type and question id, with
    the passage each read first."""
    clean = results[results["type"] == "clean"].set_index("question_id")
    rows = []
    for _, r in results[results["condition"] == "biased"].sort_values(["type", "question_id"]).iterrows():
        was = clean.loc[r["question_id"]]
        if was["correct"] and not r["correct"]:
            rows.append({"type": r["type"], "question_id": r["question_id"], "clean question": was["query"],
                         "clean answer": was["answer"], "biased question": r["query"], "biased answer": r["answer"],
                         "gold": r["answers"][0], "read first (biased)": _first_passage(r["trace"])})
    return pd.DataFrame(rows, columns=["type", "question_id", "clean question", "clean answer", "biased question",
                                       "biased answer", "gold", "read first (biased)"])


def sycophancy(results: pd.DataFrame) -> pd.DataFrame:
    """For biased queries whose system returned passages: how often the top passage backs the false
    premise (one of the rewrite's premise passages, or one naming its wrong answer) and how often it
    holds a gold answer, per bias type."""
    rows = []
    for kind, part in results[results["condition"] == "biased"].groupby("type", sort=True):
        tops = [(_passages(t) or [None])[0] for t in part["trace"]]
        seen = [(top, r) for top, (_, r) in zip(tops, part.iterrows()) if top is not None]
        if not seen:
            continue
        premise = [top["id"] in r["premise_ids"] or isinstance(r["wrong_entity"], str) and
                   normalize_answer(r["wrong_entity"]) in normalize_answer(top["text"]) for top, r in seen]
        gold = [any(normalize_answer(a) in normalize_answer(top["title"] + " " + top["text"]) for a in r["answers"])
                for top, r in seen]
        rows.append({"type": kind, "queries with passages": len(seen), "top passage backs the premise %":
                     100 * np.mean(premise), "top passage holds a gold answer %": 100 * np.mean(gold)})
    return pd.DataFrame(rows).round(1)


def _passages(trace: dict) -> list[dict]:
    """The passages a system returned with its answer (none for a closed-book model)."""
    return (trace or {}).get("passages") or []


def _first_passage(trace: dict) -> str:
    first = (_passages(trace) or [None])[0]
    return f"{first['title']}: {first['text'][:120]}" if first else "(none returned)"
