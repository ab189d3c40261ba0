"""The embedded teaching set ``data/mini`` (written for this kit; see its data card)."""
from __future__ import annotations

from pathlib import Path

from robustkit.config import REPO_ROOT
from robustkit.data.records import (Corpus, Misconception, Passage, Question, Rewrite,
                                    read_jsonl, sha256_files)

MINI_DIR = REPO_ROOT / "data" / "mini"
FILES = ("questions.jsonl", "rewrites.jsonl", "passages.jsonl", "misconceptions.jsonl",
         "multihop.jsonl")


def mini_fingerprint(root: str | Path = MINI_DIR) -> str:
    return sha256_files(Path(root) / name for name in FILES)


def mini_questions(split: str | None = None, root: str | Path = MINI_DIR) -> list[Question]:
    """Short-answer factual questions (NQ-open style), optionally one split (train/test)."""
    rows = read_jsonl(Path(root) / "questions.jsonl",
                      ("id", "question", "answer", "aliases", "answer_type", "domain", "split",
                       "gold_ids"))
    questions = [Question(r["id"], r["question"], _answers(r), r["answer_type"], r["split"],
                          r["domain"], tuple(r["gold_ids"])) for r in rows]
    return _pick_split(questions, split)


def mini_rewrites(root: str | Path = MINI_DIR) -> list[Rewrite]:
    """The hand-written biased rewrites: one per question and perturbation type."""
    rows = read_jsonl(Path(root) / "rewrites.jsonl", ("question_id", "type", "text"))
    return [Rewrite(r["question_id"], r["type"], r["text"], r.get("wrong_entity"),
                    r.get("subtemplate"), tuple(r.get("premise_ids", ())), "hand-written")
            for r in rows]


def mini_passages(root: str | Path = MINI_DIR) -> list[Passage]:
    rows = read_jsonl(Path(root) / "passages.jsonl", ("id", "title", "text", "kind"))
    return [Passage(r["id"], r["title"], r["text"], r["kind"]) for r in rows]


def mini_corpus(root: str | Path = MINI_DIR) -> Corpus:
    return Corpus(mini_passages(root), name="mini")


def mini_misconceptions(split: str | None = None, root: str | Path = MINI_DIR) -> list[Misconception]:
    rows = read_jsonl(Path(root) / "misconceptions.jsonl",
                      ("id", "question", "category", "best_answer", "correct_answers",
                       "incorrect_answers", "split", "myth_ids", "debunk_ids"))
    items = [Misconception(r["id"], r["question"], r["category"], r["best_answer"],
                           tuple(r["correct_answers"]), tuple(r["incorrect_answers"]), r["split"],
                           tuple(r["myth_ids"]), tuple(r["debunk_ids"])) for r in rows]
    return _pick_split(items, split)


def mini_multihop(split: str | None = None, root: str | Path = MINI_DIR) -> list[Question]:
    """Two-hop questions; ``gold_ids`` are both supporting passages, hop type in ``extra``."""
    rows = read_jsonl(Path(root) / "multihop.jsonl",
                      ("id", "question", "answer", "aliases", "answer_type", "hop_type", "split",
                       "support_ids", "distractor_ids"))
    questions = [Question(r["id"], r["question"], _answers(r), r["answer_type"], r["split"],
                          "multihop", tuple(r["support_ids"]),
                          {"hop_type": r["hop_type"], "bridge_entity": r.get("bridge_entity"),
                           "distractor_ids": r["distractor_ids"]}) for r in rows]
    return _pick_split(questions, split)


def _answers(row: dict) -> tuple[str, ...]:
    return tuple(dict.fromkeys([row["answer"], *row["aliases"]]))


def _pick_split(items: list, split: str | None) -> list:
    if split is None:
        return items
    if split not in {"train", "test"}:
        raise ValueError(f"unknown split {split!r} for data/mini; expected 'train', 'test' or None")
    return [item for item in items if item.split == split]
