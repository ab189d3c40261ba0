"""AlignRAG's run: every method on the same questions, documents and generator — chain of thought
without retrieval, vanilla reasoning RAG, Self-Refine, the frozen critic, the critic trained
without contrastive critiques, and AlignRAG's critic trained by CFT and by CPO — scored at every
refinement round; one artifact under ``runs/<scale>/alignrag/``.

    results = rk.alignrag.run(cfg)   # one row per (dataset, method, question, iteration)

In-domain: data/mini's factual questions (tiny) or NQ-open over the oracle corpus (small);
out-of-domain: data/mini's two-hop questions or HotpotQA with its own paragraphs. The critics
train on in-domain training questions only, never on an evaluated one.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from robustkit import resources
from robustkit.alignrag.config import AlignRAGConfig, settings
from robustkit.alignrag.critique import answer_in
from robustkit.alignrag.method import PROMPT_VERSION, SELF, AlignRAG, ChainOfThought, align
from robustkit.alignrag.train import VARIANTS, critic_generator, eval_sets, run_dir, training_corpus
from robustkit.artifacts import read_manifest, stage
from robustkit.data.records import read_jsonl, write_jsonl
from robustkit.judges import NormalisedMatch
from robustkit.methods import Query
from robustkit.metrics import token_f1
from robustkit.models import resolve_model

COT, VANILLA = "cot (no retrieval)", "vanilla rag"
# refiner -> its critic: SELF (Self-Refine), "frozen" (the untrained critic LM) or a trained variant
CRITICS = {"self-refine": SELF, "frozen critic": "frozen", "critic w/o ccs": "w/o ccs",
           "alignrag (cft)": "cft", "alignrag (cpo)": "cpo"}
METHODS = (COT, VANILLA, *CRITICS)


def describe(cfg: AlignRAGConfig | None = None) -> pd.DataFrame:
    """One row per dataset: its domain, evaluated and training questions, corpus and checksum."""
    return pd.DataFrame([{"dataset": s.name, "domain": domain, "questions": len(s.questions),
                          "training questions": len(s.train) if domain == "in-domain" else 0,
                          "corpus": s.corpus.name, "passages": len(s.corpus), "retriever": s.retriever.name,
                          "sha256": s.corpus.checksum[:12]} for domain, s in eval_sets(cfg).items()])


def refiners(cfg: AlignRAGConfig, qaset) -> dict[str, AlignRAG]:
    """Every refiner over one dataset: one generator, one retriever, one k, T rounds each."""
    generator = resources.generator_for(cfg.scale)
    common = dict(iterations=cfg.iterations, k=cfg.k, max_words=cfg.max_words or cfg.scale.max_passage_words,
                  rationale_tokens=cfg.rationale_tokens, answer_tokens=cfg.answer_tokens,
                  critique_tokens=cfg.critique_tokens)
    return {name: AlignRAG(qaset.retriever, generator, qaset.corpus, critic=_critic(cfg, critic, generator),
                           name=name, **common) for name, critic in CRITICS.items()}


def _critic(cfg: AlignRAGConfig, critic: str, generator):
    if critic == SELF:
        return SELF
    if critic == "frozen":  # the critic LM before training: the base model with the critic's prompt
        return generator
    return critic_generator(cfg, critic)


def run_log(cfg: AlignRAGConfig | None = None) -> dict:
    """What decides the results: models, prompt hash, questions, corpora, training data, knobs."""
    cfg = settings(cfg)
    training_corpus(cfg)
    return {
        "generator": resources.generator_for(cfg.scale).identity(),
        "embedder": resolve_model("embedder", cfg.scale, verbose=False).name,
        "prompts": PROMPT_VERSION,
        "critics": {v: critic_generator(cfg, v).model_id for v in VARIANTS},
        "training": read_manifest(run_dir(cfg) / "training.jsonl")["sha256"],
        "datasets": {s.name: {"fingerprint": s.fingerprint, "questions": [q.id for q in s.questions],
                              "corpus": s.corpus.checksum} for s in eval_sets(cfg).values()},
        "knobs": {k: v for k, v in vars(cfg).items() if k != "scale"}, "seed": cfg.scale.seed,
    }


def run(cfg: AlignRAGConfig | None = None) -> pd.DataFrame:
    """Every method × evaluated question × refinement round, scored (staged: reused when the run
    log matches). Each refiner's round 0 is vanilla reasoning RAG's answer."""
    cfg = settings(cfg)
    log = run_log(cfg)  # trains (or reuses) the critics before any evaluation

    def build(out: Path, scratch: Path) -> dict:
        rows = []
        for group in _sharing_a_retriever(eval_sets(cfg)):  # one batch of calls per search backend
            questions = [q for _, s in group for q in s.questions]
            queries = [Query(q.id, q.id, q.text) for q in questions]
            answers = {COT: ChainOfThought(resources.generator_for(cfg.scale), rationale_tokens=cfg.rationale_tokens,
                                           answer_tokens=cfg.answer_tokens).answer(queries)}
            refined = align(list(refiners(cfg, group[0][1]).values()), queries)
            answers[VANILLA] = refined["self-refine"]  # its round 0 is y₀, shared by every refiner
            answers.update(refined)
            # retrieval is a property of the question (every method but CoT reads the same documents)
            corpus = group[0][1].corpus
            informative = {a.question_id: any(answer_in(corpus[i].content, q.answers) for i in a.passage_ids)
                           for q, a in zip(questions, refined["self-refine"])}
            start = 0
            for domain, qaset in group:
                span = slice(start, start + len(qaset.questions))
                start = span.stop
                for method, batch in answers.items():
                    rows += _rows(qaset, domain, method, batch[span], informative, last_only=method == VANILLA)
        write_jsonl(out, rows)
        return {}

    return pd.DataFrame(stage(run_dir(cfg) / "results.jsonl", log, build, read_jsonl))


def _sharing_a_retriever(sets: dict) -> list[list[tuple]]:
    """The (domain, set) pairs grouped by the retriever they search (data/mini's two sets share one)."""
    groups: dict[int, list] = {}
    for domain, qaset in sets.items():
        groups.setdefault(id(qaset.retriever), []).append((domain, qaset))
    return list(groups.values())


def _rows(qaset, domain: str, method: str, answers, informative: dict, last_only: bool) -> list[dict]:
    judge, rows = NormalisedMatch(), []
    for q, a in zip(qaset.questions, answers):
        steps = a.trace["trajectory"][:1] if last_only else a.trace["trajectory"]
        verdicts = judge([q.text] * len(steps), [s["answer"] for s in steps], [q.answers] * len(steps))
        for step, ok in zip(steps, verdicts):
            rows.append({"dataset": qaset.name, "domain": domain, "method": method, "question_id": q.id,
                         "question": q.text, "gold": list(q.answers), "iteration": step["iteration"],
                         "answer": step["answer"], "rationale": step["reasoning"], "critique": step["critique"],
                         "correct": float(ok), "f1": token_f1(step["answer"], q.answers),
                         "informative": informative[q.id],
                         "passage_ids": list(a.passage_ids), "model_calls": 2 if last_only else a.model_calls,
                         "latency_s": a.latency_s, "critic": a.trace.get("critic")})
    return rows
