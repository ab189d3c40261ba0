"""What FVA-RAG is evaluated on: the questions and the two frozen corpora of each dataset, and
where its runs go.

    sets = rk.fva.eval_sets(cfg)     # which questions over which two frozen corpora
    rk.fva.describe(cfg)             # one row per (dataset, cache): questions, passages, checksum

The two caches follow the paper: **A** is the base corpus, **B** adds counter-evidence. For
TruthfulQA they are the kit's frozen statement corpora (``rk.data.corpus("truthfulqa")`` and
``"truthfulqa_enriched"``); for data/mini's misconception questions, A is data/mini without its
debunking passages and B is all of data/mini.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from robustkit import memo, resources
from robustkit.config import runs_dir
from robustkit.data import Corpus, Misconception, corpus, load, mini_corpus, mini_fingerprint, mini_misconceptions
from robustkit.fva.config import FVAConfig, settings


# the paper's five TruthfulQA categories; every other category is pooled as "other"
PAPER_CATEGORIES = ("Myths and Fairytales", "Paranormal", "Superstitions", "Fiction", "Health")


@dataclass
class EvalSet:
    name: str
    items: list[Misconception]
    caches: dict[str, Corpus]  # "A" (base) and "B" (counter-evidence enriched)
    fingerprint: str


def run_dir(cfg: FVAConfig) -> Path:
    """Where FVA-RAG's artifacts live: ``runs/<scale>/fva/``."""
    path = runs_dir(FVAConfig.require(cfg).scale) / "fva"
    path.mkdir(parents=True, exist_ok=True)
    return path


def eval_sets(cfg: FVAConfig | None = None) -> list[EvalSet]:
    """The evaluated questions: TruthfulQA (all 817, or a seeded sample stratified over the paper's
    categories at tiny), and at tiny also data/mini's held-out misconception questions."""
    return _eval_sets(settings(cfg))


@memo.cached(4)  # the run log, the run, the notebook's tables all ask: load and build once
def _eval_sets(cfg: FVAConfig) -> list[EvalSet]:
    truthfulqa = load("truthfulqa")
    items = stratified_sample(truthfulqa.records, cfg.n_truthfulqa, cfg.scale.seed)
    sets = [EvalSet("truthfulqa", items, {"A": corpus("truthfulqa"), "B": corpus("truthfulqa_enriched")},
                    truthfulqa.fingerprint)]
    if cfg.scale.dataset == "mini":
        full = mini_corpus()
        base = Corpus([p for p in full if p.kind != "debunk"], "mini_base")
        held_out = resources.sample(mini_misconceptions("test"), cfg.n_mini, cfg.scale.seed)
        sets.insert(0, EvalSet("mini", held_out, {"A": base, "B": full}, mini_fingerprint()))
    return sets


def corpora(cfg: FVAConfig | None = None) -> dict[tuple[str, str], Corpus]:
    """(dataset, cache) → its frozen corpus, for looking up the passages a run cites."""
    return {(s.name, cache): c for s in eval_sets(cfg) for cache, c in s.caches.items()}


def describe(cfg: FVAConfig | None = None) -> pd.DataFrame:
    """One row per (dataset, cache): questions, passages and the corpus checksum."""
    return pd.DataFrame([{"dataset": s.name, "cache": cache, "questions": len(s.items), "corpus": c.name,
                          "passages": len(c), "sha256": c.checksum[:12]}
                         for s in eval_sets(cfg) for cache, c in s.caches.items()])


def stratified_sample(items: list[Misconception], n: int, seed: int) -> list[Misconception]:
    """``n`` items, as equal a share as each stratum allows from each of the paper's five
    categories and "other" (all when n is 0), drawn with ``seed``, in id order."""
    if not n or n >= len(items):
        return list(items)
    strata: dict[str, list] = {}
    for item in items:
        strata.setdefault(stratum(item.category), []).append(item)
    rng, chosen = random.Random(seed), []
    pools = {name: rng.sample(pool, len(pool)) for name, pool in sorted(strata.items())}
    while len(chosen) < n:  # round-robin over strata until n are drawn
        for pool in pools.values():
            if pool and len(chosen) < n:
                chosen.append(pool.pop())
    return sorted(chosen, key=lambda item: item.id)


def stratum(category: str) -> str:
    return category if category in PAPER_CATEGORIES else "other"


def queries(ev: EvalSet, cache: str) -> pd.DataFrame:
    """The queries table of one dataset and cache: each question once, its correct answers as the
    gold ``answers``, its incorrect ones, category and stratum carried along (and recorded in
    the results' manifests: other references are other results)."""
    return pd.DataFrame([{"query_id": i.id, "question_id": i.id, "query": i.text, "answers": list(i.correct_answers),
                          "incorrect_answers": list(i.incorrect_answers), "dataset": ev.name, "cache": cache,
                          "category": i.category, "stratum": stratum(i.category)} for i in ev.items])
