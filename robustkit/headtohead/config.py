"""The head-to-head's knobs, with per-scale defaults.

    cfg = rk.headtohead.settings(scale)                  # the defaults at this scale
    cfg = rk.headtohead.settings(scale, n_questions=20)  # one knob changed
    cfg = rk.headtohead.settings(scale, configs=[rk.fva.settings(scale, tau=0.7)])   # a tuned method
    cfg = rk.headtohead.settings(scale, methods=["bm25", "corm"], reference="bm25")  # another reference

Each method keeps the knobs its own notebook runs it with (``rk.corm.settings``,
``rk.fva.settings`` …), or the tuned config given in ``configs``; this config says which
questions they all answer and which methods run.
"""
from __future__ import annotations

from dataclasses import dataclass

from robustkit.config import MethodConfig, Scale, check_knob
from robustkit.registry import HEAD_TO_HEAD, configs_for, ids

# tiny: 6 of data/mini's 42 test questions — a seeded draw whose first draws are those of notebook
# 04's LLM-rerank sample, so their biased queries replay — enough to run every method's code path
# inside CI's budget on 2 CPU cores, not to compare methods; small: 60 of CoRM's 150 test
# questions, so that training every method's parts and answering fit an afternoon on 2 cores;
# colab: 120 of CoRM's 200, inside a notebook's ~30 min on a T4 (robustkit.timings estimates it)
DEFAULTS: dict[str, dict] = {"tiny": dict(n_questions=6), "small": dict(n_questions=60),
                             "colab": dict(n_questions=120), "paper": {}}
METHODS = HEAD_TO_HEAD  # every method the head-to-head runs by default, in its tables' order


@dataclass(frozen=True, repr=False)
class HeadToHeadConfig(MethodConfig, what="head-to-head", defaults=DEFAULTS):
    scale: Scale
    n_questions: int = 0  # test questions, each clean and with its biased rewrite (0 = CoRM's whole test set)
    methods: tuple[str, ...] = METHODS  # registry ids (``rk.registry.ids()``); the reference is added if missing
    reference: str = "dense"  # the method every paired test compares with (vanilla dense RAG by default)
    # each paper's config its methods run with (``rk.<method>.settings``): a tuned one given here,
    # every other paper's at its defaults at this scale
    configs: tuple[MethodConfig, ...] = ()

    def __post_init__(self):
        check_knob("head-to-head knob n_questions", self.n_questions, integer=True, low=0)
        unknown = [m for m in (*self.methods, self.reference) if m not in ids()]
        if unknown or not self.methods:
            raise ValueError(f"unknown method(s) {unknown or '(none given)'}; expected some of {ids()}")
        # every paired test needs the reference's answers: it runs first when the list lacks it
        methods = tuple(self.methods)  # a list from the caller, hashable here
        object.__setattr__(self, "methods", methods if self.reference in methods else (self.reference, *methods))
        given = tuple(self.configs.values()) if isinstance(self.configs, dict) else tuple(self.configs)
        if wrong := [c for c in given if isinstance(c, MethodConfig) and c.scale != self.scale]:
            raise ValueError(f"{type(wrong[0]).__name__} is at scale {wrong[0].scale.name!r} (seed "
                             f"{wrong[0].scale.seed}), the head-to-head at {self.scale.name!r} (seed "
                             f"{self.scale.seed}): build it from the same scale")
        object.__setattr__(self, "configs", tuple(configs_for(given or self.scale).values()))

    def config_for(self, config_class):
        """The config of one paper its methods run with: ``cfg.config_for(FVAConfig)``."""
        return next(c for c in self.configs if isinstance(c, config_class))

    def __repr__(self) -> str:
        tuned = [type(c).__name__ for c in self.configs if c != type(c).settings(self.scale)]
        return (f"HeadToHeadConfig(scale={self.scale.name!r}, seed={self.scale.seed}, "
                f"n_questions={self.n_questions}, methods={len(self.methods)}, reference={self.reference!r}, "
                f"tuned={tuned})")


def settings(scale: HeadToHeadConfig | Scale | str | None = None, **changes) -> HeadToHeadConfig:
    """The head-to-head's knobs at a scale (its defaults, with ``changes``); a config passes through."""
    return HeadToHeadConfig.settings(scale, **changes)
