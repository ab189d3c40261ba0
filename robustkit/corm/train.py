"""What CoRM-RAG trains and calibrates, each stage an artifact under ``runs/<scale>/corm/`` built
through ``stage``: the adversary's rewrites, the teacher's labels, the listwise groups, the
relevance warm start and the critics; and, read off the critics' validation queries, Algorithm 1's
γ at a coverage and the retrieval prior's λ.

Each stage returns its result, reusing the artifact on disk when its manifest records the same
inputs and rebuilding it (and any missing upstream stage) otherwise — so every notebook also
runs on its own. Data flows one way:

    questions → perturbations → teacher labels → groups → critics → methods (corm.build)

Every function takes a ``CormConfig`` (or a scale, meaning CoRM's defaults there).
"""
from __future__ import annotations

import random
import re
from pathlib import Path

from robustkit import memo, resources
from robustkit.artifacts import digest, read_manifest, stage
from robustkit.corm.config import CormConfig, CormSettings, settings
from robustkit.corm.data import run_dir, train_questions
from robustkit.crossencoder import MAX_LENGTH
from robustkit.data import PERTURBATION_TYPES, Corpus, Question, mini_rewrites, read_jsonl, write_jsonl
from robustkit.data.records import Rewrite, has_answer
from robustkit.judges import NormalisedMatch
from robustkit.metrics import threshold_at_coverage
from robustkit.models import resolve_model
from robustkit.reader import READER_VERSION

# name -> how the critic is trained: which groups, which loss
CRITIC_VARIANTS = {
    "corm": {"loss": "hybrid"},
    "corm-soft": {"loss": "hybrid", "soft": True},  # the kit's: s_soft labels, same budget
    "pa-ce": {"loss": "pointwise"},
    "relevance-ce": {"loss": "pointwise", "relevance": True},
    "rank-only": {"loss": "listwise"},
    "tau-0.1": {"loss": "hybrid", "tau": 0.1},
    "tau-3": {"loss": "hybrid", "tau": 3.0},
    **{f"k-{k}": {"loss": "hybrid", "k_prime": k} for k in (1, 2)},
    **{f"no-{t}": {"loss": "hybrid", "drop_type": t} for t in PERTURBATION_TYPES},
}


def test_set(cfg: CormSettings = None) -> tuple[list[Question], list[Rewrite]]:
    """Test questions and one biased rewrite of each, its type rotated over the questions (the
    paper's protocol): at tiny the data/mini hand-written rewrite of that type, beyond it an
    adversary rewrite."""
    cfg = settings(cfg)
    questions = resources.test_questions(cfg.scale)
    if cfg.scale.dataset == "mini":
        by_key = {(r.question_id, r.type): r for r in mini_rewrites()}
        return questions, [by_key[q.id, PERTURBATION_TYPES[i % len(PERTURBATION_TYPES)]]
                           for i, q in enumerate(questions)]
    return questions, adversary_rewrites(cfg, questions, name="test_perturbations")


def adversary_rewrites(cfg: CormSettings, questions: list[Question], *, k: int = 1,
                       name: str, corpus: Corpus | None = None) -> list[Rewrite]:
    """The adversary's ``k`` biased rewrites of each of any ``questions`` (a user's own too), their
    types rotated over questions and rewrites (the paper's protocol), validated, retried and, when
    every attempt fails, a counted template (``source``); topical distractions retell sentences of
    ``corpus`` (default: the scale's). Staged as ``runs/<scale>/corm/<name>.jsonl`` and reused while
    the questions, corpus, adversary, prompts and seed match; ``corm.pipeline.queries_for`` turns
    them into a queries table."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", name):
        raise ValueError(f"name {name!r} names a file under runs/: use lower-case letters, digits, '-' and '_'")
    records = _perturbations(settings(cfg), list(questions), k=k, name=name, corpus=corpus)
    return [Rewrite(r["question_id"], r["type"], r["text"], r["wrong_entity"], r["subtemplate"], (), r["source"])
            for r in records]


def perturbations(cfg: CormSettings = None) -> list[dict]:
    """K adversary rewrites per training question (notebook 01)."""
    cfg = settings(cfg)
    return _perturbations(cfg, train_questions(cfg), cfg.k_perturbations, "perturbations")


def labels(cfg: CormSettings = None) -> list[dict]:
    """Teacher robustness labels s(x, d) for every training candidate (notebook 02); resumable."""
    from robustkit.corm.teacher import label, label_counts

    cfg = settings(cfg)
    questions, records = train_questions(cfg), perturbations(cfg)
    corpus, retriever = resources.corpus_for(cfg.scale), resources.retriever_for(cfg.scale)
    teacher, judge = resources.generator_for(cfg.scale, "teacher"), NormalisedMatch()
    inputs = {"questions": digest(_question_rows(questions)), "perturbations": digest(
        [[p["question_id"], p["k"], p["text"]] for p in records]), "retriever": retriever.identity(),
        "teacher": teacher.identity(), "judge": judge.name, "reader": READER_VERSION,
        "m": cfg.m_candidates, "max_words": cfg.scale.max_passage_words}

    def build(out: Path, scratch: Path) -> dict:
        calls, hits = teacher.misses, teacher.hits
        built = label(questions, records, corpus, retriever, teacher, m=cfg.m_candidates,
                      log_path=scratch / "log.jsonl", judge=judge, max_words=cfg.scale.max_passage_words)
        write_jsonl(out, built)
        return label_counts(built, teacher.misses - calls, teacher.hits - hits)

    return stage(run_dir(cfg) / "labels.jsonl", inputs, build, read_jsonl)


def soft_labels(cfg: CormSettings = None) -> list[dict]:
    """The soft utility s_soft(x, d) of every labelled candidate (``teacher.answer_likelihoods``):
    one teacher-forced pass per (candidate, perturbation), aligned with ``labels``."""
    from robustkit.corm.teacher import answer_likelihoods

    cfg = settings(cfg)
    questions, records, hard = train_questions(cfg), perturbations(cfg), labels(cfg)
    teacher = resources.generator_for(cfg.scale, "teacher")
    inputs = {"labels": read_manifest(run_dir(cfg) / "labels.jsonl")["sha256"],
              "teacher": teacher.identity(), "reader": READER_VERSION,
              "max_words": cfg.scale.max_passage_words}

    def build(out: Path, scratch: Path) -> dict:
        calls = teacher.misses
        built = answer_likelihoods(hard, questions, records, resources.corpus_for(cfg.scale), teacher,
                                   max_words=cfg.scale.max_passage_words)
        write_jsonl(out, built)
        return {"teacher passes": teacher.misses - calls, "records": len(built)}

    return stage(run_dir(cfg) / "soft_labels.jsonl", inputs, build, read_jsonl)


def labelling_cost(cfg: CormSettings = None):
    """What labelling cost, one row: the labels, the teacher generations they took, and of those
    how many the stage generated when it ran, replayed from the call cache (a rerun over a warm
    cache generates none, yet costs the same on a cold one) or read from an interrupted run's log."""
    import pandas as pd

    labels(cfg)
    stats = read_manifest(run_dir(cfg) / "labels.jsonl")["stats"]
    return pd.DataFrame([{"labels": stats.pop("records"), **stats}])


def training_groups(cfg: CormSettings = None, *, relevance: bool = False, soft: bool = False,
                    k_prime: int | None = None, drop_type: str | None = None
                    ) -> tuple[list[dict], list[dict], dict]:
    """Listwise groups split into train / validation by question (notebook 03); ``soft``: labelled
    by s_soft instead of s, capped at the 0/1 critic's group counts (same steps)."""
    from robustkit.corm.groups import build_groups, relevance_groups, soft_groups
    from robustkit.crossencoder.groups import split_groups

    cfg = settings(cfg)
    records, rewrites = labels(cfg), perturbations(cfg)
    texts = {p.id: p.content for p in resources.corpus_for(cfg.scale)}
    seed = cfg.scale.seed
    built, stats = build_groups(records, rewrites, texts, n_negatives=cfg.n_negatives,
                                seed=seed, k_prime=k_prime, drop_type=drop_type)
    train, val = split_groups(built, seed=seed)
    stats["groups"] = len(built)
    if soft:
        built, stats = soft_groups(records, soft_labels(cfg), rewrites, texts,
                                   n_negatives=cfg.n_negatives, seed=seed)
        soft_train, soft_val = split_groups(built, seed=seed)
        rng = random.Random(seed)  # the 0/1 critic's budget: as many groups, as many steps
        train = rng.sample(soft_train, min(len(train), len(soft_train)))
        val = rng.sample(soft_val, min(len(val), len(soft_val)))
        stats["groups"] = len(train) + len(val)
    if relevance:  # mirror the critic's train and validation groups: same counts, same questions
        clean = {q.id: q.text for q in train_questions(cfg)}
        train, val = (relevance_groups(records, split, clean, texts, n_negatives=cfg.n_negatives,
                                       seed=seed) for split in (train, val))
        stats = {"groups": len(train) + len(val)}
    return train, val, stats


def warm_start_recipe(cfg: CormSettings = None):
    """The relevance model's recipe that ``cfg``'s warm-start knobs name (``crossencoder.relevance``);
    at CoRM's defaults it is the scale's own, the model CRAG grades retrieval with."""
    from robustkit.crossencoder.relevance import recipe

    cfg = settings(cfg)
    return recipe(cfg.scale, dataset=cfg.warm_start_dataset, questions=cfg.warm_start_questions,
                  m=cfg.warm_start_m, epochs=cfg.warm_start_epochs, lr=cfg.warm_start_lr)


def warm_start_groups(cfg: CormSettings = None) -> tuple[list[dict], list[dict], dict]:
    """The relevance warm start's groups (train / validation by question): for each of
    ``warm_start_questions`` questions of ``warm_start_dataset``'s training split, its clean
    query over its dense top ``warm_start_m`` in that dataset's corpus, labelled by "contains a
    gold alias" — cheap labels, no teacher call.

    Test questions never appear: the pool is a training split, the one the CoRM training
    questions are sampled from (data/mini's 104 at ``tiny``, NQ-open oracle's beyond)."""
    from robustkit.crossencoder.relevance import groups_for

    cfg = settings(cfg)
    return groups_for(cfg.scale, warm_start_recipe(cfg))


def warm_start(cfg: CormSettings = None, *, progress: bool = True) -> Path:
    """Train (or reuse) the relevance warm start every cross-encoder variant starts from: the
    kit's relevance cross-encoder (``crossencoder.relevance_model``) at ``cfg``'s recipe.

    It stands in for the pretrained cross-encoder (e.g. the hub's MS MARCO MiniLM) that a
    reranker is normally fine-tuned from, and which offline does not exist."""
    from robustkit.crossencoder.relevance import relevance_model

    cfg = settings(cfg)
    return relevance_model(cfg.scale, warm_start_recipe(cfg), progress=progress)


def critic_start(cfg: CormSettings = None) -> tuple[str, str, str]:
    """Where every critic variant starts: (path, base model name, identity for manifests) — the
    warm start when ``cfg.warm_start``, else ``critic_init``'s bi-encoder (a fresh head)."""
    cfg = settings(cfg)
    init = resolve_model("critic_init", cfg.scale, verbose=False)
    if not cfg.warm_start:
        return init.path, init.name, init.name
    path = warm_start(cfg)
    return str(path), init.name, f"warm-start:{read_manifest(path)['sha256']}"


def train_critic(cfg: CormSettings = None, variant: str = "corm", *,
                 progress: bool = True) -> Path:
    """Train (or reuse) one critic variant of ``CRITIC_VARIANTS``; returns its model folder."""
    from robustkit.crossencoder.train import pass_budget, train

    cfg = settings(cfg)
    if variant not in CRITIC_VARIANTS:
        raise ValueError(f"unknown critic variant {variant!r}; expected one of {sorted(CRITIC_VARIANTS)}")
    spec = dict(CRITIC_VARIANTS[variant])
    loss, tau = spec.pop("loss"), spec.pop("tau", 1.0)
    train_groups, val_groups, _ = training_groups(cfg, **spec)
    init_path, base_model, init_id = critic_start(cfg)
    max_pairs, budget = pass_budget(init_path, MAX_LENGTH)
    inputs = {"groups": digest(train_groups), "val": digest(val_groups), "init": init_id,
              "loss": loss, "tau": tau, "epochs": cfg.epochs, "lr": cfg.lr, "max_length": MAX_LENGTH,
              "batch_groups": cfg.batch_groups, "seed": cfg.scale.seed, **budget}

    def build(out: Path, scratch: Path) -> dict:
        history = train(train_groups, val_groups, init=init_path, base_model=base_model,
                        out_dir=scratch, model_dir=out, loss=loss, tau=tau, epochs=cfg.epochs,
                        lr=cfg.lr, batch_groups=cfg.batch_groups, max_length=MAX_LENGTH,
                        seed=cfg.scale.seed, max_pairs=max_pairs, progress=progress)
        return {"final validation": [h for h in history if h["split"] == "val"][-1]}

    return stage(run_dir(cfg) / "critics" / variant, inputs, build, lambda path: path)


def critic_scorer(cfg: CormSettings = None, variant: str = "corm"):
    """A ``CrossEncoderScorer`` for one critic variant (trained on demand), loaded once per
    process, its scores kept on disk by checkpoint; ``"warm-start"`` is the relevance warm start
    they all start from. ``"relevance-ce"`` is the pretrained relevance cross-encoder where the
    scale has one (the paper's CE baseline: ``colab``, ``paper``, or the user's choice)."""
    from robustkit.crossencoder.model import stored_scorer
    from robustkit.crossencoder.relevance import pretrained, relevance_scorer

    cfg = settings(cfg)
    if variant == "relevance-ce" and pretrained(cfg.scale) is not None:
        return relevance_scorer(cfg.scale)
    path = warm_start(cfg) if variant == "warm-start" else train_critic(cfg, variant)
    return stored_scorer(str(path), read_manifest(path)["sha256"])


def training_history(cfg: CormSettings, variants: list[str], *, start: bool = True):
    """The logged train/val history of several critics as one tidy table; ``step`` counts
    optimiser steps (a validation row sits at its epoch's last step) and ``val groups`` the
    held-out groups a critic is validated on: its own (the relevance CE's hold clean queries and
    gold labels, the soft critic's soft labels), so critics' validation numbers do not compare
    with each other (``compare_on_validation`` scores them on one set).

    With ``start``, each critic also gets a ``start`` row at step 0: the model it starts from
    (the warm start, or the fresh head its training seeds) validated as its epochs are — its own
    groups and loss, ``crossencoder.train.evaluate`` — so the change from initialisation shows.
    That evaluates the start model (loaded once) and trains nothing; the trained critics and
    their logged histories are untouched."""
    import pandas as pd

    cfg = settings(cfg)
    frames, start_model = [], None
    for v in variants:
        frame = pd.DataFrame(read_jsonl(train_critic(cfg, v) / "history.jsonl")).assign(critic=v)
        frame["step"] = (frame["split"] == "train").cumsum()  # rows are in training order
        spec = dict(CRITIC_VARIANTS[v])
        loss, tau = spec.pop("loss"), spec.pop("tau", 1.0)
        _, val_groups, _ = training_groups(cfg, **spec)  # as train_critic splits them
        if start:
            start_model = _start_model(cfg) if start_model is None else start_model
            before = {"id": "start", "epoch": 0, "split": "start", "critic": v, "step": 0,
                      **_validate(start_model, val_groups, loss, tau, cfg.batch_groups)}
            frame = pd.concat([pd.DataFrame([before]), frame], ignore_index=True)
        frames.append(frame.assign(**{"val groups": len(val_groups)}))
    return pd.concat(frames, ignore_index=True).drop(columns=["id"])


def _start_model(cfg: CormConfig):
    """The model every critic's training starts from (``critic_start``), in eval mode: the warm
    start (one per process), or the bi-encoder with the fresh head ``train`` draws after seeding."""
    import torch

    from robustkit.crossencoder.model import CrossEncoder

    if cfg.warm_start:
        return critic_scorer(cfg, "warm-start").model
    path, base_model, _ = critic_start(cfg)
    with torch.random.fork_rng(devices=[]):  # the caller's random stream is left as it was
        torch.manual_seed(cfg.scale.seed)
        return CrossEncoder(path, max_length=MAX_LENGTH, base_model=base_model).eval()


def _validate(model, val_groups: list[dict], loss: str, tau: float, batch_groups: int) -> dict:
    """Validation loss, NDCG@3 and MRR of ``model`` on ``val_groups``, as training logs them."""
    import torch

    from robustkit.crossencoder.loss import make_loss
    from robustkit.crossencoder.model import GroupDataset
    from robustkit.crossencoder.train import evaluate

    with torch.random.fork_rng(devices=[]):  # a DataLoader draws a seed from the global stream
        return evaluate(model, GroupDataset(val_groups, model.tokenizer, MAX_LENGTH),
                        make_loss(loss, tau), batch_groups)


def compare_on_validation(cfg: CormSettings, variants: list[str]):
    """Every critic scored on the *same* held-out CoRM groups (teacher utilities as gains)."""
    import pandas as pd

    from robustkit.crossencoder.loss import make_loss
    from robustkit.crossencoder.model import GroupDataset
    from robustkit.crossencoder.train import evaluate

    cfg = settings(cfg)
    _, val_groups, _ = training_groups(cfg)
    rows = []
    for variant in variants:
        model = critic_scorer(cfg, variant).model
        data = GroupDataset(val_groups, model.tokenizer, model.config["max_length"])
        metrics = evaluate(model, data, make_loss("hybrid"), cfg.batch_groups)
        rows.append({"critic": variant, "ndcg@3": metrics["ndcg@3"], "mrr": metrics["mrr"]})
    return pd.DataFrame(rows).round(3)


def gamma_at_coverage(cfg: CormSettings = None, coverage: float | None = None,
                      variant: str = "corm") -> float:
    """The γ at which Algorithm 1 answers ``coverage`` (default ``cfg.abstain_coverage``) of the
    *validation* questions' perturbed queries (held-out training questions, never a test
    question): the highest threshold with P(S[0] ≥ γ) ≥ coverage, read off their S[0] over the
    same M dense candidates as at test. A calibration: it trains the critic when it is missing."""
    cfg = settings(cfg)
    coverage = cfg.abstain_coverage if coverage is None else coverage
    if not 0 < coverage <= 1:  # checked before any critic is trained
        raise ValueError(f"coverage must be in (0, 1], got {coverage}")
    _, val_groups, _ = training_groups(cfg)
    queries = sorted({g["query"] for g in val_groups})
    ranked = _validation_ranking(cfg, variant).ranked(queries, _m_inference(cfg))
    return threshold_at_coverage([scores[0] for _, scores in ranked], coverage)


def prior_weight(cfg: CormSettings = None, variant: str = "corm"):
    """The retrieval prior's λ (``corm.method``), chosen on the critic's *validation* questions'
    biased queries (held-out training questions) over the same M dense candidates as at test:
    the λ whose ranking puts a gold-bearing passage highest (MRR). Returns (λ, MRR per λ).

    Chosen once per process and config: building ``corm-prior`` asks for it each time."""
    import pandas as pd

    lam, rows = _prior_weight(settings(cfg), variant)
    return lam, pd.DataFrame(rows)


@memo.cached(8, per_runs_folder=True)
def _prior_weight(cfg: CormConfig, variant: str) -> tuple[float, list[dict]]:
    from robustkit.corm.method import choose_lambda

    _, val_groups, _ = training_groups(cfg)
    answers = {q.id: q.answers for q in train_questions(cfg)}
    queries = sorted({(g["query"], g["question_id"]) for g in val_groups})
    corpus = resources.corpus_for(cfg.scale)
    hits = resources.retriever_for(cfg.scale).search([q for q, _ in queries], _m_inference(cfg))
    candidates = [[corpus[h.doc_id] for h in row] for row in hits]
    scores = _validation_ranking(cfg, variant).reranker.score([q for q, _ in queries], candidates, None)
    relevant = [[has_answer(d, answers[qid]) for d in docs] for (_, qid), docs in zip(queries, candidates)]
    return choose_lambda(scores, [[h.score for h in row] for row in hits], relevant)


def _validation_ranking(cfg: CormConfig, variant: str):
    """The scale's dense top M reranked by one critic variant, as Algorithm 1 ranks at test."""
    from robustkit.baselines import CrossEncoderReranker, RerankedRetriever

    return RerankedRetriever(resources.retriever_for(cfg.scale),
                             CrossEncoderReranker(variant, critic_scorer(cfg, variant)),
                             m=_m_inference(cfg), corpus=resources.corpus_for(cfg.scale))


def _m_inference(cfg: CormConfig) -> int:
    """M at inference, capped by the corpus (a small corpus has fewer candidates)."""
    return min(cfg.m_inference, len(resources.corpus_for(cfg.scale)))


def export_groups(cfg: CormSettings, path: str | Path) -> Path:
    """Write the critic's training groups (with texts) for a GPU run elsewhere."""
    train_groups, val_groups, _ = training_groups(cfg)
    write_jsonl(path, train_groups + val_groups)
    return Path(path)


# --- internals ---------------------------------------------------------------------------------

def _perturbations(cfg: CormConfig, questions: list[Question], k: int, name: str,
                   corpus: Corpus | None = None) -> list[dict]:
    from robustkit.corm.perturb import PROMPTS_VERSION, llm_share, synthesize

    adversary = resources.generator_for(cfg.scale, "adversary", system_prompt=None)
    pool, corpus = train_questions(cfg), corpus or resources.corpus_for(cfg.scale)
    inputs = {"questions": digest(_question_rows(questions)), "pool": digest(_question_rows(pool)),
              "corpus": digest([[p.id, p.text] for p in corpus]), "k": k, "adversary": adversary.identity(),
              "prompts": PROMPTS_VERSION, "seed": cfg.scale.seed}

    def build(out: Path, scratch: Path) -> dict:
        records = synthesize(questions, adversary, k, corpus=corpus, pool_questions=pool, seed=cfg.scale.seed)
        write_jsonl(out, records)
        return {"written by the LLM": {kind: f"{n}/{total}" for kind, (n, total) in llm_share(records).items()}}

    # rewriting questions trains nothing: a user's own questions get theirs under load-only too
    return stage(run_dir(cfg) / f"{name}.jsonl", inputs, build, read_jsonl, trains=False)


def _question_rows(questions: list[Question]) -> list:
    return [[q.id, q.text, list(q.answers), q.answer_type] for q in questions]
