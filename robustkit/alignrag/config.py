"""AlignRAG's knobs, with per-scale defaults (the paper's values where it states them).

    cfg = rk.alignrag.settings(scale)                 # the defaults at this scale
    cfg = rk.alignrag.settings(scale, iterations=5)   # one knob changed

Every method (chain of thought, vanilla reasoning RAG, Self-Refine and each critic) shares the
generator, ``k`` documents per question and the decoding budgets; every trained critic shares
the base model, the training questions, the LoRA shape and the optimiser budget, so Table 1,
Table 5 and the Fig. 6 ablation compare like with like.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from robustkit.config import MethodConfig, Scale, check_knob

# tiny: sized for notebook 07 inside CI's budget on a 2-core CPU, the critics' training included.
# The CPU is the limit: every round costs a critique, a rationale and an answer line for each
# question and critic. So tiny evaluates 4 + 4 questions for T = 1 round over 20-word documents,
# and trains each critic on 8 questions for 2 epochs in batches of 2 (8 steps) with LoRA on the top
# 6 of SmolLM2's 30 layers only, so that backpropagation stops there (a faster CPU step). At the
# paper's lr 1e-5 eight steps would not move the adapter, so tiny uses 1e-3 and small 5e-4; colab
# keeps the paper's recipe. Small evaluates 30 NQ-open and 30 HotpotQA questions for T = 5 rounds
# (the paper's) with critics trained on 48 NQ-open training questions (24 steps each), sized to
# finish within an hour on a CPU. The results page has what each of these cost, measured.
DEFAULTS: dict[str, dict] = {
    "tiny": dict(n_factual=4, n_multihop=4, n_train=8, iterations=1, max_words=20, rationale_tokens=24,
                 answer_tokens=8, critique_tokens=40, learning_rate=1e-3, lora_layers=6, batch_size=2,
                 max_length=320),
    "small": dict(n_nq=30, n_hotpotqa=30, n_train=48, iterations=5, max_words=30, rationale_tokens=32,
                  answer_tokens=10, critique_tokens=48, learning_rate=5e-4, lora_layers=6),
    # colab: the paper's T = 5 and recipe, critics trained on 200 NQ-open questions, 60 + 60 evaluated,
    # inside a notebook's ~30 min on a T4 (robustkit.timings estimates it)
    "colab": dict(iterations=5, n_train=200, n_nq=60, n_hotpotqa=60), "paper": {"iterations": 5}}


@dataclass(frozen=True, repr=False)
class AlignRAGConfig(MethodConfig, what="AlignRAG", defaults=DEFAULTS):
    scale: Scale
    k: int = 3  # documents per question (one retrieval call)
    max_words: int = 0  # documents clipped to this many words in prompts (0 = the scale's)
    iterations: int = 3  # T: critique → refine rounds at test time (Fig. 3 uses 0..5)
    rationale_tokens: int = 40  # decoding budgets: a rationale, its answer line, a critique
    answer_tokens: int = 12
    critique_tokens: int = 64
    n_train: int = 0  # in-domain training questions for the critic (0 = all)
    augment_every: int = 2  # every n-th training set gets an irrelevant document (context granularity)
    n_multihop: int = 0  # tiny: data/mini two-hop test questions, out-of-domain (0 = all)
    n_factual: int = 0  # tiny: data/mini factual test questions, in-domain (0 = all)
    n_hotpotqa: int = 0  # small: HotpotQA distractor dev questions, out-of-domain (0 = all)
    n_nq: int = 0  # small: NQ-open oracle test questions, in-domain (0 = all)
    lora_r: int = 16  # the paper's LoRA: r 16, α 64, lr 1e-5, 2 epochs
    lora_alpha: int = 64
    lora_layers: int = 0  # LoRA on the top this many decoder layers only (0 = every layer, the paper's)
    learning_rate: float = 1e-5
    epochs: int = 2
    batch_size: int = 4  # per optimiser step (CFT and CPO alike)
    dpo_beta: float = 0.1  # CPO's DPO temperature (TRL's default)
    max_length: int = 512  # training sequences are cut to this many tokens

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "scale":
                continue
            if f.name in ("learning_rate", "dpo_beta"):
                check_knob(f"AlignRAG knob {f.name}", value, low=0, low_open=True)
            else:
                low = 0 if f.name.startswith("n_") or f.name in ("max_words", "iterations", "lora_layers") else 1
                check_knob(f"AlignRAG knob {f.name}", value, integer=True, low=low)


def settings(scale: AlignRAGConfig | Scale | str | None = None, **changes) -> AlignRAGConfig:
    """AlignRAG's knobs at a scale (its defaults, with ``changes``); a config passes through."""
    return AlignRAGConfig.settings(scale, **changes)
