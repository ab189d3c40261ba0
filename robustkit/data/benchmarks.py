"""Real benchmark loaders: the dataset hub when online, a local mirror folder when not.

A mirror folder (``$ROBUSTKIT_DATA_DIR``, default ``../shared/datasets`` beside the repository)
holds one sub-folder per dataset with the files of its public release. Every loader returns the
kit's record types and a fingerprint of its source for run manifests.
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from robustkit.config import is_offline
from robustkit.paths import CHECKOUT
from robustkit.data.records import (Corpus, DataError, Misconception, Passage, Question, normalize_answer,
                                    sha256_files)
from robustkit.data.validate import (Row, Unique, array_rows, json_document, jsonl_rows, strings,
                                     table_rows)


@dataclass
class Dataset:
    name: str
    split: str
    records: list
    source: str  # "hub:<id>" or the mirror files
    fingerprint: str

    def __post_init__(self):
        # a gold answer such as '---' or ')' normalises to nothing and so can match no reply
        # (``metrics.exact_match``); such questions are kept, so that seeded samples stay the
        # same, but never silently: every answer to them is scored wrong
        unscorable = [r for r in self.records if isinstance(r, Question)
                      and not any(normalize_answer(a) for a in r.answers)]
        if unscorable:
            shown = ", ".join(f"{q.id} {list(q.answers)}" for q in unscorable[:3])
            print(f"[robustkit] {self.name} {self.split}: {len(unscorable)} of {len(self.records)} questions have no "
                  f"gold answer left after SQuAD normalisation ({shown}); every answer to them is scored wrong")
        self.unscorable = len(unscorable)

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self):
        return iter(self.records)

    def __getitem__(self, i):
        return self.records[i]


@dataclass(frozen=True)
class _Spec:
    hub_id: str
    hub_config: str | None
    hub_split: str
    mirror_files: tuple[str, ...]  # first existing one is read
    read_mirror: Callable[[Path], list[Row]]  # the file's records, each with its line or index
    parse_mirror: Callable[[list[Row]], list]
    parse_hub: Callable[[list[Row]], list]


def data_dir() -> Path | None:
    """The local mirror folder, if there is one: ``$ROBUSTKIT_DATA_DIR``, else (in a checkout)
    ``../shared/datasets`` beside the repository."""
    env = os.environ.get("ROBUSTKIT_DATA_DIR")
    if env:
        return Path(env)
    default = CHECKOUT.parent / "shared" / "datasets" if CHECKOUT else None
    return default if default and default.is_dir() else None


def load(name: str, split: str = "test", source: str = "auto") -> Dataset:
    """Load a benchmark as kit records.

    Args:
        name: one of ``DATASETS`` (nq_open, nq_open_oracle, truthfulqa, simpleqa, hotpotqa,
            popqa, triviaqa).
        split: "test" for the evaluation split; for ``nq_open_oracle`` "train" or "test" (a
            deterministic 80/20 split of its questions) or "all".
        source: "mirror", "hub" or "auto" (mirror if present, else hub, else a clear error).
            ``nq_open_oracle`` has no hub copy: "hub" is refused for it.
    """
    # arguments first, so a typo fails at once rather than after a download or a parse
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; expected one of {sorted(DATASETS)}")
    if source not in {"auto", "mirror", "hub"}:
        raise ValueError(f"unknown source {source!r}; expected 'auto', 'mirror' or 'hub'")
    splits = ("train", "test", "all") if name == "nq_open_oracle" else ("test",)
    if split not in splits:
        raise ValueError(f"unknown split {split!r} for {name}; expected one of {list(splits)}")
    if name == "nq_open_oracle":
        if source == "hub":
            raise DataError(_ORACLE_NO_HUB)
        return _oracle_questions(split)
    spec = _SPECS[name]
    mirror = _mirror_file(name, spec)
    if source == "mirror" or (source == "auto" and mirror):
        if not mirror:
            raise DataError(_missing_message(name, spec))
        records = spec.parse_mirror(spec.read_mirror(mirror))
        if not records:  # an empty or emptied file is not a benchmark
            raise DataError(f"{mirror}: no records")
        return Dataset(name, split, records, str(mirror), sha256_files([mirror]))
    if is_offline():
        raise DataError(_missing_message(name, spec))
    from datasets import load_dataset

    rows = load_dataset(spec.hub_id, spec.hub_config, split=spec.hub_split)
    records = spec.parse_hub([Row(f"hub:{spec.hub_id}", f"[{i}]", r) for i, r in enumerate(rows)])
    return Dataset(name, split, records, f"hub:{spec.hub_id}", _records_fingerprint(records))


def mirror_summary(names: tuple[str, ...] = ("nq_open", "nq_open_oracle", "truthfulqa", "simpleqa")):
    """One row per benchmark in the local mirror: records, fingerprint and an example question,
    or why it could not be read."""
    import pandas as pd

    rows = []
    for name in names:
        split = "all" if name == "nq_open_oracle" else "test"
        try:
            ds = load(name, split) if name == "nq_open_oracle" else load(name, split, source="mirror")
        except DataError as err:
            rows.append({"dataset": name, "split": split, "records": 0, "sha256": "",
                         "example": f"not available: {str(err)[:80]}…"})
            continue
        rows.append({"dataset": name, "split": split, "records": len(ds),
                     "sha256": ds.fingerprint[:12], "example": ds[0].text})
    return pd.DataFrame(rows)


def corpus(name: str) -> Corpus:
    """A closed retrieval corpus.

    ``mini``: the embedded teaching set. ``nq_open_oracle``: the 2,655 gold Wikipedia passages
    of the NQ-open oracle release (deduplicated). ``truthfulqa`` / ``truthfulqa_enriched``:
    TruthfulQA's frozen statement corpus, base (cache A) or counter-evidence-enriched (cache B);
    see ``truthfulqa_corpus``.
    """
    if name == "mini":
        from robustkit.data.mini import mini_corpus

        return mini_corpus()
    if name == "nq_open_oracle":
        passages, _ = _oracle()
        return Corpus(passages, name)
    if name in {"truthfulqa", "truthfulqa_enriched"}:
        return truthfulqa_corpus(enriched=name.endswith("enriched"))
    raise ValueError(f"unknown corpus {name!r}; expected 'mini', 'nq_open_oracle', "
                     "'truthfulqa' or 'truthfulqa_enriched'")


def truthfulqa_corpus(enriched: bool = False) -> Corpus:
    """TruthfulQA has no evidence corpus, so the kit freezes one built from its own answers.

    Base (FVA-RAG's cache A): one passage per question holding its *incorrect* answers written as
    claims beside its best answer — the mix of popular belief and fact a web search returns.
    Enriched (cache B): additionally one passage per question with its correct answers only, the
    counter-evidence a falsification query should find.
    """
    items = load("truthfulqa").records
    passages = []
    for item in items:
        claims = " ".join(_sentence(a) for a in (*item.incorrect_answers, item.best_answer))
        passages.append(Passage(f"{item.id}-a", item.text, claims, "mixed"))
        if enriched:
            facts = " ".join(_sentence(a) for a in item.correct_answers)
            passages.append(Passage(f"{item.id}-b", item.text, facts, "debunk"))
    return Corpus(passages, "truthfulqa_enriched" if enriched else "truthfulqa")


# --- NQ-open oracle -------------------------------------------------------------------------

def _oracle_questions(split: str) -> Dataset:
    _, questions = _oracle()
    if not questions:
        raise DataError(f"{_oracle_path()}: no records")
    chosen = [q for q in questions if split == "all" or q.split == split]
    path = _oracle_path()
    return Dataset("nq_open_oracle", split, chosen, str(path), sha256_files([path]))


def _oracle() -> tuple[list[Passage], list[Question]]:
    path = _oracle_path()
    passages: dict[str, Passage] = {}
    questions = []
    for n, row in enumerate(jsonl_rows(path, ("question", "answers", "ctxs"))):
        text, answers = row.text("question"), row.strings("answers", nonempty=True)
        ctx = row.objects("ctxs", nonempty=True)[0]  # the gold passage
        title, body = ctx.text("title", empty=True), ctx.text("text")
        pid = "nqo-" + hashlib.sha1(f"{title}\n{body}".encode()).hexdigest()[:12]
        passages.setdefault(pid, row.build(Passage, pid, title, " ".join(body.split()), "gold"))
        # deterministic split by question text: stable whatever the file order
        split = "test" if int(hashlib.sha1(text.encode()).hexdigest(), 16) % 5 == 0 else "train"
        questions.append(row.build(Question, f"nqo-q{n:04d}", text, answers, "", split, "nq_open",
                                   (pid,)))
    return list(passages.values()), questions


_ORACLE_NO_HUB = ("dataset 'nq_open_oracle' (nelson-liu/lost-in-the-middle qa_data/"
                  "nq-open-oracle.jsonl.gz) has no hub copy; put the file under "
                  "$ROBUSTKIT_DATA_DIR/nq_open_oracle/")


def _oracle_path() -> Path:
    root = data_dir()
    path = root / "nq_open_oracle" / "nq-open-oracle.jsonl.gz" if root else None
    if not path or not path.exists():
        raise DataError(_ORACLE_NO_HUB)
    return path


# --- parsers, one per public format; each checks its rows through validate.Row -------------

def _nq_rows(rows: list[Row]) -> list[Question]:
    return [r.build(Question, f"nq-{i:04d}", r.text("question"), r.strings("answer", nonempty=True),
                    split="test", domain="nq_open")
            for i, r in enumerate(rows)]


def _split_answers(row: Row, key: str) -> tuple[str, ...]:
    """TruthfulQA's release joins a cell's answers with ';'."""
    answers = tuple(a.strip() for a in row.text(key).split(";") if a.strip())
    if not answers:
        raise row.error(key, "one or more answers separated by ';'", row.get(key))
    return answers


def _truthfulqa_mirror(rows: list[Row]) -> list[Misconception]:
    return [r.build(Misconception, f"tqa-{i:03d}", r.text("Question"), r.text("Category"),
                    r.text("Best Answer"), _split_answers(r, "Correct Answers"),
                    _split_answers(r, "Incorrect Answers"))
            for i, r in enumerate(rows)]


def _truthfulqa_hub(rows: list[Row]) -> list[Misconception]:
    return [r.build(Misconception, f"tqa-{i:03d}", r.text("question"), r.text("category"),
                    r.text("best_answer"), r.strings("correct_answers", nonempty=True),
                    r.strings("incorrect_answers", nonempty=True))
            for i, r in enumerate(rows)]


def _simpleqa_rows(rows: list[Row]) -> list[Question]:
    out = []
    for i, r in enumerate(rows):
        meta = r.get("metadata")  # the release's CSV holds a Python dict literal, the hub a dict
        if isinstance(meta, str):
            meta = r.parsed("metadata", ast.literal_eval, "a Python dict literal")
        if not isinstance(meta, dict):
            raise r.error("metadata", "a dict of topic, answer_type and urls", meta)
        out.append(r.build(Question, f"sqa-{i:04d}", r.text("problem"), (r.text("answer"),),
                           str(meta.get("answer_type", "")), "test", str(meta.get("topic", ""))))
    return out


def _hotpot_read(path: Path) -> list[Row]:
    if path.suffix == ".jsonl":  # IRCoT's re-packaging of the distractor dev set, one per line
        return jsonl_rows(path, ("question_id", "question_text", "answers_objects", "contexts"))
    return array_rows(json_document(path), str(path))


def _hotpot_rows(rows: list[Row]) -> list[Question]:
    ids, out = Unique("question id"), []
    for r in rows:
        if "contexts" in r:
            out.append(_ircot_hotpot_question(r, ids))
            continue
        qid = ids.add(r.text("_id" if "_id" in r else "id"), r)  # the release says _id, the hub id
        paragraphs = []
        for j, (title, sentences, name) in enumerate(_hotpot_pairs(r, "context", "sentences")):
            body = " ".join(s.strip() for s in strings(sentences, r.where, name))
            paragraphs.append(r.build(Passage, f"{qid}-{j}", title, body))
        gold_titles = {title for title, _, _ in _hotpot_pairs(r, "supporting_facts", "sent_id")}
        gold = tuple(p.id for p in paragraphs if p.title in gold_titles)
        extra = {"hop_type": r.text("type"), "level": r.get("level", None),
                 "paragraphs": paragraphs}
        out.append(r.build(Question, qid, r.text("question"), (r.text("answer"),), "", "test",
                           "hotpotqa", gold, extra))
    return out


def _ircot_hotpot_question(r: Row, ids: Unique) -> Question:
    """IRCoT's layout: ``question_text``, gold strings in ``answers_objects[].spans``, the
    question's own paragraphs in ``contexts[]`` with ``is_supporting`` flags (no hop type)."""
    qid = ids.add(r.text("question_id"), r)
    answers = [a for obj in r.objects("answers_objects", nonempty=True)
               for a in obj.strings("spans", nonempty=True)]
    paragraphs, gold = [], []
    for j, c in enumerate(r.objects("contexts", nonempty=True)):
        paragraphs.append(r.build(Passage, f"{qid}-{j}", c.text("title", empty=True),
                                  " ".join(c.text("paragraph_text").split())))
        if c.get("is_supporting") not in (True, False):
            raise c.error("is_supporting", "true or false", c.get("is_supporting"))
        if c.get("is_supporting"):
            gold.append(paragraphs[-1].id)
    extra = {"hop_type": None, "level": None, "paragraphs": paragraphs}
    return r.build(Question, qid, r.text("question_text"), tuple(dict.fromkeys(answers)), "",
                   "test", "hotpotqa", tuple(gold), extra)


def _hotpot_pairs(r: Row, key: str, second: str) -> list[tuple[str, object, str]]:
    """``(title, value, field name of value)`` from the release's ``[[title, value], ...]`` or
    the hub's columns ``{"title": [...], second: [...]}``."""
    if isinstance(r.get(key), dict):
        columns = r.sub(key)
        titles, values = columns.strings("title"), columns.items(second)
        if len(values) != len(titles):
            raise columns.error(second, f"a list of {len(titles)} (one per title)", values)
        return [(t, v, f"{key}.{second}[{j}]") for j, (t, v) in enumerate(zip(titles, values))]
    pairs = r.items(key)
    for j, pair in enumerate(pairs):
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
            raise r.error(f"{key}[{j}]", "a [title, value] pair", pair)
    return [(t, v, f"{key}[{j}][1]") for j, (t, v) in enumerate(pairs)]


def _popqa_rows(rows: list[Row]) -> list[Question]:
    ids, out = Unique("id"), []
    for r in rows:
        qid = ids.add(str(r.get("id")), r)
        answers = r.get("possible_answers")  # a JSON list in the release's TSV
        if isinstance(answers, str):
            answers = r.parsed("possible_answers", json.loads, "a JSON list of strings")
        answers = strings(answers, r.where, "possible_answers", nonempty=True)
        extra = {"subject": r.get("subj"), "s_pop": r.parsed("s_pop", int, "an integer")}
        out.append(r.build(Question, f"popqa-{qid}", r.text("question"), answers,
                           str(r.get("prop")), "test", "popqa", (), extra))
    return out


def _triviaqa_read(path: Path) -> list[Row]:
    document = json_document(path)
    if not isinstance(document, dict) or "Data" not in document:
        raise DataError(f"{path}: expected an object with a 'Data' list of questions, got "
                        f"{type(document).__name__}")
    return array_rows(document["Data"], str(path), "Data")


def _triviaqa_rows(rows: list[Row]) -> list[Question]:
    ids, out = Unique("question id"), []
    for r in rows:
        hub = "answer" in r  # the hub's lower-case layout, else the release's capitalised one
        answer = r.sub("answer" if hub else "Answer")
        value = answer.text("value" if hub else "Value")
        aliases = answer.strings("aliases" if hub else "Aliases", default=())
        qid = ids.add(r.text("question_id" if hub else "QuestionId"), r)
        out.append(r.build(Question, qid, r.text("question" if hub else "Question"),
                           tuple(dict.fromkeys([value, *aliases])), "", "test", "triviaqa"))
    return out


_SPECS: dict[str, _Spec] = {
    "nq_open": _Spec("google-research-datasets/nq_open", None, "validation",
                     ("NQ-open.dev.jsonl",), lambda path: jsonl_rows(path, ("question", "answer")),
                     _nq_rows, _nq_rows),
    "truthfulqa": _Spec("truthfulqa/truthful_qa", "generation", "validation",
                        ("TruthfulQA.csv",),
                        lambda path: table_rows(path, ("Category", "Question", "Best Answer",
                                                       "Correct Answers", "Incorrect Answers")),
                        _truthfulqa_mirror, _truthfulqa_hub),
    "simpleqa": _Spec("basicv8vc/SimpleQA", None, "test",
                      ("simple_qa_test_set.csv", "simple_qa_test_set.en.csv"),
                      lambda path: table_rows(path, ("metadata", "problem", "answer")),
                      _simpleqa_rows, _simpleqa_rows),
    "hotpotqa": _Spec("hotpotqa/hotpot_qa", "distractor", "validation",
                      ("hotpot_dev_distractor_v1.json", "hotpot_dev_distractor_488.jsonl"),
                      _hotpot_read, _hotpot_rows, _hotpot_rows),
    "popqa": _Spec("akariasai/PopQA", None, "test", ("popQA.tsv",),
                   lambda path: table_rows(path, ("id", "question", "possible_answers", "prop",
                                                  "subj", "s_pop"), delimiter="\t"),
                   _popqa_rows, _popqa_rows),
    "triviaqa": _Spec("mandarjoshi/trivia_qa", "unfiltered.nocontext", "validation",
                      ("unfiltered-web-dev.json",), _triviaqa_read, _triviaqa_rows,
                      _triviaqa_rows),
}
DATASETS = (*_SPECS, "nq_open_oracle")


def _mirror_file(name: str, spec: _Spec) -> Path | None:
    root = data_dir()
    if root is None:
        return None
    for filename in spec.mirror_files:
        if (root / name / filename).exists():
            return root / name / filename
    return None


def _missing_message(name: str, spec: _Spec) -> str:
    return (f"dataset {name!r} is not available: the machine is offline (or source='mirror') and "
            f"no mirror file {list(spec.mirror_files)} was found under "
            f"{data_dir() or '$ROBUSTKIT_DATA_DIR'}/{name}/. Provide a mirror of the public "
            f"release there (set ROBUSTKIT_DATA_DIR), or go online to read hub id {spec.hub_id!r}")


def _records_fingerprint(records: list) -> str:
    """sha256 of the parsed records themselves: what a run read, whatever the hub's layout."""
    from dataclasses import asdict

    rows = [{k: v for k, v in asdict(r).items() if k != "extra"} for r in records]
    return hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."
