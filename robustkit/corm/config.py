"""CoRM-RAG's knobs, with per-scale defaults (the paper's values at ``paper``).

    cfg = rk.corm.settings(scale)                       # the defaults at this scale
    cfg = rk.corm.settings(scale, m_candidates=20)      # one knob changed

Every CoRM stage takes a ``CormConfig`` (or a scale, meaning its defaults); the config carries
its ``Scale``, so the seed, data and models come along.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from robustkit.config import Scale, check_knob, get_scale


@dataclass(frozen=True)
class CormConfig:
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

    def __post_init__(self):
        for f in fields(self):
            if f.name == "lr":
                check_knob("CoRM knob lr", self.lr, low=0, low_open=True)
            elif f.name != "scale":
                check_knob(f"CoRM knob {f.name}", getattr(self, f.name), integer=True,
                           low=0 if f.name == "llm_rerank_questions" else 1)
        if self.m_inference < self.context_size:
            raise ValueError(f"M at inference ({self.m_inference}) must be >= C ({self.context_size})")

    def replace(self, **changes) -> "CormConfig":
        return settings(self.scale, **{**_knobs(self), **changes})

    def __repr__(self) -> str:
        knobs = ", ".join(f"{k}={v}" for k, v in _knobs(self).items())
        return f"CormConfig(scale={self.scale.name!r}, seed={self.scale.seed}, {knobs})"


DEFAULTS: dict[str, dict] = {
    "tiny": dict(k_perturbations=3, m_candidates=6, n_negatives=4, m_inference=10, context_size=1,
                 epochs=3, batch_groups=8, lr=5e-5, llm_rerank_questions=8),
    "small": dict(k_perturbations=3, m_candidates=8, n_negatives=6, m_inference=50, context_size=1,
                  epochs=3, batch_groups=16, lr=5e-5, llm_rerank_questions=0),
    "colab": dict(k_perturbations=5, m_candidates=20, n_negatives=10, m_inference=100,
                  context_size=3, epochs=3, batch_groups=32, lr=5e-5,
                  llm_rerank_questions=0),
    "paper": dict(k_perturbations=5, m_candidates=100, n_negatives=10, m_inference=100,
                  context_size=3, epochs=3, batch_groups=32, lr=5e-5,
                  llm_rerank_questions=0),
}


def settings(scale: Scale | str | CormConfig | None = None, **overrides) -> CormConfig:
    """CoRM-RAG's settings at ``scale`` (its defaults), with ``overrides`` applied."""
    if isinstance(scale, CormConfig):
        return scale.replace(**overrides) if overrides else scale
    scale = get_scale(scale)
    known = set(DEFAULTS["tiny"])
    unknown = set(overrides) - known
    if unknown:
        raise ValueError(f"unknown CoRM knob(s) {sorted(unknown)}; expected some of {sorted(known)}")
    if scale.name not in DEFAULTS:
        raise ValueError(f"no CoRM defaults for scale {scale.name!r}; expected one of {sorted(DEFAULTS)}")
    return CormConfig(scale, **{**DEFAULTS[scale.name], **overrides})


def _knobs(cfg: CormConfig) -> dict:
    return {f.name: getattr(cfg, f.name) for f in fields(cfg) if f.name != "scale"}
