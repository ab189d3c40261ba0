"""Natural-language inference pairs: SNLI and MultiNLI, from the mirror offline or the hub.

They train and check the kit's offline NLI adjudicator (FVA-RAG's contradiction score,
``robustkit.nli``), since no pretrained NLI model is available offline. Splits:

- ``train``: 18,000 SNLI training pairs (balanced over the three labels; the hub: all of SNLI train);
- ``snli_dev``: SNLI dev (9,842); ``mnli_dev``: MultiNLI dev, matched genres (9,815) — other
  domains than SNLI's image captions, closer to the passages an adjudicator reads.

The dev splits are disjoint from ``train``: accuracy on them is accuracy on unseen pairs.
``LABELS`` is the kit's one label order; ``label_columns`` reads a classifier's labels into it
(``models`` checks an NLI model with it, ``nli`` scores with it).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

from robustkit.config import is_offline
from robustkit.data.records import DataError, sha256_files
from robustkit.data.validate import Row, jsonl_rows

LABELS = NLI_LABELS = ("entailment", "neutral", "contradiction")
# split -> (mirror file under <data dir>/nli/, hub id, hub config, hub split)
SPLITS = {"train": ("snli_train_18k.jsonl", "stanfordnlp/snli", None, "train"),
          "snli_dev": ("snli_dev.jsonl", "stanfordnlp/snli", None, "validation"),
          "mnli_dev": ("mnli_dev_matched.jsonl", "nyu-mll/multi_nli", None, "validation_matched")}


@dataclass(frozen=True)
class NLIPair:
    """One premise/hypothesis pair with its gold label (one of ``LABELS``)."""

    premise: str
    hypothesis: str
    label: str

    def __post_init__(self):
        for name in ("premise", "hypothesis", "label"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"NLIPair.{name} must be a str, got {getattr(self, name)!r:.40}")
        if self.label not in LABELS:
            raise ValueError(f"NLIPair.label must be one of {list(LABELS)}, got {self.label!r}")


@dataclass
class NLISet:
    """The pairs of one split, where they came from and a fingerprint for run manifests."""

    split: str
    pairs: list[NLIPair]
    source: str  # the mirror file or "hub:<id>"
    fingerprint: str

    def __len__(self) -> int:
        return len(self.pairs)

    def __iter__(self):
        return iter(self.pairs)


def load_nli(split: str = "train") -> NLISet:
    """One NLI split as ``NLIPair``s: the mirror file when there is one, else the hub.

    Args:
        split: ``train``, ``snli_dev`` or ``mnli_dev``.

    Raises ``ValueError`` for an unknown split (before anything is read) and ``DataError`` for a
    malformed row (naming file and line) or a split that is neither mirrored nor reachable.
    """
    from robustkit.data.benchmarks import data_dir

    if split not in SPLITS:
        raise ValueError(f"unknown NLI split {split!r}; expected one of {sorted(SPLITS)}")
    filename, hub_id, config, hub_split = SPLITS[split]
    root = data_dir()
    path = root / "nli" / filename if root else None
    if path is not None and path.exists():
        pairs = [_pair(row) for row in jsonl_rows(path, ("premise", "hypothesis", "label"))]
        if not pairs:
            raise DataError(f"{path}: no NLI pairs")
        return NLISet(split, pairs, str(path), sha256_files([path]))
    if is_offline():
        raise DataError(f"NLI split {split!r} is not available: no mirror file {filename!r} under "
                        f"{root or '$ROBUSTKIT_DATA_DIR'}/nli/ and the machine is offline")
    from datasets import load_dataset

    names = dict(enumerate(LABELS))  # the hub's label ids 0/1/2; -1 marks a pair without gold label
    table = load_dataset(hub_id, config, split=hub_split)
    rows = [Row(f"hub:{hub_id}", f"[{i}]", {**r, "label": names.get(r["label"], r["label"])})
            for i, r in enumerate(table) if r["label"] != -1]
    pairs = [_pair(row) for row in rows]
    digest = hashlib.sha256(json.dumps([asdict(p) for p in pairs]).encode()).hexdigest()
    return NLISet(split, pairs, f"hub:{hub_id}", digest)


def label_columns(id2label: dict) -> list[int]:
    """The model's output index of each of ``LABELS``, read from its config's label names.

    ``{0: "CONTRADICTION", 1: "ENTAILMENT", 2: "NEUTRAL"}`` → ``[1, 2, 0]``. A model whose labels
    are not exactly the three NLI classes is refused: its probabilities would mean something else.
    """
    by_name = {str(name).strip().lower(): int(index) for index, name in id2label.items()}
    if len(id2label) != len(LABELS) or set(by_name) != set(LABELS):
        raise ValueError(f"the model's labels {sorted(map(str, id2label.values()))} are not the "
                         f"three NLI classes {list(LABELS)}: not a three-way NLI classifier")
    return [by_name[label] for label in LABELS]


def _pair(row: Row) -> NLIPair:
    return row.build(NLIPair, row.text("premise"), row.text("hypothesis"),
                     row.choice("label", LABELS))
