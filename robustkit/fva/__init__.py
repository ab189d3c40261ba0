"""FVA-RAG (falsification–verification): treat the draft as a hypothesis, search for evidence
against it, let an NLI adjudicator decide, revise what is falsified.

    config.py       its knobs per scale (k, m, τ, decoding budgets, TruthfulQA sample size)
    data.py         what it is evaluated on: the questions and the two frozen caches of each dataset
    method.py       the method: draft → kill queries → anti-context → adjudicate → revise
    train.py        what it trains: the NLI adjudicator, CRAG's retrieval evaluator
    build.py        its methods by name (FVA-RAG, dense, Self-RAG, CRAG), from a config
    pipeline.py     the run: every method × cache A/B × question, scored, staged
    experiments.py  Table 2 and 3, McNemar, adjudicator agreement, falsified examples, τ sweep
    readings.py     what a run shows, as sentences computed from those tables
    figures.py      those tables drawn beside the paper's numbers (paper.py)
    report.py       `python -m robustkit run fva`: every table printed and saved

The baselines it is compared with (vanilla RAG, Self-RAG, CRAG) live in the core
(``robustkit.baselines``, ``robustkit.adaptive``), the adjudicators in ``robustkit.judges``.
"""
from robustkit import lazy_package

_SUBMODULES = ("build", "config", "data", "experiments", "figures", "method", "paper", "pipeline", "readings", "report",
               "train")
_NAMES = {"FVAConfig": "config", "settings": "config", "DEFAULTS": "config", "FVARAG": "method",
          "eval_sets": "data", "corpora": "data", "describe": "data", "adjudicator": "train",
          "crag_evaluator": "train", "IDS": "build", "run": "pipeline", "run_log": "pipeline",
          "METHODS": "pipeline", "mc_table": "pipeline", "revisions_at_any_tau": "pipeline"}


__getattr__, __dir__ = lazy_package(__name__, _SUBMODULES, _NAMES)
