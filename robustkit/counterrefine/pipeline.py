"""CounterRefine's run: Baseline-RAG, CounterRefine and its Table 4 ablations on the same
questions, corpus, generator and draft, scored by normalised match and token F1 — staged under
``runs/<scale>/counterrefine/``.

    results = rk.counterrefine.run(cfg)      # one row per (dataset, method, question)

Which questions: ``counterrefine.data``; the methods: ``counterrefine.build``; the REVISE
threshold: ``counterrefine.train``. Baseline-RAG (``dense``) is CounterRefine's own draft (step
1), so the two differ only by what the second pass changes.
"""
from __future__ import annotations

import pandas as pd

from robustkit import resources
from robustkit.counterrefine.build import IDS, build
from robustkit.counterrefine.config import CounterRefineConfig, settings
from robustkit.counterrefine.data import eval_sets, run_dir
from robustkit.counterrefine.method import PROMPT_VERSION
from robustkit.counterrefine.train import calibrate
from robustkit.judges import NormalisedMatch
from robustkit.methods import evaluate
from robustkit.metrics import token_f1
from robustkit.models import resolve_model
from robustkit.qa_sets import QASet
from robustkit.reader import READER_VERSION

BASELINE = "dense"  # Baseline-RAG: CounterRefine's draft, plain dense RAG over its k snippets
METHODS = (BASELINE, *IDS)


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
        "knobs": cfg.knobs(), "seed": cfg.scale.seed,
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
    systems = {name: build(name, cfg, corpus=ev.corpus, retriever=ev.retriever, revise_above=threshold)
               for name in IDS}
    results = evaluate(systems, queries, run_dir(cfg) / "results" / ev.name, judge)
    return pd.concat([_drafts(results[results["method"] == "counterrefine"], judge), results], ignore_index=True)


def _drafts(refined: pd.DataFrame, judge) -> pd.DataFrame:
    """Baseline-RAG's rows: CounterRefine's drafts, their passages, retrieval, call and time."""
    traces = refined["trace"]
    return refined.assign(
        method=BASELINE, answer=[t["draft"] for t in traces], abstained=False,
        correct=[float(ok) for ok in judge(list(refined["query"]), [t["draft"] for t in traces], list(refined["answers"]))],
        passage_ids=[t["draft_ids"] for t in traces], retrieval_calls=1, model_calls=1,
        latency_s=[t["draft_s"] for t in traces], trace=None)
