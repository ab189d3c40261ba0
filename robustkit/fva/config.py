"""FVA-RAG's knobs, with per-scale defaults (the paper's values where it states them).

    cfg = rk.fva.settings(scale)               # the defaults at this scale
    cfg = rk.fva.settings(scale, tau=0.7)      # one knob changed

Every method in notebook 05 shares ``k`` and the retrieval budget, so the comparison is fair:
at most two retrieval calls per question, ``k`` passages per call.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from robustkit.config import MethodConfig, Scale, check_knob

ADJUDICATORS = ("nli", "answer-conflict")
# CRAG's retrieval evaluator: the kit's relevance cross-encoder (CRAG trains a T5 one for the same
# job) or the dense retriever's own question-passage cosine (no trained grader at all)
CRAG_EVALUATORS = ("relevance-ce", "dense-cosine")

# tiny: 8 data/mini questions, a stratified TruthfulQA sample (1 per stratum) and short
# passages — every step runs, no comparison is meant — so the run fits CI's budget on 2 CPU
# cores; small and up: all 817
DEFAULTS: dict[str, dict] = {"tiny": dict(n_mini=8, n_truthfulqa=6, n_mc=6, max_words=40), "small": {},
                             "colab": {}, "paper": {}}


@dataclass(frozen=True, repr=False)
class FVAConfig(MethodConfig, what="FVA", defaults=DEFAULTS):
    scale: Scale
    k: int = 3  # passages per retrieval call (the paper's k = 3)
    m_kill_queries: int = 3  # m: kill queries written per draft
    tau: float = 0.5  # falsified when max contradiction >= tau (the paper's 0.5)
    adjudicator: str = "nli"  # which adjudicator decides: one of ADJUDICATORS
    crag_evaluator: str = "relevance-ce"  # what grades CRAG's retrieval: one of CRAG_EVALUATORS
    draft_tokens: int = 24  # decoding budgets: draft, kill queries (all m), revision
    kill_tokens: int = 40
    revision_tokens: int = 32
    n_truthfulqa: int = 0  # TruthfulQA questions evaluated (0 = all 817), stratified by category
    n_mini: int = 0  # data/mini held-out misconception questions evaluated at tiny (0 = all 21)
    n_mc: int = 0  # of those, how many get MC1/MC2 (0 = all): ~8 options to score per question
    max_words: int = 0  # passages clipped to this many words in every method's prompts (0 = the
    #                     scale's): prefill dominates a CPU's cost, so tiny shortens them

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "tau":
                check_knob("FVA knob tau", value, low=0, high=1)
            elif f.name == "adjudicator":
                if value not in ADJUDICATORS:
                    raise ValueError(f"unknown adjudicator {value!r}; expected one of {list(ADJUDICATORS)}")
            elif f.name == "crag_evaluator":
                if value not in CRAG_EVALUATORS:
                    raise ValueError(f"unknown CRAG evaluator {value!r}; expected one of {list(CRAG_EVALUATORS)}")
            elif f.name != "scale":
                check_knob(f"FVA knob {f.name}", value, integer=True,
                           low=0 if f.name in ("n_truthfulqa", "n_mini", "n_mc", "max_words") else 1)


def settings(scale: FVAConfig | Scale | str | None = None, **changes) -> FVAConfig:
    """FVA-RAG's knobs at a scale (its defaults, with ``changes``); a config passes through."""
    return FVAConfig.settings(scale, **changes)
