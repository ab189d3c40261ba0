"""FVA-RAG's run: every method on the same questions, corpora (cache A and B), generator and
retrieval budget, scored by TruthfulQA's own rule through the kit's one evaluation path
(``methods.evaluate``: staged per method under ``runs/<scale>/fva/results/<dataset>/<cache>/``).

    results = rk.fva.run(cfg)        # one row per (dataset, cache, method, question)

Which questions and caches: ``fva.data``; the methods: ``fva.build``; the adjudicator and CRAG's
evaluator: ``fva.train``.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd

from robustkit import memo, resources
from robustkit import methods as kit_methods
from robustkit.artifacts import NotStaged, stage
from robustkit.data import Corpus, Misconception
from robustkit.data.records import read_jsonl, write_jsonl
from robustkit.fva.build import IDS, build
from robustkit.fva.config import FVAConfig, settings
from robustkit.fva.data import EvalSet, eval_sets, queries, run_dir, stratum
from robustkit.fva.method import PROMPT_VERSION
from robustkit.fva.train import adjudicator, calibration_questions, crag_evaluator_identity
from robustkit.judges import AnswerConflict
from robustkit.models import resolve_model
from robustkit.reader import READER_VERSION
from robustkit.retrieval import DenseRetriever, load_embedder

METHODS = IDS  # every method the run answers with, in the tables' order
TRUTH_RULE = "rouge"  # the headline similarity of TruthfulQA's rule; "embedding" is reported beside


def run_log(cfg: FVAConfig | None = None, judge=None) -> dict:
    """The paper's reproducibility checklist: model ids, prompt hashes, dataset fingerprints,
    corpus sha256, adjudicator and τ — printed by the report and recorded by the τ curve's
    revisions (each method's results record its own ``identity()``)."""
    cfg = settings(cfg)
    scale = cfg.scale
    return {
        "generator": resources.generator_for(scale).identity(),
        "embedder": resolve_model("embedder", scale, verbose=False).name,
        "prompts": {"reader": READER_VERSION, "fva": PROMPT_VERSION},
        "datasets": {s.name: {"fingerprint": s.fingerprint, "questions": [i.id for i in s.items],
                              "corpora": {c: {"name": x.name, "sha256": x.checksum} for c, x in s.caches.items()}}
                     for s in eval_sets(cfg)},
        "adjudicator": judge.name if judge is not None else cfg.adjudicator, "tau": cfg.tau,
        "crag evaluator": _staged_or_missing(crag_evaluator_identity, cfg),
        "knobs": {"k": cfg.k, "m": cfg.m_kill_queries, "max_words": cfg.max_words, "draft_tokens": cfg.draft_tokens,
                  "kill_tokens": cfg.kill_tokens, "revision_tokens": cfg.revision_tokens},
        "seed": scale.seed, "truth rule": TRUTH_RULE,
    }


def run(cfg: FVAConfig | None = None, *, judge=None) -> pd.DataFrame:
    """Every method × cache × evaluated question, scored by TruthfulQA's rule (``TRUTH_RULE``)
    through ``methods.evaluate``: each method's rows staged per dataset and cache, reused while
    what decided them matches. Beside ``correct``: the embedding rule's verdict, whether the
    answer is informative, the rule's margin (``diff``), whether the method intervened, and for
    FVA-RAG the lexical second opinion on its anti-context (``answer_conflict``)."""
    cfg = settings(cfg)
    judge = judge or adjudicator(cfg)
    embedder = load_embedder(cfg.scale)
    frames = [_beside_the_rule(scored(cfg, ev, cache, judge), ev.items, ev.caches[cache], embedder)
              for ev in eval_sets(cfg) for cache in ev.caches]
    return pd.concat(frames, ignore_index=True)


def scored(cfg: FVAConfig, ev: EvalSet, cache: str, judge=None) -> pd.DataFrame:
    """Every method over one dataset and cache, scored by TruthfulQA's rule (``TRUTH_RULE``)
    through ``methods.evaluate``, staged under ``runs/<scale>/fva/results/<dataset>/<cache>``."""
    from robustkit.truthfulqa import TruthfulQAJudge

    systems = {name: build_over(name, cfg, ev, cache, judge) for name in METHODS}
    return kit_methods.evaluate(systems, queries(ev, cache), run_dir(cfg) / "results" / ev.name / cache,
                                TruthfulQAJudge(ev.items, TRUTH_RULE))


def build_over(name: str, cfg: FVAConfig, ev: EvalSet, cache: str, judge=None):
    """One method over one dataset's cache as the run builds it: searched by the cache's dense
    retriever, FVA-RAG deciding with ``judge`` (default ``train.adjudicator(cfg)``), CRAG's
    thresholds set on training misconceptions."""
    return build(name, cfg, corpus=ev.caches[cache], retriever=_retriever(ev.caches[cache], cfg.scale, ev.caches["B"]),
                 adjudicator=judge, calibration=calibration_questions())


def _beside_the_rule(scored: pd.DataFrame, items: list[Misconception], cache: Corpus, embedder) -> pd.DataFrame:
    """The columns FVA-RAG's tables read beside ``correct``, computed from the scored rows (no model
    call but the embedder's)."""
    from robustkit.truthfulqa import SIMILARITIES, score_generations

    by_id = {i.id: i for i in items}
    asked = [by_id[q] for q in scored["question_id"]]
    rule = {s: score_generations(list(scored["answer"]), asked, similarity=s, embedder=embedder)
            for s in SIMILARITIES}
    fva = [(q, t) for m, q, t in zip(scored["method"], scored["query"], scored["trace"]) if m == "fva-rag"]
    conflicts = iter(AnswerConflict().contradiction(
        [q for q, _ in fva], [t["draft"] for _, t in fva],
        [[cache[d].content for d in t["anti_context_ids"]] for _, t in fva]) if fva else [])
    return scored.assign(**{
        "correct (embedding)": rule["embedding"]["true"].astype(float).to_numpy(),
        "informative": rule[TRUTH_RULE]["informative"].astype(bool).to_numpy(),
        "diff": rule[TRUTH_RULE]["diff"].astype(float).to_numpy(),
        "intervened": [_intervened(m, t) for m, t in zip(scored["method"], scored["trace"])],
        "answer_conflict": [[float(x) for x in next(conflicts)] if m == "fva-rag" else None
                            for m in scored["method"]]})


def revisions_at_any_tau(cfg: FVAConfig | None = None, results: pd.DataFrame | None = None, *,
                         judge=None) -> pd.DataFrame:
    """What FVA-RAG would answer at *any* τ (staged): the revision a draft gets does not depend on
    τ (its prompt is q, D_pos, D_neg and the draft), so writing it for the drafts the run kept too
    makes accuracy at every τ exact — FVA's answer is the revision where max contradiction >= τ
    and the draft elsewhere. One row per FVA-RAG question: its max contradiction, whether it has
    an anti-context, and the truth of its draft and of its revision. A display, not a tuning
    step: τ stays the paper's 0.5, fixed before any evaluated question was seen."""
    from robustkit.truthfulqa import score_generations

    cfg = settings(cfg)
    judge = judge or adjudicator(cfg)
    results = run(cfg, judge=judge) if results is None else results

    def build(out: Path, scratch: Path) -> dict:
        rows, written = [], 0
        for ev in eval_sets(cfg):
            by_id = {i.id: i for i in ev.items}
            for cache_name, cache in ev.caches.items():
                fva = build_over("fva-rag", cfg, ev, cache_name, judge)
                part = results[(results["dataset"] == ev.name) & (results["cache"] == cache_name)
                               & (results["method"] == "fva-rag")]
                traces = list(part["trace"])
                todo = [j for j, t in enumerate(traces) if t["revision"] is None and t["anti_context_ids"]]
                extra = dict(zip(todo, fva.revise(
                    [part["query"].iloc[j] for j in todo], [traces[j]["draft"] for j in todo],
                    [[cache[d] for d in part["passage_ids"].iloc[j]] for j in todo],
                    [[cache[d] for d in traces[j]["anti_context_ids"]] for j in todo]) if todo else []))
                written += len(todo)
                items = [by_id[q] for q in part["question_id"]]
                revisions = [t["revision"] if t["revision"] is not None else extra.get(j, t["draft"])
                             for j, t in enumerate(traces)]
                truth = {name: score_generations(texts, items, similarity=TRUTH_RULE)["true"].to_numpy()
                         for name, texts in (("draft", [t["draft"] for t in traces]), ("revision", revisions))}
                rows += [{"dataset": ev.name, "cache": cache_name, "question_id": q,
                          "max_contradiction": t["max_contradiction"], "anti_context": bool(t["anti_context_ids"]),
                          "draft correct": float(truth["draft"][j]), "revision correct": float(truth["revision"][j]),
                          "revision": revisions[j], "written for the curve": j in extra}
                         for j, (q, t) in enumerate(zip(part["question_id"], traces))]
        write_jsonl(out, rows)
        return {"rows": len(rows), "revisions written": written}

    # CRAG's evaluator does not touch FVA-RAG's revisions, so its state is not among their inputs
    inputs = {**{k: v for k, v in run_log(cfg, judge).items() if k != "crag evaluator"},
              "results": _digest(results)}
    return pd.DataFrame(stage(run_dir(cfg) / "revisions_any_tau.jsonl", inputs, build, read_jsonl, trains=False))


def _staged_or_missing(identity, cfg):
    """A trained part's identity, or "not built yet": a run log describes, it never trains."""
    try:
        return identity(cfg)
    except NotStaged:
        return "not built yet"


def _digest(results: pd.DataFrame) -> str:
    """A checksum of the FVA-RAG rows a derived artifact was computed from."""
    fva = results[results["method"] == "fva-rag"]
    return hashlib.sha256(fva[["dataset", "cache", "question_id", "trace"]].to_json().encode()).hexdigest()[:16]


def mc_table(cfg: FVAConfig | None = None) -> pd.DataFrame:
    """MC1 / MC2 of the generator alone (no retrieval) on the first ``n_mc`` evaluated TruthfulQA
    questions (staged): the reader's own truthfulness, the floor the methods start from."""
    from robustkit.truthfulqa import load_mc_task, mc_scores

    cfg = settings(cfg)
    items = next(s for s in eval_sets(cfg) if s.name == "truthfulqa").items
    items = items[:cfg.n_mc] if cfg.n_mc else items
    wanted = {i.id for i in items}
    entries = [e for e in load_mc_task() if e.item_id in wanted]
    generator = resources.generator_for(cfg.scale)
    inputs = {"generator": generator.identity(), "questions": sorted(wanted)}

    def build(out: Path, scratch: Path) -> dict:
        write_jsonl(out, mc_scores(generator, entries).to_dict("records"))
        return {"questions": len(entries)}

    scores = pd.DataFrame(stage(run_dir(cfg) / "mc.jsonl", inputs, build, read_jsonl, trains=False))
    summary = scores.groupby(scores["category"].map(stratum))[["mc1", "mc2"]].mean()
    summary.loc["all"] = scores[["mc1", "mc2"]].mean()
    return (100 * summary).round(1).assign(n=scores.groupby(scores["category"].map(stratum)).size()
                                           .reindex(summary.index).fillna(len(scores)).astype(int))


def _intervened(method: str, trace: dict):
    """Did the method override its first answer? FVA: the draft was falsified; CRAG: its
    evaluator triggered a corrective retrieval; others: no such step (None)."""
    if method == "fva-rag":
        return trace["verdict"] == "falsified"
    if method == "crag":
        return trace["crag_action"] != "correct"
    return None


_RETRIEVERS: dict[tuple, DenseRetriever] = memo.holding(f"{__name__}._RETRIEVERS", {})


def _retriever(cache: Corpus, scale, superset: Corpus | None = None) -> DenseRetriever:
    spec = resolve_model("embedder", scale, verbose=False)
    key = (cache.checksum, spec)
    if key not in _RETRIEVERS:
        if superset is not None and superset.checksum != cache.checksum:
            _RETRIEVERS[key] = _retriever(superset, scale).restricted_to(cache)
        else:
            _RETRIEVERS[key] = DenseRetriever(cache, load_embedder(spec))
    return _RETRIEVERS[key]


