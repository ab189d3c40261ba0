"""A researcher's own files: a questions file and a passages file, read strictly (a bad row stops
the read, naming its file, line and field).

    questions, rewrites = read_questions("questions.jsonl")
    corpus = read_corpus("passages.jsonl")

Questions, one JSON object per line (``id`` optional: the line number names the question)::

    {"id": "q1", "question": "Who wrote Hamlet?", "answers": ["William Shakespeare", "Shakespeare"],
     "rewrites": [{"type": "false_premise", "text": "...", "wrong_entity": "Marlowe"}]}

``rewrites`` is optional (hand-written biased versions, typed ``false_premise``,
``confirmation_bias`` or ``topical_distraction``); questions without them get the adversary's.
Passages, one per line: ``{"id": "p1", "title": "Hamlet", "text": "..."}`` (``title`` optional).
"""
from __future__ import annotations

from pathlib import Path

from robustkit.data.records import Corpus, DataError, Passage, Question, Rewrite
from robustkit.data.validate import Unique, jsonl_rows


def read_questions(path: str | Path) -> tuple[list[Question], list[Rewrite]]:
    """The questions of a questions file and the rewrites it carries (``source="hand-written"``)."""
    ids, questions, rewrites = Unique("question id"), [], []
    for n, row in enumerate(jsonl_rows(path, required=("question", "answers"))):
        qid = ids.add(row.text("id") if "id" in row.data else f"q{n + 1:04d}", row)
        questions.append(row.build(Question, qid, row.text("question"), row.strings("answers", nonempty=True)))
        listed = row.get("rewrites", [])
        if not isinstance(listed, list):
            raise row.error("rewrites", "a list of {type, text} objects", listed)
        for i, item in enumerate(listed):
            if not isinstance(item, dict) or not isinstance(item.get("text"), str) or not item["text"].strip():
                raise row.error(f"rewrites[{i}].text", "a non-empty string", item)
            rewrites.append(row.build(Rewrite, qid, item.get("type"), item["text"], item.get("wrong_entity"),
                                      source="hand-written"))
    if not questions:
        raise DataError(f"{path}: no questions")
    return questions, rewrites


def read_corpus(path: str | Path) -> Corpus:
    """The passages of a passages file, as a ``Corpus`` named after the file."""
    ids = Unique("passage id")
    passages = [row.build(Passage, ids.add(row.text("id"), row),
                          row.text("title", empty=True) if "title" in row else "", row.text("text"))
                for row in jsonl_rows(path, required=("id", "text"))]
    if not passages:
        raise DataError(f"{path}: no passages")
    return Corpus(passages, Path(path).stem)
