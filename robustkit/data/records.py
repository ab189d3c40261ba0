"""Record types, answer normalisation and strict file readers shared by every data tier.

Answer normalisation follows the SQuAD / NQ-open evaluation script (lower-case, drop
punctuation and the articles a/an/the, collapse whitespace) and also folds diacritics, since
public benchmarks spell one name both ways ("Leoš Janáček", "Leos Janacek").
"""
from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import re
import string
import unicodedata
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

PERTURBATION_TYPES = ("false_premise", "confirmation_bias", "topical_distraction")


class DataError(ValueError):
    """A malformed or inconsistent data file; the message names file, line and field."""


@dataclass(frozen=True)
class Passage:
    id: str
    title: str
    text: str
    kind: str = ""  # gold | false_premise | confirmation_bias | distractor | myth | debunk | support

    def __post_init__(self):
        _check_text(self, "id", "title", "text", "kind")
        _require(self, "id")

    @property
    def content(self) -> str:
        """What retrievers and readers see: title and text."""
        return f"{self.title}. {self.text}" if self.title else self.text


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    answers: tuple[str, ...]  # gold answer first, then aliases
    answer_type: str = ""
    split: str = ""
    domain: str = ""
    gold_ids: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self):
        _check_text(self, "id", "text", "answer_type", "split", "domain")
        _require(self, "id", "text")
        _check_strings(self, "answers", "gold_ids")
        if not self.answers:
            raise ValueError(f"question {self.id!r} has no answers")
        blank = [i for i, a in enumerate(self.answers) if not a.strip()]
        if blank:  # an empty gold answer would make the empty reply correct
            raise ValueError(f"question {self.id!r}: answer {blank[0]} is empty ({list(self.answers)!r:.80}); "
                             "drop it, or the question if it has no other answer")

    @property
    def answer(self) -> str:
        return self.answers[0]


@dataclass(frozen=True)
class Rewrite:
    """A biased version of a question (one perturbation x̃ of x)."""

    question_id: str
    type: str  # one of PERTURBATION_TYPES
    text: str
    wrong_entity: str | None = None  # the belief it states: y′ (type I), a template's false year or count (II)
    subtemplate: str | None = None  # type II: historical_temporal_existential | quantitative_relational_causal
    premise_ids: tuple[str, ...] = ()  # passages that match the rewrite's premise
    source: str = "hand-written"  # hand-written | llm | template

    def __post_init__(self):
        _check_text(self, "question_id", "type", "text", "source")
        _require(self, "question_id", "text")
        _check_strings(self, "premise_ids")
        if self.type not in PERTURBATION_TYPES:
            raise ValueError(f"rewrite of {self.question_id!r}: unknown perturbation type "
                             f"{self.type!r}; expected one of {list(PERTURBATION_TYPES)}")


@dataclass(frozen=True)
class Misconception:
    """A TruthfulQA-style question: the popular answer is wrong."""

    id: str
    text: str
    category: str
    best_answer: str
    correct_answers: tuple[str, ...]
    incorrect_answers: tuple[str, ...]
    split: str = ""
    myth_ids: tuple[str, ...] = ()
    debunk_ids: tuple[str, ...] = ()

    def __post_init__(self):
        _check_text(self, "id", "text", "category", "best_answer", "split")
        _require(self, "id", "text")
        _check_strings(self, "correct_answers", "incorrect_answers", "myth_ids", "debunk_ids")


def _check_text(record, *names: str) -> None:
    for name in names:
        value = getattr(record, name)
        if not isinstance(value, str):
            raise TypeError(f"{type(record).__name__}.{name} must be a str, got "
                            f"{type(value).__name__} {value!r:.40}")


def _require(record, *names: str) -> None:
    for name in names:
        if not getattr(record, name).strip():
            raise ValueError(f"{type(record).__name__}.{name} is empty "
                             f"(record {getattr(record, 'id', None) or record!r:.60})")


def _check_strings(record, *names: str) -> None:
    """Sequence-of-string fields: a bare string would be iterated as its characters (answers
    'O', 'c', 't', ... would make any reply containing an 'o' correct), so it is refused; lists
    are accepted and stored as tuples, the records being frozen and hashable."""
    for name in names:
        value = getattr(record, name)
        if isinstance(value, (str, bytes)) or not isinstance(value, (tuple, list)):
            raise TypeError(f"{type(record).__name__}.{name} must be a list or tuple of strings, "
                            f"got {type(value).__name__} {value!r:.40}")
        bad = [v for v in value if not isinstance(v, str)]
        if bad:
            raise TypeError(f"{type(record).__name__}.{name} must hold strings only, got {bad[0]!r:.40}")
        object.__setattr__(record, name, tuple(value))


def normalize_answer(text: str) -> str:
    """SQuAD normalisation — lower-case, no punctuation, no articles, single spaces — with
    diacritics folded as a reader reads them: "Gaudí" is "gaudi", "Jørn" "jorn", "Łódź" "lodz"."""
    text = fold_diacritics(text.lower())
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def fold_diacritics(text: str) -> str:
    """Drop accents (Unicode decomposition, combining marks removed) and spell the letters that do
    not decompose (ø, ł, đ, ß, æ, œ, þ, ð, ı) in plain Latin, as English-language gold answers do."""
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFKD", text.translate(_UNDECOMPOSED))
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def contains_answer(text: str, answers: Iterable[str]) -> bool:
    """True when any normalised answer occurs in the normalised text as whole words.

    Both sides are compared twice: with SQuAD normalisation alone, so whatever exact match accepts
    is contained too ("Oceans Eleven" / "Ocean's Eleven"), and with possessives dropped after
    lower-casing, so "Shakespeare's plays" contains "Shakespeare" and "NASA'S budget" "NASA".
    """
    answers = list(answers)
    for normalise in (normalize_answer, _normalize_without_possessives):
        haystack = f" {normalise(text)} "
        if any(f" {needle} " in haystack for needle in map(normalise, answers) if needle):
            return True
    return False


def _normalize_without_possessives(text: str) -> str:
    return normalize_answer(_POSSESSIVE.sub("", text.lower()))  # lower first: "NASA'S" -> "nasa"


def has_answer(passage: Passage | str, answers: Iterable[str]) -> bool:
    """Does the passage (title and text) state one of the answers?"""
    text = passage.content if isinstance(passage, Passage) else passage
    return contains_answer(text, answers)


def read_jsonl(path: str | Path, required: Sequence[str] = ()) -> list[dict]:
    """Read a JSONL (or .jsonl.gz) file; every row must be an object with the ``required`` keys."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    rows = []
    for line_no, line in enumerate(_open_text(path), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(f"{path}:{line_no}: malformed JSON ({err.msg})") from None
        if not isinstance(row, dict):
            raise DataError(f"{path}:{line_no}: expected a JSON object, got {type(row).__name__}")
        missing = [key for key in required if key not in row]
        if missing:
            raise DataError(f"{path}:{line_no}: missing field(s) {missing}")
        rows.append(row)
    return rows


def read_csv(path: str | Path, required: Sequence[str] = ()) -> list[dict]:
    """Read a CSV file with a header; rows with missing or empty ``required`` cells are rejected."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    with io.StringIO(decoded_text(path, "utf-8-sig"), newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [key for key in required if key not in (reader.fieldnames or [])]
        if missing:
            raise DataError(f"{path}:1: header lacks column(s) {missing}")
        rows = []
        for row in reader:
            empty = [key for key in required if not (row.get(key) or "").strip()]
            if empty:
                raise DataError(f"{path}:{reader.line_num}: empty value in column(s) {empty}")
            rows.append(row)
    return rows


def write_jsonl(path: str | Path, rows: Iterable[dict]) -> None:
    """Write rows atomically: a crash leaves either the old file or the complete new one."""
    from robustkit.artifacts import atomic_write_text

    atomic_write_text(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def sha256_files(paths: Iterable[str | Path]) -> str:
    """One fingerprint over several files (names and bytes), for run manifests."""
    digest = hashlib.sha256()
    for path in sorted(Path(p) for p in paths):
        digest.update(path.name.encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def decoded_text(path: str | Path, encoding: str = "utf-8") -> str:
    """A file's text (``.gz`` decompressed); a byte that is not UTF-8 is a DataError naming its
    line, where Python's own error gives only a byte offset into the whole file."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    data = path.read_bytes()
    if path.suffix == ".gz":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as err:  # not gzip, or cut short
            raise DataError(f"{path}: not a complete gzip file ({err})") from None
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - data.rfind(b"\n", 0, err.start)  # 1-based, in bytes
        raise DataError(f"{path}:{line}: byte {data[err.start]:#04x} (byte {column} of the line) "
                        "is not UTF-8; save the file as UTF-8") from None


def _open_text(path: Path) -> Iterator[str]:
    yield from io.StringIO(decoded_text(path), newline=None)


_POSSESSIVE = re.compile(r"['’]s\b")
_UNDECOMPOSED = str.maketrans({"ø": "o", "Ø": "O", "ł": "l", "Ł": "L", "đ": "d", "Đ": "D", "ß": "ss",
                               "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE", "þ": "th", "Þ": "Th",
                               "ð": "d", "Ð": "D", "ı": "i"})
_PUNCT = set(string.punctuation) | {"‘", "’", "“", "”", "–", "—"}


class Corpus:
    """An ordered, id-addressable set of passages with a content checksum."""

    def __init__(self, passages: Sequence[Passage], name: str = "corpus"):
        if not passages:
            raise DataError(f"corpus {name!r} is empty: retrieval needs at least one passage")
        self.name = name
        self.passages = list(passages)
        self._index = {p.id: i for i, p in enumerate(self.passages)}
        if len(self._index) != len(self.passages):
            seen, dupes = set(), set()
            for p in self.passages:
                (dupes if p.id in seen else seen).add(p.id)
            raise DataError(f"corpus {name!r} has duplicate passage ids: {sorted(dupes)[:5]}")
        self.checksum = hashlib.sha256(
            "\n".join(f"{p.id}\t{p.title}\t{p.text}" for p in self.passages).encode()).hexdigest()

    def __len__(self) -> int:
        return len(self.passages)

    def __iter__(self) -> Iterator[Passage]:
        return iter(self.passages)

    def __contains__(self, passage_id: str) -> bool:
        return passage_id in self._index

    def __getitem__(self, passage_id: str) -> Passage:
        try:
            return self.passages[self._index[passage_id]]
        except KeyError:
            raise KeyError(f"passage id {passage_id!r} is not in corpus {self.name!r}") from None

    def position(self, passage_id: str) -> int:
        return self._index[passage_id]

    def identity(self) -> dict:
        """What a manifest records of the corpus: its name and content checksum."""
        return {"corpus": self.name, "sha256": self.checksum}

    def __repr__(self) -> str:
        return f"Corpus({self.name!r}, {len(self)} passages, sha256={self.checksum[:12]})"
