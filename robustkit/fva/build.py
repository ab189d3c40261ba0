"""FVA-RAG's methods by name: FVA-RAG and the baselines its paper compares it with.

    fva = build("fva-rag", cfg)                                 # over the scale's corpus
    crag = build("crag", cfg, corpus=cache, retriever=dense)    # over one of FVA-RAG's frozen caches

Every method reads ``cfg.k`` passages per retrieval call (at most two calls a question) with the
scale's reader, so notebook 05's comparison is fair. ``robustkit.registry`` builds any method of the
kit by id through this folder's ``build``.
"""
from __future__ import annotations

from robustkit import resources
from robustkit.adaptive import CRAG, SelfRAG, calibrate_thresholds
from robustkit.baselines import FirstStage, RerankedRAG
from robustkit.fva import train
from robustkit.fva.config import FVAConfig
from robustkit.fva.method import FVARAG

IDS = ("dense", "self-rag", "crag", "fva-rag")  # dense: the paper's vanilla RAG, k passages


def build(name: str, cfg: FVAConfig, *, corpus=None, retriever=None, generator=None, adjudicator=None,
          calibration: list[str] | None = None):
    """One of ``IDS`` with ``cfg``'s knobs, over the scale's corpus and dense retriever — or over
    ``corpus`` searched by ``retriever`` — read by ``generator`` (default: the scale's reader).

    FVA-RAG decides with ``adjudicator`` (default ``train.adjudicator(cfg)``, trained once); CRAG
    grades retrieval with ``train.crag_evaluator(cfg)`` and sets its two thresholds on
    ``calibration``, questions of the kind it will be asked and never evaluated (default: the
    scale's training questions; FVA-RAG's own run passes its training misconceptions).
    """
    FVAConfig.check_build(name, IDS, cfg)
    corpus, retriever = resources.searched(cfg.scale, corpus, retriever)
    generator = generator or resources.generator_for(cfg.scale)
    words = cfg.max_words or cfg.scale.max_passage_words
    if name == "dense":
        return RerankedRAG(retriever, FirstStage("dense"), generator, corpus, m=cfg.k, c=cfg.k, max_words=words,
                           name=name)
    if name == "self-rag":
        return SelfRAG(retriever, generator, corpus, k=cfg.k, max_words=words)
    if name == "crag":
        grader = train.crag_evaluator(cfg)
        asked = calibration if calibration is not None else [q.text for q in resources.train_questions(cfg.scale)]
        lower, upper = calibrate_thresholds(retriever, corpus, asked, cfg.k, evaluator=grader)
        return CRAG(retriever, generator, corpus, upper=upper, lower=lower, evaluator=grader, k=cfg.k,
                    max_words=words)
    return FVARAG(retriever, generator, corpus, adjudicator or train.adjudicator(cfg), k=cfg.k,
                  m=cfg.m_kill_queries, tau=cfg.tau, max_words=words, draft_tokens=cfg.draft_tokens,
                  kill_tokens=cfg.kill_tokens, revision_tokens=cfg.revision_tokens)
