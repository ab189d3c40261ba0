"""CounterRefine: search for evidence conditioned on the draft answer, then let the generator
KEEP or REVISE it — a revision counts only after deterministic validation.

    config.py       its knobs per scale (k, snippet cap, decoding, sample sizes)
    validate.py     the reply's strict parser, answer canonicalisation and the validator
    method.py       the method: draft → answer-conditioned second pass → KEEP/REVISE → validate
    pipeline.py     the run: Baseline-RAG, CounterRefine and its ablations on the same questions
    experiments.py  Table 3 and 4, outcome transitions, paired tests, helped and hurt examples
    figures.py      Fig. 2 and 3 beside the paper's numbers (paper.py)
    report.py       `python -m robustkit run counterrefine`: every table printed and saved
"""
from robustkit import lazy_package

_SUBMODULES = ("config", "experiments", "figures", "method", "paper", "pipeline", "report", "validate")
_NAMES = {"CounterRefineConfig": "config", "settings": "config", "DEFAULTS": "config",
          "CounterRefine": "method", "eval_sets": "pipeline", "run": "pipeline", "run_log": "pipeline",
          "methods": "pipeline", "METHODS": "pipeline", "describe": "pipeline"}


__getattr__, __dir__ = lazy_package(__name__, _SUBMODULES, _NAMES)
