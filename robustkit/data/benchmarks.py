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

from robustkit.config import REPO_ROOT, is_offline
from robustkit.data.records import (Corpus, DataError, Misconception, Passage, Question,
                                    read_csv, read_jsonl, sha256_files)


@dataclass
class Dataset:
    name: str
    split: str
    records: list
    source: str  # "hub:<id>" or the mirror files
    fingerprint: str

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
    parse_mirror: Callable[[Path], list]
    parse_hub: Callable[[object], list]


def data_dir() -> Path | None:
    """The local mirror folder, if there is one."""
    env = os.environ.get("ROBUSTKIT_DATA_DIR")
    if env:
        return Path(env)
    default = REPO_ROOT.parent / "shared" / "datasets"
    return default if default.is_dir() else None


def load(name: str, split: str = "test", source: str = "auto") -> Dataset:
    """Load a benchmark as kit records.

    Args:
        name: one of ``DATASETS`` (nq_open, nq_open_oracle, truthfulqa, simpleqa, hotpotqa,
            popqa, triviaqa).
        split: "test" for the evaluation split; for ``nq_open_oracle`` "train" or "test" (a
            deterministic 80/20 split of its questions) or "all".
        source: "mirror", "hub" or "auto" (mirror if present, else hub, else a clear error).
    """
    if name == "nq_open_oracle":
        return _oracle_questions(split)
    if name not in _SPECS:
        raise ValueError(f"unknown dataset {name!r}; expected one of {sorted(DATASETS)}")
    if source not in {"auto", "mirror", "hub"}:
        raise ValueError(f"unknown source {source!r}; expected 'auto', 'mirror' or 'hub'")
    spec = _SPECS[name]
    mirror = _mirror_file(name, spec)
    if source == "mirror" or (source == "auto" and mirror):
        if not mirror:
            raise DataError(_missing_message(name, spec))
        return Dataset(name, split, spec.parse_mirror(mirror), str(mirror), sha256_files([mirror]))
    if is_offline():
        raise DataError(_missing_message(name, spec))
    from datasets import load_dataset

    rows = load_dataset(spec.hub_id, spec.hub_config, split=spec.hub_split)
    records = spec.parse_hub(rows)
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
    if split not in {"train", "test", "all"}:
        raise ValueError(f"unknown split {split!r} for nq_open_oracle; expected train/test/all")
    _, questions = _oracle()
    chosen = [q for q in questions if split == "all" or q.split == split]
    path = _oracle_path()
    return Dataset("nq_open_oracle", split, chosen, str(path), sha256_files([path]))


def _oracle() -> tuple[list[Passage], list[Question]]:
    path = _oracle_path()
    passages: dict[str, Passage] = {}
    questions = []
    for n, row in enumerate(read_jsonl(path, ("question", "answers", "ctxs"))):
        ctx = row["ctxs"][0]
        pid = "nqo-" + hashlib.sha1(f"{ctx['title']}\n{ctx['text']}".encode()).hexdigest()[:12]
        passages.setdefault(pid, Passage(pid, ctx["title"], " ".join(ctx["text"].split()), "gold"))
        qid = f"nqo-q{n:04d}"
        # deterministic split by question text: stable whatever the file order
        split = "test" if int(hashlib.sha1(row["question"].encode()).hexdigest(), 16) % 5 == 0 else "train"
        questions.append(Question(qid, row["question"], tuple(row["answers"]), "", split,
                                  "nq_open", (pid,)))
    return list(passages.values()), questions


def _oracle_path() -> Path:
    root = data_dir()
    path = root / "nq_open_oracle" / "nq-open-oracle.jsonl.gz" if root else None
    if not path or not path.exists():
        raise DataError("dataset 'nq_open_oracle' (nelson-liu/lost-in-the-middle qa_data/"
                        "nq-open-oracle.jsonl.gz) has no hub copy; put the file under "
                        "$ROBUSTKIT_DATA_DIR/nq_open_oracle/")
    return path


# --- parsers, one per public format ----------------------------------------------------------

def _nq_mirror(path: Path) -> list[Question]:
    return [Question(f"nq-{i:04d}", r["question"], tuple(r["answer"]), split="test", domain="nq_open")
            for i, r in enumerate(read_jsonl(path, ("question", "answer")))]


def _nq_hub(rows) -> list[Question]:
    return [Question(f"nq-{i:04d}", r["question"], tuple(r["answer"]), split="test", domain="nq_open")
            for i, r in enumerate(rows)]


def _split_answers(cell: str) -> tuple[str, ...]:
    return tuple(a.strip() for a in cell.split(";") if a.strip())


def _truthfulqa_mirror(path: Path) -> list[Misconception]:
    rows = read_csv(path, ("Category", "Question", "Best Answer", "Correct Answers",
                           "Incorrect Answers"))
    return [Misconception(f"tqa-{i:03d}", r["Question"], r["Category"], r["Best Answer"],
                          _split_answers(r["Correct Answers"]), _split_answers(r["Incorrect Answers"]))
            for i, r in enumerate(rows)]


def _truthfulqa_hub(rows) -> list[Misconception]:
    return [Misconception(f"tqa-{i:03d}", r["question"], r["category"], r["best_answer"],
                          tuple(r["correct_answers"]), tuple(r["incorrect_answers"]))
            for i, r in enumerate(rows)]


def _simpleqa_rows(rows) -> list[Question]:
    out = []
    for i, r in enumerate(rows):
        meta = r["metadata"]
        meta = ast.literal_eval(meta) if isinstance(meta, str) else meta
        out.append(Question(f"sqa-{i:04d}", r["problem"], (r["answer"],),
                            str(meta.get("answer_type", "")), "test", str(meta.get("topic", ""))))
    return out


def _simpleqa_mirror(path: Path) -> list[Question]:
    return _simpleqa_rows(read_csv(path, ("metadata", "problem", "answer")))


def _hotpot_rows(rows, titles_key: str) -> list[Question]:
    out = []
    for r in rows:
        context = r["context"]
        if isinstance(context, dict):  # hub layout: {"title": [...], "sentences": [[...]]}
            context = list(zip(context["title"], context["sentences"]))
        paragraphs = [Passage(f"{r['id']}-{j}", title, " ".join(s.strip() for s in sents))
                      for j, (title, sents) in enumerate(context)]
        facts = r[titles_key]
        gold_titles = set(facts["title"] if isinstance(facts, dict) else (t for t, _ in facts))
        gold = tuple(p.id for p in paragraphs if p.title in gold_titles)
        out.append(Question(r["id"], r["question"], (r["answer"],), "", "test", "hotpotqa", gold,
                            {"hop_type": r["type"], "level": r.get("level"),
                             "paragraphs": paragraphs}))
    return out


def _hotpot_mirror(path: Path) -> list[Question]:
    rows = json.loads(path.read_text(encoding="utf-8"))
    for r in rows:
        r["id"] = r.pop("_id", r.get("id"))
    return _hotpot_rows(rows, "supporting_facts")


def _popqa_rows(rows) -> list[Question]:
    out = []
    for r in rows:
        answers = r["possible_answers"]
        answers = json.loads(answers) if isinstance(answers, str) else answers
        out.append(Question(f"popqa-{r['id']}", r["question"], tuple(answers), str(r["prop"]),
                            "test", "popqa", (),
                            {"subject": r["subj"], "s_pop": int(r["s_pop"])}))
    return out


def _popqa_mirror(path: Path) -> list[Question]:
    import csv

    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    missing = {"id", "question", "possible_answers", "prop", "subj", "s_pop"} - set(rows[0] if rows else {})
    if missing:
        raise DataError(f"{path}:1: header lacks column(s) {sorted(missing)}")
    return _popqa_rows(rows)


def _triviaqa_rows(rows) -> list[Question]:
    out = []
    for r in rows:
        answer = r["answer"] if "answer" in r else r["Answer"]
        value = answer.get("value", answer.get("Value"))
        aliases = answer.get("aliases", answer.get("Aliases", []))
        qid = r.get("question_id", r.get("QuestionId"))
        text = r.get("question", r.get("Question"))
        out.append(Question(qid, text, tuple(dict.fromkeys([value, *aliases])), "", "test",
                            "triviaqa"))
    return out


def _triviaqa_mirror(path: Path) -> list[Question]:
    return _triviaqa_rows(json.loads(path.read_text(encoding="utf-8"))["Data"])


_SPECS: dict[str, _Spec] = {
    "nq_open": _Spec("google-research-datasets/nq_open", None, "validation",
                     ("NQ-open.dev.jsonl",), _nq_mirror, _nq_hub),
    "truthfulqa": _Spec("truthfulqa/truthful_qa", "generation", "validation",
                        ("TruthfulQA.csv",), _truthfulqa_mirror, _truthfulqa_hub),
    "simpleqa": _Spec("basicv8vc/SimpleQA", None, "test",
                      ("simple_qa_test_set.csv", "simple_qa_test_set.en.csv"), _simpleqa_mirror,
                      _simpleqa_rows),
    "hotpotqa": _Spec("hotpotqa/hotpot_qa", "distractor", "validation",
                      ("hotpot_dev_distractor_v1.json",), _hotpot_mirror,
                      lambda rows: _hotpot_rows(rows, "supporting_facts")),
    "popqa": _Spec("akariasai/PopQA", None, "test", ("popQA.tsv",), _popqa_mirror, _popqa_rows),
    "triviaqa": _Spec("mandarjoshi/trivia_qa", "unfiltered.nocontext", "validation",
                      ("unfiltered-web-dev.json",), _triviaqa_mirror, _triviaqa_rows),
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
