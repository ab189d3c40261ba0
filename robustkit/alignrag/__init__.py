"""AlignRAG: a critic LM trained on contrastive critiques critiques the generator's rationale, and
the generator refines it, for T rounds (critique-driven alignment).

    config.py       its knobs per scale (documents, rounds, decoding budgets, LoRA and training)
    data.py         what it is evaluated on: the in-domain and out-of-domain sets
    critique.py     the target format, the kit's deterministic contrastive critique, granularity
    method.py       the prompts and the CDA loop (AlignRAG, Self-Refine) and chain of thought
    train.py        what it trains: the training corpus and the critics (CFT, CPO, w/o CCS)
    build.py        its methods by name (CoT, dense, Self-Refine, each critic), from a config
    pipeline.py     the run: every method on the same questions, scored at every round
    experiments.py  Table 1 and 5, the OOD drop, rounds, informative vs noisy, the ablation
    readings.py     what a run shows, as sentences computed from those tables
    figures.py      Fig. 2, 3, 4, 6 and the training curves beside the paper's numbers (paper.py)
    report.py       `python -m robustkit run alignrag`: every table printed and saved
"""
from robustkit import lazy_package

_SUBMODULES = ("build", "config", "critique", "data", "experiments", "figures", "method", "paper", "pipeline",
               "readings", "report", "train")
_NAMES = {"AlignRAGConfig": "config", "settings": "config", "DEFAULTS": "config", "AlignRAG": "method",
          "align": "method", "eval_sets": "data", "describe": "data", "training_corpus": "train",
          "critic_generator": "train", "training_curves": "train", "IDS": "build", "run": "pipeline",
          "run_log": "pipeline", "METHODS": "pipeline"}


__getattr__, __dir__ = lazy_package(__name__, _SUBMODULES, _NAMES)
