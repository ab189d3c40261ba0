"""Every method head to head: the four papers' methods and their baselines on the same
questions, corpus, generator, dense retriever and judge (notebook 08).

    config.py       which questions, which methods, each paper's config (tuned or its defaults)
    pipeline.py     every method built through the registry with its paper's config, scored into
                    one staged table
    experiments.py  summary (accuracy, abstention, interventions, cost), robustness, paired tests,
                    each method on the sets it was built for
    readings.py     what a run shows, as sentences computed from those tables
    figures.py      cost against accuracy (Pareto front) and the drop under each bias type
    report.py       `python -m robustkit run headtohead`: every table printed and saved
    own.py          `run headtohead --questions FILE [--corpus FILE]`: a researcher's own data, prepared,
                    answered and reported

Not a method: it composes the method folders, building each method by id through
``robustkit.registry``.
"""
from robustkit import lazy_package

_SUBMODULES = ("config", "experiments", "figures", "own", "pipeline", "readings", "report")
_NAMES = {"HeadToHeadConfig": "config", "settings": "config", "METHODS": "config", "DEFAULTS": "config",
          "queries": "pipeline", "system": "pipeline", "run": "pipeline", "run_dir": "pipeline",
          "built_for": "pipeline", "BUILT_FOR": "pipeline", "by_set": "experiments",
          "REFERENCE": "pipeline", "LABELS": "pipeline", "summary": "experiments",
          "robustness": "experiments", "significance": "experiments", "disagreements": "experiments",
          "composition": "experiments"}


__getattr__, __dir__ = lazy_package(__name__, _SUBMODULES, _NAMES)
