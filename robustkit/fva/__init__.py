"""FVA-RAG (falsification–verification): treat the draft as a hypothesis, search for evidence
against it, let an NLI adjudicator decide, revise what is falsified.

    config.py       its knobs per scale (k, m, τ, decoding budgets, TruthfulQA sample size)
    method.py       the method: draft → kill queries → anti-context → adjudicate → revise
    pipeline.py     the run: every method × cache A/B × question, scored, as one artifact
    experiments.py  Table 2 and 3, McNemar, adjudicator agreement, falsified examples, τ sweep
    figures.py      those tables drawn beside the paper's numbers (paper.py)
    report.py       `python -m robustkit run fva`: every table printed and saved

The baselines it is compared with (vanilla RAG, Self-RAG, CRAG) live in the core
(``robustkit.baselines``, ``robustkit.adaptive``), the adjudicators in ``robustkit.judges``.
"""
from robustkit import lazy_package

_SUBMODULES = ("config", "experiments", "figures", "method", "paper", "pipeline", "report")
_NAMES = {"FVAConfig": "config", "settings": "config", "DEFAULTS": "config", "FVARAG": "method",
          "eval_sets": "pipeline", "run": "pipeline", "run_log": "pipeline", "adjudicator": "pipeline",
          "methods": "pipeline", "METHODS": "pipeline", "crag_evaluator": "pipeline", "corpora": "pipeline", "describe": "pipeline",
          "mc_table": "pipeline", "revisions_at_any_tau": "pipeline"}


__getattr__, __dir__ = lazy_package(__name__, _SUBMODULES, _NAMES)
