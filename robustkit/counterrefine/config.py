"""CounterRefine's knobs, with per-scale defaults (the paper's values where it states them).

    cfg = rk.counterrefine.settings(scale)                  # the defaults at this scale
    cfg = rk.counterrefine.settings(scale, max_snippets=20) # one knob changed

Baseline-RAG and every CounterRefine variant share ``k``, the generator, the corpus and the
draft, so Table 3 and the Table 4 ablations compare like with like.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from robustkit.config import MethodConfig, Scale, check_knob

DECODINGS = ("free", "constrained")
CITABLE = 9  # constrained decoding cites one of snippets [1]..[9] (ids of one token each)


# tiny: samples of data/mini's two-hop and factual test questions, short snippets and a 9-snippet
# second pass, so notebook 06 fits CI's budget on a 2-core CPU (prefill dominates: each refinement
# step re-reads its snippets); small: HotpotQA and NQ-open samples of 50, each with 20 calibration
# questions, sized to finish in hours on a CPU (the results page has the measured rate). A 135M
# refiner cannot write the reply format by itself, so both constrain its decoding; colab and
# paper models decode freely.
DEFAULTS: dict[str, dict] = {
    "tiny": dict(n_multihop=8, n_factual=8, n_calibration=6, max_words=30, max_snippets=9,
                 draft_tokens=16, refine_tokens=24, decoding="constrained"),
    "small": dict(n_hotpotqa=50, n_nq=50, n_calibration=20, max_words=40, max_snippets=9,
                  decoding="constrained"),
    # colab: 200 HotpotQA and 200 NQ-open questions, 50 calibration questions each, inside a
    # notebook's ~30 min on a T4 (robustkit.timings estimates it)
    "colab": dict(n_hotpotqa=200, n_nq=200, n_calibration=50),
    # paper: every question but 100 HotpotQA ones, held out to calibrate (HotpotQA ships no train split here)
    "paper": dict(n_hotpotqa=388, n_calibration=100)}


@dataclass(frozen=True, repr=False)
class CounterRefineConfig(MethodConfig, what="CounterRefine", defaults=DEFAULTS):
    scale: Scale
    k: int = 5  # snippets per retrieval query (the paper's k = 5)
    max_snippets: int = 15  # the second pass keeps at most this many merged snippets (paper: 15-20)
    draft_tokens: int = 24  # decoding budgets: the draft, the DECISION/ANSWER/EVIDENCE reply
    refine_tokens: int = 40
    decoding: str = "free"  # "free" (the paper's one generation) or "constrained" (see method.refine)
    n_calibration: int = 0  # training questions per dataset that set the REVISE threshold (0 = all)
    max_words: int = 0  # snippets clipped to this many words in prompts (0 = the scale's)
    n_multihop: int = 0  # tiny: data/mini two-hop test questions evaluated (0 = all 15)
    n_factual: int = 0  # tiny: data/mini factual test questions evaluated (0 = all 56)
    n_hotpotqa: int = 0  # small: HotpotQA distractor dev questions (0 = all 488)
    n_nq: int = 0  # small: NQ-open oracle test questions (0 = all)

    def __post_init__(self):
        for f in fields(self):
            if f.name == "decoding":
                if self.decoding not in DECODINGS:
                    raise ValueError(f"unknown decoding {self.decoding!r}; expected one of {list(DECODINGS)}")
            elif f.name != "scale":
                check_knob(f"CounterRefine knob {f.name}", getattr(self, f.name), integer=True,
                           low=0 if f.name.startswith("n_") or f.name == "max_words" else 1)
        if self.decoding == "constrained" and self.max_snippets > CITABLE:
            raise ValueError(f"constrained decoding cites one of at most {CITABLE} snippets; "
                             f"max_snippets is {self.max_snippets}")
        if self.max_snippets < self.k:
            raise ValueError(f"max_snippets ({self.max_snippets}) must be >= k ({self.k}): the "
                             "second pass keeps at least the draft's own snippets")

    def method_knobs(self) -> dict:
        """The knobs ``CounterRefine``'s constructor takes, as this config sets them."""
        return dict(k=self.k, max_snippets=self.max_snippets, decoding=self.decoding,
                    max_words=self.max_words or None, draft_tokens=self.draft_tokens,
                    refine_tokens=self.refine_tokens)


def settings(scale: CounterRefineConfig | Scale | str | None = None, **changes) -> CounterRefineConfig:
    """CounterRefine's knobs at a scale (its defaults, with ``changes``); a config passes through."""
    return CounterRefineConfig.settings(scale, **changes)
