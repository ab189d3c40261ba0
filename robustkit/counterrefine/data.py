"""What CounterRefine is evaluated on: the short-answer sets of the scale (two-hop first), each
with the training questions that calibrate its REVISE threshold, and where its runs go.

    sets = rk.counterrefine.eval_sets(cfg)   # which questions, over which corpus
    rk.counterrefine.describe(cfg)           # one row per dataset: questions, corpus, checksum

``tiny``: data/mini's two-hop and factual test questions over the data/mini corpus. ``small``:
HotpotQA distractor dev, each question searching only its own paragraphs (the paper's setting),
and NQ-open over the oracle corpus.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from robustkit.config import runs_dir
from robustkit.counterrefine.config import CounterRefineConfig, settings
from robustkit.qa_sets import QASet, short_answer_sets


def run_dir(cfg: CounterRefineConfig) -> Path:
    """Where CounterRefine's artifacts live: ``runs/<scale>/counterrefine/``."""
    path = runs_dir(CounterRefineConfig.require(cfg).scale) / "counterrefine"
    path.mkdir(parents=True, exist_ok=True)
    return path


def eval_sets(cfg: CounterRefineConfig | None = None) -> list[QASet]:
    """The evaluated datasets at the config's scale, each with its calibration questions (``train``)."""
    cfg = settings(cfg)
    return short_answer_sets(cfg.scale, n_multihop=cfg.n_multihop, n_factual=cfg.n_factual,
                             n_hotpotqa=cfg.n_hotpotqa, n_nq=cfg.n_nq, n_train=cfg.n_calibration)


def describe(cfg: CounterRefineConfig | None = None) -> pd.DataFrame:
    """One row per dataset: evaluated and calibration questions, the corpus and its checksum."""
    return pd.DataFrame([{"dataset": s.name, "questions": len(s.questions), "calibration": len(s.train),
                          "corpus": s.corpus.name, "passages": len(s.corpus), "retriever": s.retriever.name,
                          "sha256": s.corpus.checksum[:12]} for s in eval_sets(cfg)])
