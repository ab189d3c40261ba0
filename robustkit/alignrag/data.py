"""What AlignRAG is evaluated on: the in-domain set its critics train beside and the
out-of-domain one, and where its runs go.

    sets = rk.alignrag.eval_sets(cfg)   # {"in-domain": ..., "out-of-domain": ...}
    rk.alignrag.describe(cfg)           # one row per dataset: domain, questions, corpus, checksum

In-domain: data/mini's factual questions (tiny) or NQ-open over the oracle corpus (small);
out-of-domain: data/mini's two-hop questions or HotpotQA with its own paragraphs. The critics
train on in-domain training questions only, never on an evaluated one.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from robustkit.alignrag.config import AlignRAGConfig, settings
from robustkit.config import runs_dir
from robustkit.qa_sets import QASet, short_answer_sets


def run_dir(cfg: AlignRAGConfig) -> Path:
    """Where AlignRAG's artifacts live: ``runs/<scale>/alignrag/``."""
    path = runs_dir(AlignRAGConfig.require(cfg).scale) / "alignrag"
    path.mkdir(parents=True, exist_ok=True)
    return path


def eval_sets(cfg: AlignRAGConfig | None = None) -> dict[str, QASet]:
    """The in-domain set (factual: data/mini's or NQ-open's) and the out-of-domain one (two-hop:
    data/mini's or HotpotQA's), by domain. Only the in-domain set's training questions are used."""
    cfg = settings(cfg)
    sets = short_answer_sets(cfg.scale, n_multihop=cfg.n_multihop, n_factual=cfg.n_factual,
                             n_hotpotqa=cfg.n_hotpotqa, n_nq=cfg.n_nq, n_train=cfg.n_train)
    return {("out-of-domain" if s.multihop else "in-domain"): s for s in sets}


def describe(cfg: AlignRAGConfig | None = None) -> pd.DataFrame:
    """One row per dataset: its domain, evaluated and training questions, corpus and checksum."""
    return pd.DataFrame([{"dataset": s.name, "domain": domain, "questions": len(s.questions),
                          "training questions": len(s.train) if domain == "in-domain" else 0,
                          "corpus": s.corpus.name, "passages": len(s.corpus), "retriever": s.retriever.name,
                          "sha256": s.corpus.checksum[:12]} for domain, s in eval_sets(cfg).items()])


def queries(qaset, domain: str) -> pd.DataFrame:
    """One dataset's queries table: each evaluated question once, with its gold answers, dataset
    and domain."""
    return pd.DataFrame([{"query_id": q.id, "question_id": q.id, "query": q.text, "answers": list(q.answers),
                          "dataset": qaset.name, "domain": domain} for q in qaset.questions])
