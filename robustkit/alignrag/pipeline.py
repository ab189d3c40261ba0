"""AlignRAG's run: every method on the same questions, documents and generator — chain of thought
without retrieval, vanilla reasoning RAG, Self-Refine, the frozen critic, the critic trained
without contrastive critiques, and AlignRAG's critic trained by CFT and by CPO — scored at every
refinement round. Each method scores through the kit's one evaluation path (``methods.evaluate``,
staged under ``runs/<scale>/alignrag/results/``); its rounds are read from its trace.

    results = rk.alignrag.run(cfg)   # one row per (dataset, method, question, iteration)

Which questions: ``alignrag.data``; the methods: ``alignrag.build``; the critics:
``alignrag.train``.
"""
from __future__ import annotations

import pandas as pd

from robustkit import resources
from robustkit.alignrag.build import CRITICS, IDS, build
from robustkit.alignrag.config import AlignRAGConfig, settings
from robustkit.alignrag.critique import answer_in
from robustkit.alignrag.data import eval_sets, queries, run_dir
from robustkit.alignrag.method import PROMPT_VERSION, align
from robustkit.alignrag.train import VARIANTS, critic_path
from robustkit.artifacts import manifest_path, read_manifest
from robustkit.judges import NormalisedMatch
from robustkit.methods import evaluate, pending, queries_from
from robustkit.metrics import token_f1
from robustkit.models import resolve_model

COT, VANILLA = "cot", "dense"  # chain of thought without retrieval; vanilla reasoning RAG (round 0)
METHODS = IDS


def run_log(cfg: AlignRAGConfig | None = None) -> dict:
    """What decides the results: models, prompt hash, questions, corpora, training data, knobs.
    It only reads: the training corpus and the critics are named by their staged manifests'
    sha256, or "not built yet" (``train.train_critic`` builds them; ``run`` does when it needs them)."""
    cfg = settings(cfg)

    def staged(path) -> str:
        return read_manifest(path)["sha256"] if manifest_path(path).exists() else "not built yet"

    return {
        "generator": resources.generator_for(cfg.scale).identity(),
        "embedder": resolve_model("embedder", cfg.scale, verbose=False).name,
        "prompts": PROMPT_VERSION,
        "critics": {v: staged(critic_path(cfg, v)) for v in VARIANTS},
        "training": staged(run_dir(cfg) / "training.jsonl"),
        "datasets": {s.name: {"fingerprint": s.fingerprint, "questions": [q.id for q in s.questions],
                              "corpus": s.corpus.checksum} for s in eval_sets(cfg).values()},
        "knobs": {k: v for k, v in vars(cfg).items() if k != "scale"}, "seed": cfg.scale.seed,
    }


def run(cfg: AlignRAGConfig | None = None) -> pd.DataFrame:
    """Every method × evaluated question × refinement round, scored. Each method answers through
    ``methods.evaluate`` (staged, resumable); vanilla reasoning RAG is a refiner with T = 0, so
    every refiner's round 0 is its answer. Refiners whose results are not staged yet first run
    together (``align``: one retrieval, one y₀, one batched call per round), and ``evaluate``
    replays that pass from the call cache."""
    cfg = settings(cfg)
    return pd.concat([_rounds(answers, group[0][1].corpus, [qaset.name for _, qaset in group], list(METHODS))
                      for group, answers in _scored(cfg)], ignore_index=True)


def scored(cfg: AlignRAGConfig | None = None) -> pd.DataFrame:
    """Every method's final answers, one row per (method, question) with ``dataset`` and ``domain``,
    scored by normalised match (``run`` unrolls them into rounds)."""
    return pd.concat([answers for _, answers in _scored(settings(cfg))], ignore_index=True)


def _scored(cfg: AlignRAGConfig) -> list[tuple[list[tuple], pd.DataFrame]]:
    """Per group of sets sharing a retriever: the group and its methods' scored answers, staged."""
    judge, scored_groups = NormalisedMatch(), []
    for group in _sharing_a_retriever(eval_sets(cfg)):  # one batch of calls per search backend
        asked = pd.concat([queries(qaset, domain) for domain, qaset in group], ignore_index=True)
        qaset = group[0][1]
        systems = {name: build(name, cfg, corpus=qaset.corpus, retriever=qaset.retriever) for name in IDS}
        refining = {name: systems[name] for name in CRITICS}
        folder = run_dir(cfg) / "results" / "+".join(qaset.name for _, qaset in group)
        if waiting := [refining[name] for name in pending(refining, asked, folder, judge)]:
            align(waiting, queries_from(asked))
        scored_groups.append((group, evaluate(systems, asked, folder, judge)))
    return scored_groups


def _sharing_a_retriever(sets: dict) -> list[list[tuple]]:
    """The (domain, set) pairs grouped by the retriever they search (data/mini's two sets share one)."""
    groups: dict[int, list] = {}
    for domain, qaset in sets.items():
        groups.setdefault(id(qaset.retriever), []).append((domain, qaset))
    return list(groups.values())


def _rounds(scored: pd.DataFrame, corpus, datasets: list[str], methods: list[str]) -> pd.DataFrame:
    """One row per (dataset, method, question, round) from the scored answers' trajectories, each
    round judged as the final answer is; ``informative``: vanilla RAG's documents hold a gold
    answer (retrieval is the question's: every method but CoT reads the same documents)."""
    judge, rows = NormalisedMatch(), []
    vanilla = scored[scored["method"] == VANILLA]
    informative = {q: any(answer_in(corpus[i].content, gold) for i in ids)
                   for q, ids, gold in zip(vanilla["question_id"], vanilla["passage_ids"], vanilla["answers"])}
    for row in scored.itertuples():
        steps = row.trace["trajectory"]
        verdicts = judge([row.query] * len(steps), [s["answer"] for s in steps], [row.answers] * len(steps))
        rows += [{"dataset": row.dataset, "domain": row.domain, "method": row.method, "question_id": row.question_id,
                  "question": row.query, "gold": list(row.answers), "iteration": step["iteration"],
                  "answer": step["answer"], "rationale": step["reasoning"], "critique": step["critique"],
                  "correct": float(ok), "f1": token_f1(step["answer"], row.answers),
                  "informative": informative[row.question_id], "passage_ids": list(row.passage_ids),
                  "model_calls": row.model_calls, "latency_s": row.latency_s, "critic": row.trace.get("critic")}
                 for step, ok in zip(steps, verdicts)]
    table = pd.DataFrame(rows)
    order = {name: i for i, name in enumerate(datasets)}, {name: i for i, name in enumerate(methods)}
    return table.sort_values(["dataset", "method"], kind="stable",  # dataset by dataset, as the tables read
                             key=lambda c: c.map(order[0] if c.name == "dataset" else order[1])).reset_index(drop=True)
