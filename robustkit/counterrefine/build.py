"""CounterRefine's methods by name: CounterRefine and its Table 4 ablations, each the method with
one part removed.

    refine = build("counterrefine", cfg)                        # over the scale's corpus
    ablation = build("counterrefine-no-validator", cfg, corpus=ev.corpus, retriever=ev.retriever,
                     revise_above=threshold)

Every variant shares ``cfg.k``, the reader, the corpus and the draft, so Table 4 compares like
with like. ``robustkit.registry`` builds any method of the kit by id through this folder's
``build``.
"""
from __future__ import annotations

from robustkit import resources
from robustkit.counterrefine.config import CounterRefineConfig
from robustkit.counterrefine.data import eval_sets
from robustkit.counterrefine.method import CounterRefine
from robustkit.counterrefine.train import calibrate

# Table 4: each ablation is CounterRefine with one part removed
VARIANTS = {"counterrefine": {}, "counterrefine-question-only": {"second_pass": "question"},
            "counterrefine-no-validator": {"validator": False},
            "counterrefine-no-canonicalisation": {"canonicalise": False},
            "counterrefine-reconsider": {"second_pass": "none"}}
IDS = tuple(VARIANTS)


def build(name: str, cfg: CounterRefineConfig, *, corpus=None, retriever=None, generator=None,
          revise_above: float | None = None) -> CounterRefine:
    """One of ``IDS`` with ``cfg``'s knobs, over the scale's corpus and dense retriever — or over
    ``corpus`` searched by ``retriever`` — read by ``generator`` (default: the scale's reader).

    Constrained decoding revises above ``revise_above``; by default the threshold calibrated on
    the scale's short-answer training questions (``train.calibrate``, the set notebook 06
    calibrates first), whatever corpus the method then reads."""
    CounterRefineConfig.check_build(name, IDS, cfg)
    corpus, retriever = resources.searched(cfg.scale, corpus, retriever)
    if revise_above is None:
        short = next(s for s in eval_sets(cfg) if not s.multihop)
        revise_above = calibrate(cfg, short)["revise_above"]
    return CounterRefine(retriever, generator or resources.generator_for(cfg.scale), corpus, name=name,
                         revise_above=revise_above, **cfg.method_knobs(), **VARIANTS[name])
