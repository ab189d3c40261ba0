"""CoRM-RAG (Counterfactual Risk Minimization): rank evidence by its robustness utility, distil
it into an Evidence Critic, abstain when no candidate is safe.

    config.py       its knobs per scale (K, M, N, C, epochs …)
    perturb.py      §3.1 the Cognitive Perturbation Protocol (three bias types, the adversary)
    teacher.py      §3.2 robustness labels s(x, d)
    groups.py       §3.3 listwise groups (the relevance CE's, the kit's warm start's)
    loss.py         §3.3 the hybrid listwise + pointwise loss
    critic.py       §3.3 the Evidence Critic cross-encoder and its scorer
    train.py        §3.3 the Accelerate training loop
    rag.py          §3.4 Algorithm 1, risk-aware RAG with abstention
    prior.py        the kit's extension: the critic on top of the dense scores
    pipeline.py     the stages as artifacts under runs/<scale>/corm/
    experiments.py  §4 Table 1, Fig. 3-7 as tidy tables
    kinds.py        claims by passage kind: gold, premise-matching, distractor
    figures.py      those tables drawn beside the paper's numbers (paper.py)
    throughput.py   the training loop's speed on GPU / CPU

Submodules load on first use, so ``python -m robustkit.corm train`` needs only torch,
transformers and accelerate.
"""
import importlib

_SUBMODULES = ("config", "critic", "experiments", "figures", "groups", "kinds", "loss", "paper", "perturb",
               "pipeline", "prior", "rag", "teacher", "throughput", "train")
_STAGES = ("perturbations", "labels", "labelling_cost", "training_groups", "train_critic",
           "critic_scorer", "training_history", "compare_on_validation", "train_questions",
           "test_set", "export_groups", "warm_start", "warm_start_groups", "soft_labels",
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
