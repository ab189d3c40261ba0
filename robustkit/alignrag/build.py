"""AlignRAG's methods by name: chain of thought, vanilla reasoning RAG, Self-Refine and the CDA
loop with each critic — the frozen critic LM, the critic trained without contrastive critiques,
and AlignRAG's critic trained by CFT (the paper's) and by CPO.

    aligned = build("alignrag", cfg)                              # the CFT critic, over the scale's corpus
    cpo = build("alignrag-cpo", cfg, corpus=ev.corpus, retriever=ev.retriever)

Every method shares the reader, ``cfg.k`` documents per question and the decoding budgets; the
refiners run ``cfg.iterations`` critique → refine rounds. ``robustkit.registry`` builds any method
of the kit by id through this folder's ``build``.
"""
from __future__ import annotations

from robustkit import resources
from robustkit.alignrag.config import AlignRAGConfig
from robustkit.alignrag.method import SELF, AlignRAG, ChainOfThought
from robustkit.alignrag.train import critic_generator

# refiner -> its critic: SELF (Self-Refine), "frozen" (the untrained critic LM) or a trained variant
CRITICS = {"self-refine": SELF, "frozen-critic": "frozen", "critic-no-ccs": "w/o ccs", "alignrag": "cft",
           "alignrag-cpo": "cpo"}
# cot: chain of thought without retrieval; dense: vanilla reasoning RAG, the refiners' round 0
IDS = ("cot", "dense", *CRITICS)


def build(name: str, cfg: AlignRAGConfig, *, corpus=None, retriever=None, generator=None):
    """One of ``IDS`` with ``cfg``'s knobs, over the scale's corpus and dense retriever — or over
    ``corpus`` searched by ``retriever`` — read by ``generator`` (default: the scale's reader).
    A trained critic is trained when it is missing (``train.critic_generator``)."""
    AlignRAGConfig.check_build(name, IDS, cfg)
    generator = generator or resources.generator_for(cfg.scale)
    if name == "cot":  # reads no documents
        return ChainOfThought(generator, rationale_tokens=cfg.rationale_tokens, answer_tokens=cfg.answer_tokens)
    corpus, retriever = resources.searched(cfg.scale, corpus, retriever)
    knobs = dict(iterations=cfg.iterations, k=cfg.k, max_words=cfg.max_words or cfg.scale.max_passage_words,
                 rationale_tokens=cfg.rationale_tokens, answer_tokens=cfg.answer_tokens,
                 critique_tokens=cfg.critique_tokens)
    if name == "dense":  # vanilla reasoning RAG: y₀, no critique round
        return AlignRAG(retriever, generator, corpus, critic=SELF, name=name, **{**knobs, "iterations": 0})
    return AlignRAG(retriever, generator, corpus, critic=_critic(cfg, CRITICS[name], generator), name=name, **knobs)


def _critic(cfg: AlignRAGConfig, critic: str, generator):
    if critic == SELF:
        return SELF
    if critic == "frozen":  # the critic LM before training: the base model with the critic's prompt
        return generator
    return critic_generator(cfg, critic)
