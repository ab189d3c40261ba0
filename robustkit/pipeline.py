"""The CoRM-RAG pipeline as stages with artifacts under ``runs/<scale>/``.

Each stage returns its result, reusing the artifact on disk when its manifest records the same
inputs and rebuilding it (and any missing upstream stage) otherwise — so every notebook also
runs on its own. Data flows one way:

    questions → perturbations → teacher labels → groups → critics → (notebook 04) evaluation
"""
from __future__ import annotations

import hashlib
import json
import random
from functools import lru_cache
from pathlib import Path

from robustkit.artifacts import matching_artifact, read_manifest, write_manifest
from robustkit.config import Scale, get_scale, resolve_model, runs_dir
from robustkit.data import (PERTURBATION_TYPES, Corpus, Question, corpus, load, mini_corpus,
                            mini_questions, mini_rewrites, read_jsonl, write_jsonl)
from robustkit.data.records import Rewrite

SEED = 0
# name -> how the critic is trained: which groups, which loss
CRITIC_VARIANTS = {
    "corm": {"loss": "hybrid"},
    "pa-ce": {"loss": "pointwise"},
    "relevance-ce": {"loss": "pointwise", "relevance": True},
    "rank-only": {"loss": "listwise"},
    "tau-0.1": {"loss": "hybrid", "tau": 0.1},
    "tau-3": {"loss": "hybrid", "tau": 3.0},
    **{f"k-{k}": {"loss": "hybrid", "k_prime": k} for k in (1, 2)},
    **{f"no-{t}": {"loss": "hybrid", "drop_type": t} for t in PERTURBATION_TYPES},
}


def scale_of(scale: Scale | str | None) -> Scale:
    return scale if isinstance(scale, Scale) else get_scale(scale)


@lru_cache(maxsize=4)
def corpus_for(scale_name: str) -> Corpus:
    """The scale's retrieval corpus: data/mini at tiny, the NQ-open oracle passages beyond."""
    dataset = get_scale(scale_name).dataset
    return mini_corpus() if dataset == "mini" else corpus(dataset)


@lru_cache(maxsize=4)
def retriever_for(scale_name: str):
    """Dense retrieval (the paper's candidate generator) over the scale's corpus."""
    from robustkit.retrieval import DenseRetriever

    return DenseRetriever(corpus_for(scale_name), scale_name)


@lru_cache(maxsize=8)
def generator_for(scale_name: str, role: str = "generator"):
    from robustkit.llm import DEFAULT_SYSTEM, Generator

    return Generator(role, scale_name, system_prompt=None if role == "adversary" else DEFAULT_SYSTEM)


def train_questions(scale: Scale | str | None = None) -> list[Question]:
    """The CoRM training questions: a seeded sample of the scale's training split."""
    scale = scale_of(scale)
    pool = (mini_questions("train") if scale.dataset == "mini"
            else load(scale.dataset, "train").records)
    return _sample(pool, scale.n_train_questions)


def test_set(scale: Scale | str | None = None) -> tuple[list[Question], list[Rewrite]]:
    """Test questions and their biased rewrites.

    tiny: the data/mini test split with all three hand-written rewrites per question (balanced
    by type). Beyond: the real test split with one adversary rewrite per question, rotated by
    type (the paper's protocol).
    """
    scale = scale_of(scale)
    if scale.dataset == "mini":
        questions = mini_questions("test")
        return questions, [r for r in mini_rewrites() if r.question_id in {q.id for q in questions}]
    questions = _sample(load(scale.dataset, "test").records, scale.n_test_questions)
    records = _perturbations(scale, questions, k=1, name="test_perturbations")
    return questions, [Rewrite(r["question_id"], r["type"], r["text"], r["wrong_entity"],
                               r["subtemplate"], (), r["source"]) for r in records]


def perturbations(scale: Scale | str | None = None) -> list[dict]:
    """K adversary rewrites per training question (notebook 01)."""
    scale = scale_of(scale)
    return _perturbations(scale, train_questions(scale), scale.k_perturbations, "perturbations")


def labels(scale: Scale | str | None = None) -> list[dict]:
    """Teacher robustness labels s(x, d) for every training candidate (notebook 02)."""
    from robustkit.teacher import label, labels_inputs, load_labels

    scale = scale_of(scale)
    questions, records = train_questions(scale), perturbations(scale)
    path = runs_dir(scale) / "labels.jsonl"
    teacher = generator_for(scale.name, "teacher")
    inputs = labels_inputs(corpus_for(scale.name), teacher.model_id, scale.m_candidates,
                           questions, records)
    if matching_artifact(path, inputs):
        return load_labels(path, corpus_for(scale.name))
    return label(questions, records, corpus_for(scale.name), retriever_for(scale.name), teacher,
                 m=scale.m_candidates, out_path=path, max_words=scale.max_passage_words)


def labelling_cost(scale: Scale | str | None = None) -> dict:
    labels(scale)
    return read_manifest(runs_dir(scale_of(scale)) / "labels.jsonl")["stats"]


def groups(scale: Scale | str | None = None, *, relevance: bool = False, k_prime: int | None = None,
           drop_type: str | None = None) -> tuple[list[dict], list[dict], dict]:
    """Listwise groups split into train / validation by question (notebook 03)."""
    from robustkit.critic import build_groups, relevance_groups, split_groups

    scale = scale_of(scale)
    records = labels(scale)
    texts = {p.id: p.content for p in corpus_for(scale.name)}
    if relevance:
        built = relevance_groups(records, {q.id: q.text for q in train_questions(scale)}, texts,
                                 n_negatives=scale.n_negatives, seed=SEED)
        stats = {"groups": len(built)}
    else:
        built, stats = build_groups(records, perturbations(scale), texts,
                                    n_negatives=scale.n_negatives, seed=SEED, k_prime=k_prime,
                                    drop_type=drop_type)
        stats["groups"] = len(built)
    train, val = split_groups(built, seed=SEED)
    return train, val, stats


def critic(scale: Scale | str | None = None, variant: str = "corm", *, progress: bool = True) -> Path:
    """Train (or reuse) one critic variant; returns its model directory."""
    from robustkit.critic import train

    scale = scale_of(scale)
    if variant not in CRITIC_VARIANTS:
        raise ValueError(f"unknown critic variant {variant!r}; expected one of {sorted(CRITIC_VARIANTS)}")
    spec = dict(CRITIC_VARIANTS[variant])
    loss, tau = spec.pop("loss"), spec.pop("tau", 1.0)
    train_groups, val_groups, _ = groups(scale, **spec)
    init = resolve_model("critic_init", scale, verbose=False)
    out = runs_dir(scale) / "critics" / variant
    inputs = {"groups": _digest(train_groups), "val": _digest(val_groups), "init": init.name,
              "loss": loss, "tau": tau, "epochs": scale.epochs, "lr": scale.lr,
              "batch_groups": scale.batch_groups, "seed": SEED}
    if matching_artifact(out / "model" / "critic_config.json", inputs):
        return out / "model"
    if out.exists() and not matching_artifact(out / "inputs.json", inputs):
        import shutil

        shutil.rmtree(out)  # a stale run from other inputs: never resume from it
    out.mkdir(parents=True, exist_ok=True)
    write_manifest(out / "inputs.json", inputs)
    train(train_groups, val_groups, init=init.path, base_model=init.name, out_dir=out, loss=loss,
          tau=tau, epochs=scale.epochs, lr=scale.lr, batch_groups=scale.batch_groups, seed=SEED,
          progress=progress)
    write_manifest(out / "model" / "critic_config.json", inputs)
    return out / "model"


def training_history(scale: Scale | str | None, variants: list[str]):
    """The logged train/val history of several critics as one tidy table."""
    import pandas as pd

    scale = scale_of(scale)
    frames = []
    for variant in variants:
        critic(scale, variant)
        rows = read_jsonl(runs_dir(scale) / "critics" / variant / "history.jsonl")
        frames.append(pd.DataFrame(rows).assign(critic=variant))
    return pd.concat(frames, ignore_index=True).drop(columns=["id"])


def export_groups(scale: Scale | str | None, path: str | Path) -> Path:
    """Write the critic's training groups (with texts) for a GPU run elsewhere."""
    train_groups, val_groups, _ = groups(scale)
    write_jsonl(path, train_groups + val_groups)
    return Path(path)


# --- internals ---------------------------------------------------------------------------------

def _perturbations(scale: Scale, questions: list[Question], k: int, name: str) -> list[dict]:
    from robustkit.perturb import synthesize

    path = runs_dir(scale) / f"{name}.jsonl"
    adversary = generator_for(scale.name, "adversary")
    pool = train_questions(scale)
    inputs = {"questions": [q.id for q in questions], "k": k, "adversary": adversary.model_id,
              "seed": SEED, "pool": [q.id for q in pool]}
    if matching_artifact(path, inputs):
        return read_jsonl(path)
    records = synthesize(questions, adversary, k, pool_questions=pool, seed=SEED)
    write_jsonl(path, records)
    write_manifest(path, inputs, {"llm share": sum(r["source"] == "llm" for r in records) / len(records)})
    return records


def _sample(pool: list[Question], n: int) -> list[Question]:
    if not pool:
        raise ValueError("no questions in the chosen split")
    if not n or n >= len(pool):
        return list(pool)
    return sorted(random.Random(SEED).sample(pool, n), key=lambda q: q.id)


def _digest(rows: list[dict]) -> str:
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()


def compare_on_validation(scale: Scale | str | None, variants: list[str]):
    """Every critic scored on the *same* held-out CoRM groups (teacher utilities as gains)."""
    import pandas as pd

    from robustkit.critic import EvidenceCritic, GroupDataset, evaluate
    from robustkit.losses import make_loss

    scale = scale_of(scale)
    _, val_groups, _ = groups(scale)
    rows = []
    for variant in variants:
        model = EvidenceCritic.load(critic(scale, variant))
        data = GroupDataset(val_groups, model.tokenizer, model.config["max_length"])
        metrics = evaluate(model, data, make_loss("hybrid"), scale.batch_groups)
        rows.append({"critic": variant, "ndcg@3": metrics["ndcg@3"], "mrr": metrics["mrr"]})
    return pd.DataFrame(rows).round(3)
