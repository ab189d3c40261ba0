"""FVA-RAG's run: every method on the same questions, corpora (cache A and B), generator and
retrieval budget, scored by TruthfulQA's own rule through the kit's one evaluation path
(``methods.evaluate``: staged per method under ``runs/<scale>/fva/results/<dataset>/<cache>/``).

    sets = rk.fva.eval_sets(cfg)     # which questions over which two frozen corpora
    results = rk.fva.run(cfg)        # one row per (dataset, cache, method, question)

The two caches follow the paper: **A** is the base corpus, **B** adds counter-evidence. For
TruthfulQA they are the kit's frozen statement corpora (``rk.data.corpus("truthfulqa")`` and
``"truthfulqa_enriched"``); for data/mini's misconception questions, A is data/mini without its
debunking passages and B is all of data/mini.
"""
from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from robustkit import memo, resources
from robustkit import methods as kit_methods
from robustkit.adaptive import CRAG, SelfRAG, calibrate_thresholds
from robustkit.artifacts import stage
from robustkit.baselines import FirstStage, RerankedRAG
from robustkit.config import runs_dir
from robustkit.data import (Corpus, Misconception, corpus, load, mini_corpus, mini_fingerprint,
                            mini_misconceptions)
from robustkit.data.records import read_jsonl, write_jsonl
from robustkit.fva.config import FVAConfig, settings
from robustkit.fva.method import FVARAG, PROMPT_VERSION
from robustkit.judges import AnswerConflict, NLIAdjudicator
from robustkit.models import resolve_model
from robustkit.reader import READER_VERSION
from robustkit.retrieval import DenseRetriever, load_embedder

METHODS = ("vanilla", "self-rag", "crag", "fva-rag")
# the paper's five TruthfulQA categories; every other category is pooled as "other"
PAPER_CATEGORIES = ("Myths and Fairytales", "Paranormal", "Superstitions", "Fiction", "Health")
TRUTH_RULE = "rouge"  # the headline similarity of TruthfulQA's rule; "embedding" is reported beside


@dataclass
class EvalSet:
    name: str
    items: list[Misconception]
    caches: dict[str, Corpus]  # "A" (base) and "B" (counter-evidence enriched)
    fingerprint: str


def run_dir(cfg: FVAConfig | None = None) -> Path:
    path = runs_dir(settings(cfg).scale) / "fva"
    path.mkdir(parents=True, exist_ok=True)
    return path


def eval_sets(cfg: FVAConfig | None = None) -> list[EvalSet]:
    """The evaluated questions: TruthfulQA (all 817, or a seeded sample stratified over the paper's
    categories at tiny), and at tiny also data/mini's held-out misconception questions."""
    return _eval_sets(settings(cfg))


@memo.cached(4)  # the run log, the run, the notebook's tables all ask: load and build once
def _eval_sets(cfg: FVAConfig) -> list[EvalSet]:
    truthfulqa = load("truthfulqa")
    items = stratified_sample(truthfulqa.records, cfg.n_truthfulqa, cfg.scale.seed)
    sets = [EvalSet("truthfulqa", items, {"A": corpus("truthfulqa"), "B": corpus("truthfulqa_enriched")},
                    truthfulqa.fingerprint)]
    if cfg.scale.dataset == "mini":
        full = mini_corpus()
        base = Corpus([p for p in full if p.kind != "debunk"], "mini_base")
        held_out = resources.sample(mini_misconceptions("test"), cfg.n_mini, cfg.scale.seed)
        sets.insert(0, EvalSet("mini", held_out, {"A": base, "B": full}, mini_fingerprint()))
    return sets


def corpora(cfg: FVAConfig | None = None) -> dict[tuple[str, str], Corpus]:
    """(dataset, cache) → its frozen corpus, for looking up the passages a run cites."""
    return {(s.name, cache): c for s in eval_sets(cfg) for cache, c in s.caches.items()}


def describe(cfg: FVAConfig | None = None) -> pd.DataFrame:
    """One row per (dataset, cache): questions, passages and the corpus checksum."""
    return pd.DataFrame([{"dataset": s.name, "cache": cache, "questions": len(s.items), "corpus": c.name,
                          "passages": len(c), "sha256": c.checksum[:12]}
                         for s in eval_sets(cfg) for cache, c in s.caches.items()])


def stratified_sample(items: list[Misconception], n: int, seed: int) -> list[Misconception]:
    """``n`` items, as equal a share as each stratum allows from each of the paper's five
    categories and "other" (all when n is 0), drawn with ``seed``, in id order."""
    if not n or n >= len(items):
        return list(items)
    strata: dict[str, list] = {}
    for item in items:
        strata.setdefault(stratum(item.category), []).append(item)
    rng, chosen = random.Random(seed), []
    pools = {name: rng.sample(pool, len(pool)) for name, pool in sorted(strata.items())}
    while len(chosen) < n:  # round-robin over strata until n are drawn
        for pool in pools.values():
            if pool and len(chosen) < n:
                chosen.append(pool.pop())
    return sorted(chosen, key=lambda item: item.id)


def stratum(category: str) -> str:
    return category if category in PAPER_CATEGORIES else "other"


def calibration_questions() -> list[str]:
    """CRAG's threshold questions: data/mini's *training* misconception questions (never evaluated)."""
    return [m.text for m in mini_misconceptions("train")]


def adjudicator(cfg: FVAConfig | None = None):
    """The adjudicator ``cfg.adjudicator`` names; prints which model decides."""
    cfg = settings(cfg)
    if cfg.adjudicator == "answer-conflict":
        print("[robustkit] FVA adjudicator: answer-conflict (deterministic lexical check)")
        return AnswerConflict()
    from robustkit.nli import nli_model

    return NLIAdjudicator(nli_model(cfg.scale, progress=False))


@memo.cached(4, per_runs_folder=True)  # one scorer per config, and one line saying which
def crag_evaluator(cfg: FVAConfig | None = None):
    """CRAG's retrieval evaluator ``cfg.crag_evaluator`` names: the kit's relevance
    cross-encoder (trained on demand from a training split, never on evaluated questions) or None
    for the dense cosine. Prints which one grades."""
    cfg = settings(cfg)
    if cfg.crag_evaluator == "dense-cosine":
        print("[robustkit] CRAG evaluator: the dense retriever's question-passage cosine")
        return None
    from robustkit.crossencoder.relevance import describe, recipe, relevance_scorer

    chosen = recipe(cfg.scale)
    print(f"[robustkit] CRAG evaluator: {describe(cfg.scale, chosen)}")
    return relevance_scorer(cfg.scale, chosen, progress=False)


def methods(cfg: FVAConfig, cache: Corpus, judge, *, grader, superset: Corpus | None = None) -> dict:
    """Every method over one corpus: one dense retriever, one generator, k passages per call.
    ``judge`` and ``grader`` are prepared by the caller, where training shows: FVA-RAG's
    adjudicator (``adjudicator(cfg)``) and CRAG's retrieval evaluator (``crag_evaluator(cfg)``;
    None is the dense cosine). With ``superset`` (cache B, holding all of cache A), A's retriever
    reuses B's embeddings."""
    scale = cfg.scale
    generator = resources.generator_for(scale)
    retriever = _retriever(cache, scale, superset)
    lower, upper = calibrate_thresholds(retriever, cache, calibration_questions(), cfg.k, evaluator=grader)
    words = cfg.max_words or scale.max_passage_words
    return {
        "vanilla": RerankedRAG(retriever, FirstStage("dense"), generator, cache, m=cfg.k, c=cfg.k,
                               max_words=words, name="vanilla"),
        "self-rag": SelfRAG(retriever, generator, cache, k=cfg.k, max_words=words),
        "crag": CRAG(retriever, generator, cache, upper=upper, lower=lower, evaluator=grader, k=cfg.k,
                     max_words=words),
        "fva-rag": FVARAG(retriever, generator, cache, judge, k=cfg.k, m=cfg.m_kill_queries, tau=cfg.tau,
                          max_words=words, draft_tokens=cfg.draft_tokens, kill_tokens=cfg.kill_tokens,
                          revision_tokens=cfg.revision_tokens),
    }


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
        "crag evaluator": _crag_identity(cfg),
        "knobs": {"k": cfg.k, "m": cfg.m_kill_queries, "max_words": cfg.max_words, "draft_tokens": cfg.draft_tokens,
                  "kill_tokens": cfg.kill_tokens, "revision_tokens": cfg.revision_tokens},
        "seed": scale.seed, "truth rule": TRUTH_RULE,
    }


def queries(ev: EvalSet, cache: str) -> pd.DataFrame:
    """The queries table of one dataset and cache: each question once, its correct answers as the
    gold ``answers``, its incorrect ones, category and stratum carried along (and recorded in
    the results' manifests: other references are other results)."""
    return pd.DataFrame([{"query_id": i.id, "question_id": i.id, "query": i.text, "answers": list(i.correct_answers),
                          "incorrect_answers": list(i.incorrect_answers), "dataset": ev.name, "cache": cache,
                          "category": i.category, "stratum": stratum(i.category)} for i in ev.items])


def run(cfg: FVAConfig | None = None, *, judge=None) -> pd.DataFrame:
    """Every method × cache × evaluated question, scored by TruthfulQA's rule (``TRUTH_RULE``)
    through ``methods.evaluate``: each method's rows staged per dataset and cache, reused while
    what decided them matches. Beside ``correct``: the embedding rule's verdict, whether the
    answer is informative, the rule's margin (``diff``), whether the method intervened, and for
    FVA-RAG the lexical second opinion on its anti-context (``answer_conflict``)."""
    cfg = settings(cfg)
    judge, grader = judge or adjudicator(cfg), crag_evaluator(cfg)
    embedder = load_embedder(cfg.scale)
    frames = [_beside_the_rule(scored(cfg, ev, cache, judge, grader), ev.items, ev.caches[cache], embedder)
              for ev in eval_sets(cfg) for cache in ev.caches]
    return pd.concat(frames, ignore_index=True)


def scored(cfg: FVAConfig, ev: EvalSet, cache: str, judge, grader) -> pd.DataFrame:
    """Every method over one dataset and cache, scored by TruthfulQA's rule (``TRUTH_RULE``)
    through ``methods.evaluate``, staged under ``runs/<scale>/fva/results/<dataset>/<cache>``."""
    from robustkit.truthfulqa import TruthfulQAJudge

    systems = methods(cfg, ev.caches[cache], judge, grader=grader, superset=ev.caches["B"])
    return kit_methods.evaluate(systems, queries(ev, cache), run_dir(cfg) / "results" / ev.name / cache,
                                TruthfulQAJudge(ev.items, TRUTH_RULE))


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
                fva = methods(cfg, cache, judge, grader=None, superset=ev.caches["B"])["fva-rag"]  # CRAG unused
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

    inputs = {**run_log(cfg, judge), "results": _digest(results)}
    return pd.DataFrame(stage(run_dir(cfg) / "revisions_any_tau.jsonl", inputs, build, read_jsonl))


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

    scores = pd.DataFrame(stage(run_dir(cfg) / "mc.jsonl", inputs, build, read_jsonl))
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


def _crag_identity(cfg: FVAConfig) -> dict | str:
    if cfg.crag_evaluator == "dense-cosine":
        return "dense-cosine"
    from robustkit.crossencoder.relevance import identity

    return identity(cfg.scale)
