"""FVA-RAG's trained and calibrated parts: the NLI adjudicator that decides a falsification, and
CRAG's retrieval evaluator with the questions its thresholds are set on (FVA-RAG's baselines).

    judge = adjudicator(cfg)         # the NLI cross-encoder (trained once, reused), or answer-conflict
    grader = crag_evaluator(cfg)     # the kit's relevance cross-encoder, or None for the dense cosine

Each trains on training splits only (SNLI, data/mini's or NQ-open's training questions), never on an
evaluated question, and is reused from ``runs/<scale>/`` once built.
"""
from __future__ import annotations

from robustkit import memo
from robustkit.data import mini_misconceptions
from robustkit.fva.config import FVAConfig, settings
from robustkit.judges import AnswerConflict, NLIAdjudicator


def calibration_questions() -> list[str]:
    """CRAG's threshold questions: data/mini's *training* misconception questions (never evaluated)."""
    return [m.text for m in mini_misconceptions("train")]


def adjudicator(cfg: FVAConfig | None = None):
    """The adjudicator ``cfg.adjudicator`` names; prints which model decides."""
    cfg = settings(cfg)
    if cfg.adjudicator == "answer-conflict":
        print("[robustkit] FVA adjudicator: answer-conflict (deterministic lexical check)")
        return AnswerConflict()
    from robustkit.nli import nli_model

    return NLIAdjudicator(nli_model(cfg.scale, progress=False))


@memo.cached(4, per_runs_folder=True)  # one scorer per config, and one line saying which
def crag_evaluator(cfg: FVAConfig | None = None):
    """CRAG's retrieval evaluator ``cfg.crag_evaluator`` names: the kit's relevance
    cross-encoder (trained on demand from a training split, never on evaluated questions) or None
    for the dense cosine. Prints which one grades."""
    cfg = settings(cfg)
    if cfg.crag_evaluator == "dense-cosine":
        print("[robustkit] CRAG evaluator: the dense retriever's question-passage cosine")
        return None
    from robustkit.crossencoder.relevance import describe, recipe, relevance_scorer

    chosen = recipe(cfg.scale)
    print(f"[robustkit] CRAG evaluator: {describe(cfg.scale, chosen)}")
    return relevance_scorer(cfg.scale, chosen, progress=False)


def crag_evaluator_identity(cfg: FVAConfig) -> dict | str:
    """What a manifest records of CRAG's evaluator; it only reads (``rk.NotStaged`` when the
    kit's relevance model is not trained yet: ``crag_evaluator`` trains it)."""
    if cfg.crag_evaluator == "dense-cosine":
        return "dense-cosine"
    from robustkit.crossencoder.relevance import identity

    return identity(cfg.scale)
