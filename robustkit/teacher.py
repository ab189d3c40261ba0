"""Teacher labelling (CoRM-RAG §3.2): the robustness utility of each candidate passage.

For training question x with perturbations x̃₁…x̃_K, candidates come from two pools: the clean
query's top-M (where positives come from) and each perturbed query's top-M (hard negatives).
The teacher M answers every perturbed query from each candidate alone, and

    s(x, d) = (1/K) Σₖ 1[ M(x̃ₖ, d) = y ]

is the fraction of biased phrasings under which d still leads the teacher to the gold answer y.
Correctness is a normalised whole-word match against the gold aliases, with an optional LLM
judge consulted only where the match does not already decide.

Every per-(d, k) outcome is kept, so s for any K′ ≤ K is recomputed without new calls. Work is
appended per chunk of questions to a log that survives being killed; a rerun continues where it
stopped and the final artifact is identical to an uninterrupted run's.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Sequence

from tqdm.auto import tqdm

from robustkit.artifacts import (JsonlLog, manifest_path, matching_artifact, read_manifest,
                                 write_manifest)
from robustkit.data.records import Corpus, DataError, Question, has_answer, write_jsonl
from robustkit.metrics import substring_match
from robustkit.rag import reader_prompt

# judge(questions, predictions, gold answer lists) -> one verdict per prediction
Judge = Callable[[list[str], list[str], list[Sequence[str]]], list[bool]]


def label(questions: Sequence[Question], perturbations: Sequence[dict], corpus: Corpus,
          retriever, teacher, *, m: int, out_path: str | Path, judge: Judge | None = None,
          chunk_size: int = 8, max_words: int = 80, progress: bool = True) -> list[dict]:
    """Label every candidate of every training question with s(x, d); resumable.

    Args:
        questions: training questions (gold answers in ``answers``).
        perturbations: records from ``robustkit.perturb.synthesize`` (question_id, k, text).
        corpus, retriever: where candidates come from; ``retriever.search(queries, m)``.
        teacher: a ``robustkit.llm.Generator``.
        m: M, candidates per query.
        out_path: the labels JSONL; ``<out_path>.partial`` holds the resumable log.
        judge: optional batched judge (see ``llm_judge``) for cases the match leaves undecided.

    Returns one record per (question, candidate), in question then candidate order.
    """
    by_question = _perturbations_by_question(questions, perturbations)
    if m < 1:
        raise ValueError(f"M (candidates per query) must be >= 1, got {m}")
    if not questions:
        raise ValueError("no training questions to label")
    out_path = Path(out_path)
    inputs = labels_inputs(corpus, teacher.model_id, m, questions, perturbations)
    partial = out_path.with_name(out_path.name + ".partial")
    if partial.exists() and not matching_artifact(partial, inputs):
        partial.unlink()  # left by a run with other inputs: resuming from it would mix labels
    write_manifest(partial, inputs)
    log = JsonlLog(partial, key="key")
    pools = _candidate_pools(questions, by_question, retriever, m)
    calls_before, hits_before, start = teacher.misses, teacher.hits, time.perf_counter()
    chunks = [questions[i:i + chunk_size] for i in range(0, len(questions), chunk_size)]
    with tqdm(total=len(questions), desc="teacher labelling", disable=not progress) as bar:
        for chunk in chunks:
            todo = [q for q in chunk if any(f"{q.id}|{doc}" not in log for doc, _ in pools[q.id])]
            if todo:
                log.extend(_label_chunk(todo, by_question, pools, corpus, teacher, judge, max_words))
            bar.update(len(chunk))
    records = [log.records[f"{q.id}|{doc}"] for q in questions for doc, _ in pools[q.id]]
    write_jsonl(out_path, records)
    log.path.unlink()
    manifest_path(partial).unlink()
    write_manifest(out_path, inputs, {"teacher calls": teacher.misses - calls_before,
                                      "cache hits": teacher.hits - hits_before,
                                      "records": len(records),
                                      "seconds": round(time.perf_counter() - start, 1)})
    return records


def labels_inputs(corpus: Corpus, teacher_id: str, m: int, questions: Sequence[Question],
                  perturbations: Sequence[dict]) -> dict:
    """What a labels artifact depends on (its manifest's inputs)."""
    return {"corpus": corpus.checksum, "teacher": teacher_id, "m": m,
            "questions": [q.id for q in questions],
            "perturbations": [[p["question_id"], p["k"], p["text"]] for p in perturbations]}


def load_labels(path: str | Path, corpus: Corpus) -> list[dict]:
    """Read a labels artifact, refusing one built from a different corpus."""
    from robustkit.data.records import read_jsonl

    built_from = read_manifest(path)["inputs"]["corpus"]
    if built_from != corpus.checksum:
        raise DataError(f"{path} was labelled on corpus sha256 {built_from[:12]}…, but corpus "
                        f"{corpus.name!r} has sha256 {corpus.checksum[:12]}…; relabel on this corpus")
    return read_jsonl(path)


def robustness(record: dict, k: int | None = None) -> float:
    """s(x, d) from the first ``k`` perturbations (all K by default)."""
    if k is not None and not 1 <= k <= len(record["outcomes"]):
        raise ValueError(f"K' must be in 1..{len(record['outcomes'])}, got {k}")
    outcomes = record["outcomes"][:k]
    return sum(outcomes) / len(outcomes)


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
    outcomes = [int(substring_match(answer, q.answers)) for (q, *_), answer in zip(jobs, answers)]
    if judge is not None:  # ask only where the normalised match does not decide
        undecided = [i for i, (o, a) in enumerate(zip(outcomes, answers))
                     if not o and a and "unknown" not in a.lower()]
        verdicts = judge([jobs[i][3]["text"] for i in undecided], [answers[i] for i in undecided],
                         [jobs[i][0].answers for i in undecided]) if undecided else []
        for i, verdict in zip(undecided, verdicts):
            outcomes[i] = int(verdict)
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


def llm_judge(generator) -> Judge:
    """A batched LLM judge for answers the normalised match rejects (useful with a strong model
    only: SmolLM2-135M answers yes/no at chance, so the tiny scale runs without one)."""
    def judge(questions, predictions, answer_lists) -> list[bool]:
        prompts = [f"Question: {q}\nGold answer: {answers[0]}\nProposed answer: {p}\n"
                   "Does the proposed answer mean the same as the gold answer? Reply yes or no."
                   for q, p, answers in zip(questions, predictions, answer_lists)]
        replies = generator.generate(prompts, max_new_tokens=3, progress=False, desc="judging")
        return [r.strip().lower().startswith("yes") for r in replies]
    return judge
