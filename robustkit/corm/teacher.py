"""Teacher labelling (CoRM-RAG §3.2): the robustness utility of each candidate passage.

For training question x with perturbations x̃₁…x̃_K, candidates come from two pools: the clean
query's top-M (where positives come from) and each perturbed query's top-M (hard negatives).
The teacher M answers every perturbed query from each candidate alone, and

    s(x, d) = (1/K) Σₖ 1[ M(x̃ₖ, d) = y ]

is the fraction of biased phrasings under which d still leads the teacher to the gold answer y.
Correctness is decided by a judge (``robustkit.judges``): by default a normalised whole-word
match against the gold aliases.

Every per-(d, k) outcome is kept, so s for any K′ ≤ K is recomputed without new calls. Work is
appended per chunk of questions to a log that survives being killed; a rerun continues where it
stopped and the final artifact is identical to an uninterrupted run's.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

from tqdm.auto import tqdm

from robustkit.artifacts import JsonlLog
from robustkit.config import check_knob, show_progress
from robustkit.data.records import Corpus, DataError, Question, has_answer
from robustkit.judges import Judge, NormalisedMatch
from robustkit.reader import reader_prompt


def label(questions: Sequence[Question], perturbations: Sequence[dict], corpus: Corpus,
          retriever, teacher, *, m: int, log_path: str | Path | None = None,
          judge: Judge | None = None, chunk_size: int = 8, max_words: int = 80,
          progress: bool = True) -> list[dict]:
    """Label every candidate of every training question with s(x, d); resumable.

    Args:
        questions: training questions (gold answers in ``answers``).
        perturbations: records from ``corm.perturb.synthesize`` (question_id, k, text).
        corpus, retriever: where candidates come from; ``retriever.search(queries, m)``.
        teacher: a ``robustkit.llm.Generator``.
        m: M, candidates per query.
        log_path: a JSONL log of finished questions; a rerun with the same log continues where
            the last one stopped (the ``stage`` that calls this keeps it for the same inputs only).
        judge: decides each answer (default ``judges.NormalisedMatch``).

    Returns one record per (question, candidate), in question then candidate order.
    """
    check_knob("M (candidates per query)", m, integer=True, low=1)
    check_knob("chunk_size", chunk_size, integer=True, low=1)
    check_knob("max_words", max_words, integer=True, low=1)
    if not questions:
        raise ValueError("no training questions to label")
    seen = set()
    for q in questions:  # a repeated question would write its records twice
        if q.id in seen:
            raise ValueError(f"question {q.id!r} appears twice among the questions to label")
        seen.add(q.id)
    by_question = _perturbations_by_question(questions, perturbations)
    judge = judge or NormalisedMatch()
    log = JsonlLog(log_path, key="key") if log_path else None
    done = log.records if log is not None else {}
    pools = _candidate_pools(questions, by_question, retriever, m)
    chunks = [questions[i:i + chunk_size] for i in range(0, len(questions), chunk_size)]
    with tqdm(total=len(questions), desc="teacher labelling",
              disable=not (progress and show_progress())) as bar:
        for chunk in chunks:
            todo = [q for q in chunk if any(f"{q.id}|{doc}" not in done for doc, _ in pools[q.id])]
            if todo:
                records = _label_chunk(todo, by_question, pools, corpus, teacher, judge, max_words)
                if log is not None:
                    log.extend(records)
                else:
                    done.update((r["key"], r) for r in records)
            bar.update(len(chunk))
    return [done[f"{q.id}|{doc}"] for q in questions for doc, _ in pools[q.id]]


def label_counts(records: Sequence[dict], sent: int, replayed: int) -> dict:
    """What labelling cost, for its manifest: the teacher generations the labels took (K per
    record), of which ``sent`` were generated when the stage ran, ``replayed`` came from the call
    cache, and the rest were done by an interrupted run and read back from its log."""
    generations = sum(len(r["outcomes"]) for r in records)
    return {"records": len(records), "teacher generations": generations, "sent when the stage ran": sent,
            "replayed from the call cache": replayed, "read from an interrupted run's log": generations - sent - replayed}


def answer_likelihoods(labels: Sequence[dict], questions: Sequence[Question],
                       perturbations: Sequence[dict], corpus: Corpus, teacher, *,
                       max_words: int = 80, progress: bool = True) -> list[dict]:
    """The soft utility beside the paper's 0/1 label, REPLUG's LM-likelihood utility (Shi et al.,
    2023): for every labelled (question, candidate) and each perturbation k, the teacher's
    probability of the gold answer y read as its whole reply to the same prompt the 0/1 label
    used, teacher-forced (one forward pass over the answer's tokens, no generation):

        s_soft(x, d) = (1/K) Σₖ P_M(y | x̃ₖ, d),   y = the first gold alias.

    The K prompts about one passage share their passage prefix, computed once
    (``Generator.continuation_logprobs``). Returns one record per label record, in its order:
    key, question_id, doc_id, likelihoods (one per k) and s_soft."""
    by_id = {q.id: q for q in questions}
    by_question = _perturbations_by_question(questions, perturbations)
    unknown = next((r["question_id"] for r in labels if r["question_id"] not in by_id), None)
    if unknown is not None:
        raise DataError(f"label record of question {unknown!r}, which is not among the questions")
    jobs = [(r, p) for r in labels for p in by_question[r["question_id"]]]
    prompts = [reader_prompt(p["text"], [corpus[r["doc_id"]]], max_words) for r, p in jobs]
    gold = [by_id[r["question_id"]].answers[0].strip() for r, _ in jobs]
    logprobs = iter(teacher.continuation_logprobs(prompts, gold, progress=progress,
                                                  desc="answer likelihoods"))
    records = []
    for r in labels:
        likelihoods = [math.exp(next(logprobs)) for _ in by_question[r["question_id"]]]
        records.append({"key": r["key"], "question_id": r["question_id"], "doc_id": r["doc_id"],
                        "likelihoods": likelihoods, "s_soft": sum(likelihoods) / len(likelihoods)})
    return records


def robustness(record: dict, k: int | None = None) -> float:
    """s(x, d) from the first ``k`` perturbations (all K by default)."""
    if not record.get("outcomes"):
        raise ValueError(f"label {record.get('key', record)!r:.80} has no outcomes: s(x, d) averages the "
                         "teacher's verdicts over K ≥ 1 perturbations")
    if k is not None and not 1 <= k <= len(record["outcomes"]):
        raise ValueError(f"K' must be in 1..{len(record['outcomes'])}, got {k}")
    outcomes = record["outcomes"][:k]
    return sum(outcomes) / len(outcomes)


def k_prime_distribution(labels: Sequence[dict]):
    """Share of candidates at each utility value when s is computed from only the first K′
    perturbations, K′ = 1…K: rows are s (rounded to 2 places), columns K′ (no new calls)."""
    import pandas as pd

    if not labels:
        raise ValueError("k_prime_distribution needs the teacher's label rows (rk.corm.labels(cfg)), got none")
    k = len(labels[0]["outcomes"])
    return pd.DataFrame({f"K'={kp}": pd.Series([round(robustness(r, kp), 2) for r in labels])
                         .value_counts(normalize=True) for kp in range(1, k + 1)}
                        ).fillna(0.0).sort_index().round(3)


# --- internals ---------------------------------------------------------------------------------

def _perturbations_by_question(questions, perturbations) -> dict[str, list[dict]]:
    known = {q.id for q in questions}
    by_question: dict[str, list[dict]] = {q.id: [] for q in questions}
    for p in perturbations:
        if p["question_id"] not in known:
            raise DataError(f"perturbation {p['question_id']}/{p.get('k')} refers to an unknown "
                            "question id (not among the questions being labelled)")
        by_question[p["question_id"]].append(p)
    empty = [qid for qid, ps in by_question.items() if not ps]
    if empty:
        raise DataError(f"{len(empty)} question(s) have no perturbation, e.g. {empty[0]!r}")
    for ps in by_question.values():
        ps.sort(key=lambda p: p["k"])
    return by_question


def _candidate_pools(questions, by_question, retriever, m) -> dict[str, list[tuple[str, dict]]]:
    """Per question: ordered candidates with the pools they came from (clean, perturbed k's)."""
    queries = [q.text for q in questions] + [p["text"] for q in questions for p in by_question[q.id]]
    hits = retriever.search(queries, m)
    clean, perturbed = hits[:len(questions)], iter(hits[len(questions):])
    pools = {}
    for question, clean_hits in zip(questions, clean):
        pool: dict[str, dict] = {h.doc_id: {"clean": True, "perturbed_k": []} for h in clean_hits}
        for p in by_question[question.id]:
            for hit in next(perturbed):
                pool.setdefault(hit.doc_id, {"clean": False, "perturbed_k": []})["perturbed_k"].append(p["k"])
        if not pool:
            raise DataError(f"retriever returned no candidate for question {question.id!r}")
        pools[question.id] = list(pool.items())
    return pools


def _label_chunk(questions, by_question, pools, corpus, teacher, judge, max_words) -> list[dict]:
    jobs = [(q, doc, origin, p) for q in questions for doc, origin in pools[q.id]
            for p in by_question[q.id]]
    prompts = [reader_prompt(p["text"], [corpus[doc]], max_words) for _, doc, _, p in jobs]
    answers = teacher.generate(prompts, max_new_tokens=16, progress=False)
    outcomes = [int(ok) for ok in judge([p["text"] for *_, p in jobs], answers,
                                         [q.answers for q, *_ in jobs])]
    records: dict[str, dict] = {}
    for (q, doc, origin, p), answer, outcome in zip(jobs, answers, outcomes):
        key = f"{q.id}|{doc}"
        record = records.setdefault(key, {
            "key": key, "question_id": q.id, "doc_id": doc, "in_clean_pool": origin["clean"],
            "perturbed_k": sorted(set(origin["perturbed_k"])),
            "has_gold": has_answer(corpus[doc], q.answers), "answers": [], "outcomes": []})
        record["answers"].append(answer)
        record["outcomes"].append(outcome)
    for record in records.values():
        record["s"] = sum(record["outcomes"]) / len(record["outcomes"])
    return list(records.values())
