"""CounterRefine: search for evidence conditioned on the draft answer, then let the generator
KEEP or REVISE it — a revision counts only after deterministic validation.

    config.py       its knobs per scale (k, snippet cap, decoding, sample sizes)
    data.py         what it is evaluated on: the short-answer sets and their training questions
    validate.py     the reply's strict parser, answer canonicalisation and the validator
    method.py       the method: draft → answer-conditioned second pass → KEEP/REVISE → validate
    train.py        what it calibrates: the REVISE threshold, on training questions
    build.py        its methods by name (CounterRefine and its Table 4 ablations), from a config
    pipeline.py     the run: Baseline-RAG, CounterRefine and its ablations on the same questions
    experiments.py  Table 3 and 4, outcome transitions, paired tests, helped and hurt examples
    readings.py     what a run shows, as sentences computed from those tables
    figures.py      Fig. 2 and 3 beside the paper's numbers (paper.py)
    report.py       `python -m robustkit run counterrefine`: every table printed and saved
"""
from robustkit import lazy_package

_SUBMODULES = ("build", "config", "data", "experiments", "figures", "method", "paper", "pipeline", "readings",
               "report", "train", "validate")
_NAMES = {"CounterRefineConfig": "config", "settings": "config", "DEFAULTS": "config",
          "CounterRefine": "method", "eval_sets": "data", "describe": "data", "calibrate": "train",
          "IDS": "build", "run": "pipeline", "run_log": "pipeline", "METHODS": "pipeline"}


__getattr__, __dir__ = lazy_package(__name__, _SUBMODULES, _NAMES)
