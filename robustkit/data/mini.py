"""The embedded teaching set ``data/mini`` (written for this kit; see its data card).

Each loader checks its file row by row (``validate.Row``) and names the file, line and field of
the first bad value; ``check_mini`` is the fuller validator (references, answer rules, manifest).
"""
from __future__ import annotations

from pathlib import Path

from robustkit.paths import MINI_DIR
from robustkit.data.records import (PERTURBATION_TYPES, Corpus, Misconception, Passage, Question,
                                    Rewrite, sha256_files)
from robustkit.data.validate import Row, Unique, jsonl_rows

FILES = ("questions.jsonl", "rewrites.jsonl", "passages.jsonl", "misconceptions.jsonl",
         "multihop.jsonl")
SPLITS = ("train", "test")


def mini_fingerprint(root: str | Path = MINI_DIR) -> str:
    return sha256_files(Path(root) / name for name in FILES)


def mini_questions(split: str | None = None, root: str | Path = MINI_DIR) -> list[Question]:
    """Short-answer factual questions (NQ-open style), optionally one split (train/test)."""
    _check_split(split)
    rows = jsonl_rows(Path(root) / "questions.jsonl",
                      ("id", "question", "answer", "aliases", "answer_type", "domain", "split",
                       "gold_ids"))
    ids = Unique("question id")
    questions = [r.build(Question, ids.add(r.text("id"), r), r.text("question"), _answers(r),
                         r.text("answer_type", empty=True), r.choice("split", SPLITS),
                         r.text("domain", empty=True), r.strings("gold_ids"))
                 for r in rows]
    return _pick_split(questions, split)


def mini_rewrites(root: str | Path = MINI_DIR) -> list[Rewrite]:
    """The hand-written biased rewrites: one per question and perturbation type."""
    rows = jsonl_rows(Path(root) / "rewrites.jsonl", ("question_id", "type", "text"))
    keys = Unique("rewrite (question_id, type)")
    rewrites = []
    for r in rows:
        qid, kind = r.text("question_id"), r.choice("type", PERTURBATION_TYPES)
        keys.add((qid, kind), r)
        rewrites.append(r.build(Rewrite, qid, kind, r.text("text"),
                                r.optional_text("wrong_entity"), r.optional_text("subtemplate"),
                                r.strings("premise_ids", default=()), "hand-written"))
    return rewrites


def mini_passages(root: str | Path = MINI_DIR) -> list[Passage]:
    rows = jsonl_rows(Path(root) / "passages.jsonl", ("id", "title", "text", "kind"))
    ids = Unique("passage id")  # Corpus refuses duplicates too, but cannot say on which lines
    return [r.build(Passage, ids.add(r.text("id"), r), r.text("title", empty=True),
                    r.text("text"), r.text("kind", empty=True))
            for r in rows]


def mini_corpus(root: str | Path = MINI_DIR) -> Corpus:
    return Corpus(mini_passages(root), name="mini")


def mini_misconceptions(split: str | None = None, root: str | Path = MINI_DIR) -> list[Misconception]:
    _check_split(split)
    rows = jsonl_rows(Path(root) / "misconceptions.jsonl",
                      ("id", "question", "category", "best_answer", "correct_answers",
                       "incorrect_answers", "split", "myth_ids", "debunk_ids"))
    ids = Unique("misconception id")
    items = [r.build(Misconception, ids.add(r.text("id"), r), r.text("question"),
                     r.text("category", empty=True), r.text("best_answer"),
                     r.strings("correct_answers"), r.strings("incorrect_answers"),
                     r.choice("split", SPLITS), r.strings("myth_ids"), r.strings("debunk_ids"))
             for r in rows]
    return _pick_split(items, split)


def mini_multihop(split: str | None = None, root: str | Path = MINI_DIR) -> list[Question]:
    """Two-hop questions; ``gold_ids`` are both supporting passages, hop type in ``extra``."""
    _check_split(split)
    rows = jsonl_rows(Path(root) / "multihop.jsonl",
                      ("id", "question", "answer", "aliases", "answer_type", "hop_type", "split",
                       "support_ids", "distractor_ids"))
    ids = Unique("question id")
    questions = [r.build(Question, ids.add(r.text("id"), r), r.text("question"), _answers(r),
                         r.text("answer_type", empty=True), r.choice("split", SPLITS), "multihop",
                         r.strings("support_ids"),
                         {"hop_type": r.text("hop_type"),
                          "bridge_entity": r.optional_text("bridge_entity"),
                          "distractor_ids": list(r.strings("distractor_ids"))})
                 for r in rows]
    return _pick_split(questions, split)


def _answers(row: Row) -> tuple[str, ...]:
    return tuple(dict.fromkeys([row.text("answer"), *row.strings("aliases")]))


def _check_split(split: str | None) -> None:
    # before any file is read: a typo is the caller's error, not the data's
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r} for data/mini; expected 'train', 'test' or None")


def _pick_split(items: list, split: str | None) -> list:
    return items if split is None else [item for item in items if item.split == split]
