"""The head-to-head's knobs, with per-scale defaults.

    cfg = rk.headtohead.settings(scale)                  # the defaults at this scale
    cfg = rk.headtohead.settings(scale, n_questions=20)  # one knob changed

Each method keeps the knobs its own notebook runs it with (``rk.corm.settings``,
``rk.fva.settings`` …); this config says only which questions they all answer, which methods
run, and the coverage at which CoRM abstains.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from robustkit.config import Scale, check_knob, knobs_at

# every method the head-to-head knows, in the order its tables list them (pipeline.system builds each)
METHODS = ("bm25", "dense", "random", "relevance-ce", "pa-ce", "llm-rerank", "corm", "corm+abstain",
           "self-rag", "crag", "fva-rag", "counterrefine", "self-refine", "alignrag",
           "fva-rag+corm", "counterrefine+corm")  # the last two: composed, the CoRM critic as their retriever


@dataclass(frozen=True)
class HeadToHeadConfig:
    scale: Scale
    n_questions: int = 0  # test questions, each clean and with its biased rewrite (0 = CoRM's whole test set)
    coverage: float = 0.8  # CoRM+abstain's γ answers this share of validation queries (CoRM's §4.4)
    methods: tuple[str, ...] = METHODS

    def __post_init__(self):
        object.__setattr__(self, "methods", tuple(self.methods))  # a list from the caller, hashable here
        check_knob("head-to-head knob n_questions", self.n_questions, integer=True, low=0)
        check_knob("head-to-head knob coverage", self.coverage, low=0, high=1, low_open=True)
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown or not self.methods:
            raise ValueError(f"unknown method(s) {unknown or '(none given)'}; expected some of {list(METHODS)}")
        if "dense" not in self.methods:
            raise ValueError("the head-to-head's reference is dense RAG: keep 'dense' among the methods")

    def replace(self, **changes) -> "HeadToHeadConfig":
        return settings(self.scale, **{**_knobs(self), **changes})

    def __repr__(self) -> str:
        return (f"HeadToHeadConfig(scale={self.scale.name!r}, seed={self.scale.seed}, "
                f"n_questions={self.n_questions}, coverage={self.coverage}, methods={len(self.methods)})")


# tiny: 6 of data/mini's 42 test questions — a seeded draw whose first draws are those of notebook
# 04's LLM-rerank sample, so their biased queries replay — enough to run every method's code path
# inside CI's budget on 2 CPU cores, not to compare methods; small: 60 of CoRM's 150 test
# questions, so that training every method's parts and answering fit an afternoon on 2 cores;
# colab: 120 of CoRM's 200 (~23 min on a T4, estimated: the whole 200 would take ~38)
DEFAULTS: dict[str, dict] = {"tiny": dict(n_questions=6), "small": dict(n_questions=60),
                             "colab": dict(n_questions=120), "paper": {}}


def settings(scale: HeadToHeadConfig | Scale | str | None = None, **changes) -> HeadToHeadConfig:
    """The head-to-head's knobs at a scale (its defaults, with ``changes``); a config passes through."""
    return knobs_at(HeadToHeadConfig, DEFAULTS, scale, changes, "head-to-head")


def _knobs(cfg: HeadToHeadConfig) -> dict:
    return {f.name: getattr(cfg, f.name) for f in fields(cfg) if f.name != "scale"}
