"""CoRM-RAG (Counterfactual Risk Minimization): rank evidence by its robustness utility, distil
it into an Evidence Critic, abstain when no candidate is safe.

    config.py       its knobs per scale (K, M, N, C, epochs …)
    perturb.py      §3.1 the Cognitive Perturbation Protocol (three bias types, the adversary)
    teacher.py      §3.2 robustness labels s(x, d)
    groups.py       §3.3 listwise groups (and the relevance CE baseline's, mirroring them)
    method.py       §3.4 Algorithm 1, risk-aware RAG with abstention; the kit's extension, the
                    critic on top of the dense scores (a retrieval prior)
    pipeline.py     the stages as artifacts under runs/<scale>/corm/
    experiments.py  §4 Table 1, Fig. 3-7 as tidy tables
    readings.py     what each table and figure shows, as sentences computed from it
    kinds.py        claims by passage kind: gold, premise-matching, distractor
    figures.py      those tables drawn beside the paper's numbers (paper.py)
    report.py       `python -m robustkit run corm`: every table printed, figures saved
    throughput.py   the training loop's speed on GPU / CPU

The Evidence Critic is the kit's cross-encoder (``robustkit.crossencoder``: the model, §3.3's
hybrid loss, the Accelerate training loop) trained on robustness labels, fine-tuned from the
kit's relevance cross-encoder (the warm start). Submodules load on first use, so
``python -m robustkit.corm train`` needs only torch, transformers and accelerate.
"""
import importlib

_SUBMODULES = ("config", "experiments", "figures", "groups", "kinds", "method", "paper", "perturb", "readings",
               "pipeline", "report", "teacher", "throughput")
_STAGES = ("perturbations", "labels", "labelling_cost", "training_groups", "train_critic",
           "critic_scorer", "training_history", "compare_on_validation", "train_questions",
           "test_set", "adversary_rewrites", "export_groups", "warm_start", "warm_start_groups", "warm_start_recipe",
           "soft_labels",
           "CRITIC_VARIANTS")


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f"robustkit.corm.{name}")
    if name in _STAGES:
        return getattr(importlib.import_module("robustkit.corm.pipeline"), name)
    if name in ("CormConfig", "DEFAULTS", "settings"):
        return getattr(importlib.import_module("robustkit.corm.config"), name)
    raise AttributeError(f"module 'robustkit.corm' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_SUBMODULES, *_STAGES, "CormConfig", "DEFAULTS", "settings"})
