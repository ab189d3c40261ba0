"""CoRM-RAG (Counterfactual Risk Minimization): rank evidence by its robustness utility, distil
it into an Evidence Critic, abstain when no candidate is safe.

    config.py       its knobs per scale (K, M, N, C, epochs …)
    data.py         what it trains on (the scale's training questions) and where its runs go
    perturb.py      §3.1 the Cognitive Perturbation Protocol (three bias types, the adversary)
    teacher.py      §3.2 robustness labels s(x, d)
    groups.py       §3.3 listwise groups (and the relevance CE baseline's, mirroring them)
    method.py       §3.4 Algorithm 1, risk-aware RAG with abstention; the kit's extension, the
                    critic on top of the dense scores (a retrieval prior)
    train.py        the stages as artifacts under runs/<scale>/corm/: rewrites, labels, groups,
                    the warm start and the critics; γ and λ set on validation queries
    build.py        its methods by name (the critic, Algorithm 1, every baseline), from a config
    pipeline.py     the evaluation run: every method on the test queries, staged
    experiments.py  §4 Table 1, Fig. 3-7 as tidy tables
    kinds.py        tables by passage kind: gold, premise-matching, distractor
    readings.py     what a run shows, as sentences computed from its tables and figures
    figures.py      those tables drawn beside the paper's numbers (paper.py)
    report.py       `python -m robustkit run corm`: every table printed, figures saved
    throughput.py   the training loop's speed on GPU / CPU

The Evidence Critic is the kit's cross-encoder (``robustkit.crossencoder``: the model, §3.3's
hybrid loss, the Accelerate training loop) trained on robustness labels, fine-tuned from the
kit's relevance cross-encoder (the warm start). Submodules load on first use, so
``python -m robustkit.corm train`` needs only torch, transformers and accelerate.
"""
from robustkit import lazy_package

_SUBMODULES = ("build", "config", "data", "experiments", "figures", "groups", "kinds", "method", "paper",
               "perturb", "pipeline", "readings", "report", "teacher", "throughput", "train")
_TRAINED = ("perturbations", "labels", "labelling_cost", "training_groups", "train_critic", "critic_scorer",
            "training_history", "compare_on_validation", "test_set", "adversary_rewrites", "export_groups",
            "warm_start", "warm_start_groups", "warm_start_recipe", "soft_labels", "gamma_at_coverage",
            "prior_weight", "CRITIC_VARIANTS")
_NAMES = {**dict.fromkeys(_TRAINED, "train"), "CormConfig": "config", "DEFAULTS": "config", "settings": "config",
          "train_questions": "data", "run_dir": "data", "IDS": "build", "test_queries": "pipeline",
          "queries_for": "pipeline", "run_methods": "pipeline"}


__getattr__, __dir__ = lazy_package(__name__, _SUBMODULES, _NAMES)
