"""FVA-RAG (falsification–verification): treat the draft as a hypothesis, search for evidence
against it, let an NLI adjudicator decide, revise what is falsified.

    config.py       its knobs per scale (k, m, τ, decoding budgets, TruthfulQA sample size)
    method.py       the method: draft → kill queries → anti-context → adjudicate → revise
    pipeline.py     the run: every method × cache A/B × question, scored, as one artifact
    experiments.py  Table 2 and 3, McNemar, adjudicator agreement, falsified examples
    figures.py      those tables drawn beside the paper's numbers (paper.py)

The baselines it is compared with (vanilla RAG, Self-RAG, CRAG) live in the core
(``robustkit.baselines``, ``robustkit.adaptive``), the adjudicators in ``robustkit.judges``.
"""
import importlib

_SUBMODULES = ("config", "experiments", "figures", "method", "paper", "pipeline")
_NAMES = {"FVAConfig": "config", "settings": "config", "DEFAULTS": "config", "FVARAG": "method",
          "eval_sets": "pipeline", "run": "pipeline", "run_log": "pipeline", "adjudicator": "pipeline",
          "methods": "pipeline", "METHODS": "pipeline", "corpora": "pipeline", "describe": "pipeline",
          "mc_table": "pipeline"}


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f"robustkit.fva.{name}")
    if name in _NAMES:
        return getattr(importlib.import_module(f"robustkit.fva.{_NAMES[name]}"), name)
    raise AttributeError(f"module 'robustkit.fva' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_SUBMODULES, *_NAMES})
