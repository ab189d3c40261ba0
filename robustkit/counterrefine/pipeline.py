"""CounterRefine's run: Baseline-RAG, CounterRefine and its Table 4 ablations on the same
questions, corpus, generator and draft, scored by normalised match and token F1 — one artifact
under ``runs/<scale>/counterrefine/``.

    sets = rk.counterrefine.eval_sets(cfg)   # which questions, over which corpus
    results = rk.counterrefine.run(cfg)      # one row per (dataset, method, question)

``tiny``: data/mini's two-hop and factual test questions over the data/mini corpus. ``small``:
HotpotQA distractor dev, each question searching only its own paragraphs (the paper's setting),
and NQ-open over the oracle corpus. Baseline-RAG is CounterRefine's own draft (step 1), so the two
differ only by what the second pass changes.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from robustkit import resources
from robustkit.artifacts import stage
from robustkit.config import runs_dir
from robustkit.counterrefine.config import CounterRefineConfig, settings
from robustkit.counterrefine.method import PROMPT_VERSION, CounterRefine, calibrate_revise_threshold
from robustkit.data.records import read_jsonl, write_jsonl
from robustkit.judges import NormalisedMatch
from robustkit.methods import Query
from robustkit.metrics import token_f1
from robustkit.models import resolve_model
from robustkit.qa_sets import QASet, short_answer_sets
from robustkit.reader import READER_VERSION

BASELINE = "baseline-rag"
# Table 4: each ablation is CounterRefine with one part removed
VARIANTS = {"counterrefine": {}, "question-only second pass": {"second_pass": "question"},
            "no validator": {"validator": False}, "no canonicalisation": {"canonicalise": False},
            "reconsider (no new evidence)": {"second_pass": "none"}}
METHODS = (BASELINE, *VARIANTS)


def run_dir(cfg: CounterRefineConfig | None = None) -> Path:
    path = runs_dir(settings(cfg).scale) / "counterrefine"
    path.mkdir(parents=True, exist_ok=True)
    return path


def eval_sets(cfg: CounterRefineConfig | None = None) -> list[QASet]:
    """The evaluated datasets at the config's scale, each with its calibration questions (``train``)."""
    cfg = settings(cfg)
    return short_answer_sets(cfg.scale, n_multihop=cfg.n_multihop, n_factual=cfg.n_factual,
                             n_hotpotqa=cfg.n_hotpotqa, n_nq=cfg.n_nq, n_train=cfg.n_calibration)


def describe(cfg: CounterRefineConfig | None = None) -> pd.DataFrame:
    """One row per dataset: evaluated and calibration questions, the corpus and its checksum."""
    return pd.DataFrame([{"dataset": s.name, "questions": len(s.questions), "calibration": len(s.train),
                          "corpus": s.corpus.name, "passages": len(s.corpus), "retriever": s.retriever.name,
                          "sha256": s.corpus.checksum[:12]} for s in eval_sets(cfg)])


def methods(cfg: CounterRefineConfig, ev: QASet, revise_above: float = 0.5) -> dict[str, CounterRefine]:
    """CounterRefine and its ablations over one dataset: one generator, one retriever, one k."""
    generator = resources.generator_for(cfg.scale)
    common = dict(k=cfg.k, max_snippets=cfg.max_snippets, decoding=cfg.decoding, revise_above=revise_above,
                  max_words=cfg.max_words or None, draft_tokens=cfg.draft_tokens, refine_tokens=cfg.refine_tokens)
    return {name: CounterRefine(ev.retriever, generator, ev.corpus, name=name, **common, **changes)
            for name, changes in VARIANTS.items()}


def calibrate(cfg: CounterRefineConfig, ev: QASet) -> dict:
    """The REVISE threshold for constrained decoding, from the dataset's calibration questions:
    their drafts' error rate and the refiner's P(REVISE) on each (``calibrate_revise_threshold``)."""
    if cfg.decoding == "free" or not ev.train:
        return {"revise_above": 0.5, "questions": 0, "draft_error": None}
    probe = methods(cfg, ev, revise_above=1.0)["counterrefine"]  # decide only: nothing is revised
    answers = probe.answer([Query(q.id, q.id, q.text) for q in ev.train])
    correct = NormalisedMatch()([q.text for q in ev.train], [a.text for a in answers],
                                [q.answers for q in ev.train])
    threshold = calibrate_revise_threshold([a.trace["p_revise"] for a in answers], correct)
    return {"revise_above": threshold, "questions": len(answers), "draft_error": 1 - sum(correct) / len(correct)}


def run_log(cfg: CounterRefineConfig | None = None) -> dict:
    """What decides the results: models, prompt hashes, questions, corpora and knobs."""
    cfg = settings(cfg)
    return {
        "generator": resources.generator_for(cfg.scale).identity(),
        "embedder": resolve_model("embedder", cfg.scale, verbose=False).name,
        "prompts": {"reader": READER_VERSION, "counterrefine": PROMPT_VERSION},
        "datasets": {s.name: {"fingerprint": s.fingerprint, "questions": [q.id for q in s.questions],
                              "calibration": [q.id for q in s.train], "corpus": s.corpus.checksum}
                     for s in eval_sets(cfg)},
        "knobs": {k: v for k, v in vars(cfg).items() if k != "scale"}, "seed": cfg.scale.seed,
    }


def run(cfg: CounterRefineConfig | None = None) -> pd.DataFrame:
    """Every method × evaluated question, scored (staged: reused when the run log matches).
    Baseline-RAG's rows are CounterRefine's drafts."""
    cfg = settings(cfg)
    judge = NormalisedMatch()

    def build(out: Path, scratch: Path) -> dict:
        rows, stats = [], {}
        for ev in eval_sets(cfg):
            stats[ev.name] = calibration = calibrate(cfg, ev)
            queries = [Query(q.id, q.id, q.text) for q in ev.questions]
            for name, method in methods(cfg, ev, calibration["revise_above"]).items():
                answers = method.answer(queries)
                if name == "counterrefine":  # step 1 alone is Baseline-RAG
                    rows += _rows(ev, BASELINE, [a.trace["draft"] for a in answers], answers, judge, baseline=True)
                rows += _rows(ev, name, [a.text for a in answers], answers, judge)
        write_jsonl(out, rows)
        return stats

    return pd.DataFrame(stage(run_dir(cfg) / "results.jsonl", run_log(cfg), build, read_jsonl))


def _rows(ev: QASet, method: str, texts, answers, judge, baseline: bool = False) -> list[dict]:
    correct = judge([q.text for q in ev.questions], texts, [q.answers for q in ev.questions])
    return [{"dataset": ev.name, "method": method, "question_id": q.id, "question": q.text,
             "gold": list(q.answers), "answer": text, "correct": float(ok), "f1": token_f1(text, q.answers),
             "retrieval_calls": 1 if baseline else a.retrieval_calls, "model_calls": 1 if baseline else a.model_calls,
             "passage_ids": a.trace["draft_ids"] if baseline else a.passage_ids,
             "snippets": len(a.trace["draft_ids"]) if baseline else len(a.passage_ids),
             "latency_s": a.trace["draft_s"] if baseline else a.latency_s, "trace": None if baseline else json.dumps(a.trace)}
            for q, text, ok, a in zip(ev.questions, texts, correct, answers)]
