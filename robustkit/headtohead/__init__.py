"""Every method head to head: the four papers' methods and their baselines on the same
questions, corpus, generator, dense retriever and judge (notebook 08).

    config.py       which questions, which methods, CoRM's abstention coverage
    pipeline.py     every method built with its own notebook's knobs, scored into one staged table
    experiments.py  summary (accuracy, abstention, interventions, cost), robustness, paired tests,
                    each method on the sets it was built for
    figures.py      cost against accuracy (Pareto front) and the drop under each bias type
    report.py       `python -m robustkit run headtohead`: every table printed and saved

Not a method: the one folder that imports the method folders, to compose them.
"""
from robustkit import lazy_package

_SUBMODULES = ("config", "experiments", "figures", "pipeline", "report")
_NAMES = {"HeadToHeadConfig": "config", "settings": "config", "METHODS": "config", "DEFAULTS": "config",
          "queries": "pipeline", "system": "pipeline", "run": "pipeline", "run_dir": "pipeline",
          "built_for": "pipeline", "BUILT_FOR": "pipeline", "by_set": "experiments",
          "REFERENCE": "pipeline", "LABELS": "pipeline", "summary": "experiments",
          "robustness": "experiments", "significance": "experiments", "disagreements": "experiments",
          "composition": "experiments",
          "findings": "experiments"}


__getattr__, __dir__ = lazy_package(__name__, _SUBMODULES, _NAMES)
