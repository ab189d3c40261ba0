"""AlignRAG: a critic LM trained on contrastive critiques critiques the generator's rationale, and
the generator refines it, for T rounds (critique-driven alignment).

    config.py       its knobs per scale (documents, rounds, decoding budgets, LoRA and training)
    critique.py     the target format, the kit's deterministic contrastive critique, granularity
    method.py       the prompts and the CDA loop (AlignRAG, Self-Refine) and chain of thought
    train.py        the training corpus and the critics: CFT (SFT), CPO (DPO), w/o CCS
    pipeline.py     the run: every method on the same questions, scored at every round
    experiments.py  Table 1 and 5, the OOD drop, rounds, informative vs noisy, the ablation
    figures.py      Fig. 2, 3, 4, 6 and the training curves beside the paper's numbers (paper.py)
    report.py       `python -m robustkit run alignrag`: every table printed and saved
"""
from robustkit import lazy_package

_SUBMODULES = ("config", "critique", "experiments", "figures", "method", "paper", "pipeline", "report", "train")
_NAMES = {"AlignRAGConfig": "config", "settings": "config", "DEFAULTS": "config", "AlignRAG": "method",
          "align": "method", "eval_sets": "train", "training_corpus": "train", "critic_generator": "train",
          "training_curves": "train", "run": "pipeline", "run_log": "pipeline", "refiners": "pipeline",
          "METHODS": "pipeline", "describe": "pipeline"}


__getattr__, __dir__ = lazy_package(__name__, _SUBMODULES, _NAMES)
