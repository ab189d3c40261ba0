"""Validator for the embedded teaching set, and the rewrite rules it shares with the adversary.

``python -m robustkit.data check data/mini`` prints counts and every violation as
``file:record-id: message``, and exits non-zero when there is one.

The rewrite rules are CoRM-RAG's perturbation constraints (§3.1): keep the information need
and answer, keep the wh-word and subject, no hedging words, no answer leak.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from robustkit.data.records import (PERTURBATION_TYPES, DataError, contains_answer,
                                    normalize_answer)
from robustkit.data.validate import decoded_text, jsonl_rows

WH_WORDS = ("how many", "how much", "how long", "how old", "how far", "how tall", "how",
            "who", "whom", "whose", "what", "when", "where", "which", "why")
HEDGE_WORDS = ("actually", "in reality", "really", "despite", "although", "though", "however",
               "but", "supposedly", "allegedly", "contrary", "mistaken", "mistakenly", "wrongly",
               "myth", "rumor", "rumour", "apparently", "so-called", "in fact")
PASSAGE_WORDS = (40, 150)
ANSWER_TYPES = ("person", "place", "date", "number", "organisation", "work", "other")


def wh_word(question: str) -> str | None:
    """The question's first wh-word (multi-word ones such as 'how many' first)."""
    text = f" {normalize_answer(question)} "
    found = [(text.find(f" {w} "), -len(w), w) for w in WH_WORDS if f" {w} " in text]
    return min(found)[2] if found else None


def hedge_words(text: str) -> list[str]:
    """Banned hedging/correction words present in ``text``."""
    low = f" {' '.join(re.findall(r'[a-z-]+', text.lower()))} "
    return [w for w in HEDGE_WORDS if f" {w} " in low]


STOPWORDS = frozenset("""a an the of in on at to for from by with and or is was were are be been
being did do does has have had it its this that these those as into about after before during
which who whom whose what when where why how many much long old far tall s""".split())


def content_tokens(text: str) -> list[str]:
    """Normalised tokens without stop words: the words that carry a question's subject."""
    return [t for t in normalize_answer(text).split() if t not in STOPWORDS]


def rewrite_checks(question: str, answers, rewrite: str, wrong_entity: str | None = None,
                   rewrite_type: str | None = None) -> dict[str, bool]:
    """CoRM-RAG's constraints on a biased rewrite, each as a named pass/fail."""
    wh = wh_word(question)
    original = content_tokens(question)
    kept = set(content_tokens(rewrite))
    checks = {
        "wh_word": wh is None or wh_word(rewrite) == wh,
        "subject_kept": not original or sum(t in kept for t in original) / len(original) >= 0.6,
        "no_hedge": not hedge_words(rewrite),
        "no_leak": not contains_answer(rewrite, answers),
    }
    if rewrite_type == "false_premise":
        checks["wrong_entity"] = bool(wrong_entity) and contains_answer(rewrite, [wrong_entity]) \
            and not contains_answer(wrong_entity, answers)
    return checks


def rewrite_violations(question: str, answers, rewrite: str, wrong_entity: str | None = None,
                       rewrite_type: str | None = None) -> list[str]:
    """Every constraint a biased rewrite breaks, as messages; an empty list means it is valid."""
    checks = rewrite_checks(question, answers, rewrite, wrong_entity, rewrite_type)
    messages = {
        "wh_word": f"wh-word {wh_word(question)!r} not kept (rewrite has {wh_word(rewrite)!r})",
        "subject_kept": "drops the question's subject (< 60% of its content words kept)",
        "no_hedge": f"hedging word(s) {hedge_words(rewrite)}",
        "no_leak": "leaks the gold answer",
        "wrong_entity": (f"wrong_entity {wrong_entity!r} is an alias of the gold answer"
                         if wrong_entity and contains_answer(wrong_entity, answers)
                         else f"type-I rewrite lacks its wrong-belief entity {wrong_entity!r}"),
    }
    return [messages[rule] for rule, ok in checks.items() if not ok]


@dataclass
class CheckReport:
    counts: dict[str, Counter] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def summary(self) -> str:
        lines = [f"{name}: " + ", ".join(f"{k}={v}" for k, v in sorted(c.items()))
                 for name, c in self.counts.items()]
        lines += [f"VIOLATION {v}" for v in self.violations]
        lines.append(f"{len(self.violations)} violation(s)")
        return "\n".join(lines)


def check_mini(root: str | Path) -> CheckReport:
    """Validate every file of a teaching-set folder (schema, references, answer rules)."""
    root = Path(root)
    report = CheckReport()
    bad = report.violations.append
    try:
        passages = _rows(root / "passages.jsonl", ("id", "title", "text", "kind"), bad)
        questions = _rows(root / "questions.jsonl", ("id", "question", "answer", "aliases",
                          "answer_type", "domain", "split", "gold_ids"), bad)
        rewrites = _rows(root / "rewrites.jsonl", ("question_id", "type", "text", "premise_ids"), bad)
        myths = _rows(root / "misconceptions.jsonl", ("id", "question", "category", "best_answer",
                      "correct_answers", "incorrect_answers", "split", "myth_ids", "debunk_ids"), bad)
        hops = _rows(root / "multihop.jsonl", ("id", "question", "answer", "aliases",
                     "answer_type", "hop_type", "split", "support_ids", "distractor_ids"), bad)
    except (DataError, FileNotFoundError) as err:
        bad(str(err))
        return report

    by_id = {}
    for p in passages:
        if p["id"] in by_id:
            bad(f"passages.jsonl:{p['id']}: duplicate passage id")
        by_id[p["id"]] = p
        words = len(p["text"].split())
        if not PASSAGE_WORDS[0] <= words <= PASSAGE_WORDS[1]:
            bad(f"passages.jsonl:{p['id']}: {words} words, expected {PASSAGE_WORDS[0]}-{PASSAGE_WORDS[1]}")

    def passage(file: str, rid: str, pid: str) -> dict | None:
        if pid not in by_id:
            bad(f"{file}:{rid}: unknown passage id {pid!r}")
        return by_id.get(pid)

    _check_ids(questions + hops + myths, bad)
    q_by_id = {q["id"]: q for q in questions}
    for q in questions:
        answers = [q["answer"], *q["aliases"]]
        _check_split_and_type(q, "questions.jsonl", bad)
        if not q["gold_ids"]:
            bad(f"questions.jsonl:{q['id']}: no gold passage")
        for pid in q["gold_ids"]:
            if (p := passage("questions.jsonl", q["id"], pid)) and not contains_answer(_content(p), answers):
                bad(f"questions.jsonl:{q['id']}: gold passage {pid} does not contain the answer")

    seen_types: dict[str, set] = {qid: set() for qid in q_by_id}
    for r in rewrites:
        rid = f"{r['question_id']}/{r['type']}"
        q = q_by_id.get(r["question_id"])
        if q is None:
            bad(f"rewrites.jsonl:{rid}: unknown question id")
            continue
        if r["type"] not in PERTURBATION_TYPES:
            bad(f"rewrites.jsonl:{rid}: unknown type, expected one of {PERTURBATION_TYPES}")
        seen_types[q["id"]].add(r["type"])
        answers = [q["answer"], *q["aliases"]]
        for problem in rewrite_violations(q["question"], answers, r["text"], r.get("wrong_entity"),
                                          r["type"]):
            bad(f"rewrites.jsonl:{rid}: {problem}")
        for pid in r["premise_ids"]:
            if (p := passage("rewrites.jsonl", rid, pid)) and contains_answer(_content(p), answers):
                bad(f"rewrites.jsonl:{rid}: premise passage {pid} contains the gold answer")
    for qid, types in seen_types.items():
        if missing := set(PERTURBATION_TYPES) - types:
            bad(f"rewrites.jsonl:{qid}: missing rewrite type(s) {sorted(missing)}")

    for m in myths:
        _check_split_and_type(m, "misconceptions.jsonl", bad, answer_type=False)
        for pid in (*m["myth_ids"], *m["debunk_ids"]):
            passage("misconceptions.jsonl", m["id"], pid)
        if not (m["myth_ids"] and m["debunk_ids"]):
            bad(f"misconceptions.jsonl:{m['id']}: needs myth and debunk passages")
    for h in hops:
        _check_split_and_type(h, "multihop.jsonl", bad)
        answers = [h["answer"], *h["aliases"]]
        support = [passage("multihop.jsonl", h["id"], pid) for pid in h["support_ids"]]
        for pid in h["distractor_ids"]:
            passage("multihop.jsonl", h["id"], pid)
        if len(h["support_ids"]) != 2:
            bad(f"multihop.jsonl:{h['id']}: expected 2 supporting passages")
        elif h["hop_type"] == "bridge" and all(support) and not contains_answer(_content(support[1]), answers):
            bad(f"multihop.jsonl:{h['id']}: second-hop passage does not contain the answer")

    _check_disjoint(questions, bad)
    _check_manifest(root, bad)
    report.counts = {
        "questions by split": Counter(q["split"] for q in questions),
        "questions by domain": Counter(q["domain"] for q in questions),
        "questions by answer type": Counter(q["answer_type"] for q in questions),
        "rewrites by type": Counter(r["type"] for r in rewrites),
        "passages by kind": Counter(p["kind"] for p in passages),
        "passages": Counter(total=len(passages)),
        "misconceptions by split": Counter(m["split"] for m in myths),
        "misconception categories": Counter(total=len({m["category"] for m in myths})),
        "multihop by type": Counter(h["hop_type"] for h in hops),
        "multihop by split": Counter(h["split"] for h in hops),
    }
    return report


def _check_manifest(root: Path, bad) -> None:
    """Every data file must match its line in SHA256SUMS (the data card's manifest)."""
    import hashlib

    manifest = root / "SHA256SUMS"
    if not manifest.exists():
        bad(f"SHA256SUMS: missing manifest in {root}")
        return
    try:
        text = decoded_text(manifest)
    except DataError as err:  # a stray non-UTF-8 byte is a finding, not a crash
        bad(str(err))
        return
    for line_no, line in enumerate(text.splitlines(), start=1):
        fields = line.split(maxsplit=1)
        if len(fields) != 2:  # blank or cut short: report it, check the other lines
            bad(f"SHA256SUMS:{line_no}: expected '<sha256>  <file name>', got {line!r}")
            continue
        digest, name = fields
        path = root / name.strip()
        if not path.exists() or hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            bad(f"SHA256SUMS:{name.strip()}: checksum mismatch (file edited without updating the "
                "manifest: run `sha256sum *.jsonl > SHA256SUMS` in data/mini)")


def _rows(path: Path, required, bad) -> list[dict]:
    """The file's rows with their fields type-checked. A wrong-typed field is reported and then
    blanked ([] or its str()), so the checks that follow report the rest instead of crashing on
    it. Malformed JSON or a non-UTF-8 byte is a DataError, which check_mini reports."""
    rows = []
    for row in jsonl_rows(path, required):
        data = row.data
        rid = data["id"] if isinstance(data.get("id"), str) else row.place  # else its line
        for key in required:
            value = data[key]
            if key.endswith(("_ids", "aliases", "answers")):
                if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                    bad(f"{path.name}:{rid}: field {key!r} must be a list of strings, "
                        f"got {value!r:.40}")
                    data[key] = []
            elif not isinstance(value, str):
                bad(f"{path.name}:{rid}: field {key!r} must be a string, got {value!r:.40}")
                data[key] = str(value)
        rows.append(data)
    return rows


def _content(p: dict) -> str:
    return f"{p['title']}. {p['text']}"


def _check_ids(records, bad) -> None:
    for rid, n in Counter(r["id"] for r in records).items():
        if n > 1:
            bad(f"records:{rid}: duplicate id ({n} times)")


def _check_split_and_type(row, file, bad, answer_type: bool = True) -> None:
    if row["split"] not in ("train", "test"):
        bad(f"{file}:{row['id']}: split {row['split']!r}, expected 'train' or 'test'")
    if answer_type and row["answer_type"] not in ANSWER_TYPES:
        bad(f"{file}:{row['id']}: answer_type {row['answer_type']!r}, expected one of {ANSWER_TYPES}")


def _check_disjoint(questions, bad) -> None:
    """Test questions must not share their gold answer with a training question."""
    train_answers = {normalize_answer(q["answer"]) for q in questions if q["split"] == "train"}
    for q in questions:
        if q["split"] == "test" and normalize_answer(q["answer"]) in train_answers:
            bad(f"questions.jsonl:{q['id']}: test answer {q['answer']!r} is also a training answer")
