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

from pathlib import Path

import pandas as pd

from robustkit import resources
from robustkit.artifacts import read_json, stage, write_json
from robustkit.config import runs_dir
from robustkit.counterrefine.config import CounterRefineConfig, settings
from robustkit.counterrefine.method import PROMPT_VERSION, CounterRefine, calibrate_revise_threshold
from robustkit.judges import NormalisedMatch
from robustkit.methods import Query, evaluate
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
    their drafts' error rate and the refiner's P(REVISE) on each (``calibrate_revise_threshold``).
    Staged under ``runs/<scale>/counterrefine/``: calibrated once, then read."""
    if cfg.decoding == "free" or not ev.train:
        return {"revise_above": 0.5, "questions": 0, "draft_error": None}
    probe = methods(cfg, ev, revise_above=1.0)["counterrefine"]  # decide only: nothing is revised

    def build(out: Path, scratch: Path) -> dict:
        answers = probe.answer([Query(q.id, q.id, q.text) for q in ev.train])
        correct = NormalisedMatch()([q.text for q in ev.train], [a.text for a in answers],
                                    [q.answers for q in ev.train])
        threshold = calibrate_revise_threshold([a.trace["p_revise"] for a in answers], correct)
        write_json(out, {"revise_above": threshold, "questions": len(answers),
                         "draft_error": 1 - sum(correct) / len(correct)})

    inputs = {"probe": probe.identity(), "questions": [q.id for q in ev.train],
              "answers": [list(q.answers) for q in ev.train]}
    return stage(run_dir(cfg) / f"calibration-{ev.name}.json", inputs, build, read_json)


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
    """Every method × evaluated question, scored: each variant through ``methods.evaluate``
    (staged per dataset and method under ``runs/<scale>/counterrefine/results/``), after the
    dataset's REVISE threshold is calibrated (``calibrate``). Baseline-RAG's rows are
    CounterRefine's drafts (its step 1), read from the traces: the two differ only by what the
    second pass changes, and the draft's cost is its own."""
    cfg = settings(cfg)
    results = pd.concat([scored(cfg, ev) for ev in eval_sets(cfg)], ignore_index=True)
    results["f1"] = [token_f1(text, gold) for text, gold in zip(results["answer"], results["answers"])]
    results["snippets"] = results["passage_ids"].map(len)
    return results


def scored(cfg: CounterRefineConfig, ev: QASet) -> pd.DataFrame:
    """Every method over one dataset, by normalised match: Baseline-RAG, then ``METHODS``' order.
    The REVISE threshold is calibrated first (``calibrate``); each variant's rows are staged
    through ``methods.evaluate`` under ``runs/<scale>/counterrefine/results/<dataset>``."""
    judge = NormalisedMatch()
    threshold = calibrate(cfg, ev)["revise_above"]
    queries = pd.DataFrame({"query_id": [q.id for q in ev.questions], "question_id": [q.id for q in ev.questions],
                            "query": [q.text for q in ev.questions], "answers": [list(q.answers) for q in ev.questions],
                            "dataset": ev.name})
    results = evaluate(methods(cfg, ev, threshold), queries, run_dir(cfg) / "results" / ev.name, judge)
    return pd.concat([_drafts(results[results["method"] == "counterrefine"], judge), results], ignore_index=True)


def _drafts(refined: pd.DataFrame, judge) -> pd.DataFrame:
    """Baseline-RAG's rows: CounterRefine's drafts, their passages, retrieval, call and time."""
    traces = refined["trace"]
    return refined.assign(
        method=BASELINE, answer=[t["draft"] for t in traces], abstained=False,
        correct=[float(ok) for ok in judge(list(refined["query"]), [t["draft"] for t in traces], list(refined["answers"]))],
        passage_ids=[t["draft_ids"] for t in traces], retrieval_calls=1, model_calls=1,
        latency_s=[t["draft_s"] for t in traces], trace=None)
