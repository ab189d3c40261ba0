"""CoRM-RAG's knobs, with per-scale defaults (the paper's values at ``paper``).

    cfg = rk.corm.settings(scale)                       # the defaults at this scale
    cfg = rk.corm.settings(scale, m_candidates=20)      # one knob changed

Every CoRM stage takes a ``CormConfig`` (or a scale, meaning its defaults); the config carries
its ``Scale``, so the seed, data and models come along.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Union

from robustkit.config import MethodConfig, Scale, check_knob
from robustkit.crossencoder.relevance import DATASETS, RECIPES


# the floor of each integer knob that is not 1
_LOWEST = {"llm_rerank_questions": 0, "warm_start_questions": 0, "warm_start_m": 2}


# The warm start stands in for a pretrained cross-encoder, which offline does not exist (on Colab
# the hub has them): without it every cross-encoder starts from a bi-encoder with a fresh head
# and ~100 groups cannot teach it relevance, let alone robustness. Its knobs default to the kit's
# relevance recipe at each scale (``crossencoder.relevance.RECIPES``: why those values, measured),
# so CoRM's warm start is the very model CRAG grades retrieval with. The paper's setting (a
# pretrained cross-encoder, no warm start) is ``paper``'s.


def _warm(scale: str, **changes) -> dict:
    r = RECIPES[scale]
    return dict(warm_start=True, warm_start_dataset=r.dataset, warm_start_questions=r.questions,
                warm_start_m=r.m, warm_start_epochs=r.epochs, warm_start_lr=r.lr) | changes


# tiny trains each critic for 2 epochs, not the paper's 3 (kept at every other scale): a few dozen
# groups move the warm start little either way, and notebooks 03-04 train eleven critics inside
# CI's budget on 2 CPU cores. Its LLM-rerank reads 6 questions' biased queries, the head-to-head's
# 6 (the same seeded draw), so notebook 08 replays them.
DEFAULTS: dict[str, dict] = {
    "tiny": dict(k_perturbations=3, m_candidates=6, n_negatives=4, m_inference=10, context_size=1,
                 epochs=2, batch_groups=8, lr=5e-5, llm_rerank_questions=6, **_warm("tiny")),
    "small": dict(k_perturbations=3, m_candidates=8, n_negatives=6, m_inference=50, context_size=1,
                  epochs=3, batch_groups=16, lr=5e-5, llm_rerank_questions=0, **_warm("small")),
    # colab: LLM-rerank reads each of M = 100 candidates per query, so it answers 40 questions' biased
    # queries, not every query (robustkit.timings estimates what every query would add on a T4)
    "colab": dict(k_perturbations=5, m_candidates=20, n_negatives=10, m_inference=100,
                  context_size=3, epochs=3, batch_groups=32, lr=5e-5,
                  llm_rerank_questions=40, **_warm("colab")),
    "paper": dict(k_perturbations=5, m_candidates=100, n_negatives=10, m_inference=100,
                  context_size=3, epochs=3, batch_groups=32, lr=5e-5,
                  llm_rerank_questions=0, **_warm("paper", warm_start=False)),
}


@dataclass(frozen=True, repr=False)
class CormConfig(MethodConfig, what="CoRM", defaults=DEFAULTS):
    scale: Scale
    k_perturbations: int  # K: perturbations per training question
    m_candidates: int  # M: candidates retrieved per query for labelling
    n_negatives: int  # N: negatives per listwise group
    m_inference: int  # M at inference (Algorithm 1)
    context_size: int  # C: passages in the reader's context (1 at tiny/small: the 135M reader
    #                     loses 15-30 points of accuracy with 2-3 passages)
    epochs: int
    batch_groups: int
    lr: float
    llm_rerank_questions: int  # test questions whose biased query LLM-rerank answers (0 = every
    #                            query): one 135M pass per candidate is the costliest baseline
    warm_start: bool  # train every cross-encoder from the kit's relevance warm start (True) or
    #                   straight from ``critic_init``'s bi-encoder with a fresh head (False)
    warm_start_dataset: str  # whose training split and corpus the warm start learns from
    warm_start_questions: int  # training-split questions the warm start learns from (0 = all)
    warm_start_m: int  # dense candidates per warm-start question ("contains a gold alias"
    #                    labels; at least 2, a positive and a negative)
    warm_start_epochs: int
    warm_start_lr: float  # higher than ``lr``: a fresh head has to learn in a few dozen steps
    abstain_coverage: float = 0.8  # CoRM+abstain's γ answers this share of validation queries (§4.4)

    def __post_init__(self):
        for f in fields(self):
            if f.name in ("lr", "warm_start_lr"):
                check_knob(f"CoRM knob {f.name}", getattr(self, f.name), low=0, low_open=True)
            elif f.name == "abstain_coverage":
                check_knob("CoRM knob abstain_coverage", self.abstain_coverage, low=0, high=1, low_open=True)
            elif f.name == "warm_start":
                if not isinstance(self.warm_start, bool):
                    raise ValueError(f"CoRM knob warm_start must be True or False, got {self.warm_start!r}")
            elif f.name == "warm_start_dataset":
                if self.warm_start_dataset not in DATASETS:
                    raise ValueError(f"CoRM knob warm_start_dataset must be one of "
                                     f"{list(DATASETS)}, got {self.warm_start_dataset!r}")
            elif f.name != "scale":
                check_knob(f"CoRM knob {f.name}", getattr(self, f.name), integer=True,
                           low=_LOWEST.get(f.name, 1))
        if self.m_inference < self.context_size:
            raise ValueError(f"M at inference ({self.m_inference}) must be >= C ({self.context_size})")


# what every CoRM stage takes: a config, or a scale (its name or ``Scale``; None: the session's)
# meaning CoRM's defaults there
CormSettings = Union[CormConfig, Scale, str, None]


def settings(scale: CormSettings = None, **changes) -> CormConfig:
    """CoRM-RAG's knobs at a scale (its defaults, with ``changes``); a config passes through."""
    return CormConfig.settings(scale, **changes)
