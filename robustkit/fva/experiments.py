"""FVA-RAG's tables from a run (``fva.pipeline.run``): Table 2 (accuracy and intervention per
method × cache), Table 3 (per category), paired McNemar tests, how the two adjudicators agree,
and falsified drafts beside their counter-evidence (the paper's Table 1).

The question is the unit everywhere: each row of a run is one (dataset, cache, method,
question), so confidence intervals resample questions and tests pair methods on the same one.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from robustkit.fva import paper
from robustkit.fva.method import is_falsified
from robustkit.metrics import bootstrap_ci, paired_tests, separation_auc

METHOD_LABELS = {"dense": "vanilla RAG", "self-rag": "Self-RAG (prompted)",
                 "crag": "CRAG", "fva-rag": "FVA-RAG"}


def table2(results: pd.DataFrame, *, seed: int = 0) -> pd.DataFrame:
    """Accuracy (TruthfulQA's rule, ROUGE-L and embedding) with a question-level 95% bootstrap CI,
    and intervention rate, per dataset × method × cache; the paper's rows appended."""
    rows = []
    for (dataset, method, cache), frame in results.groupby(["dataset", "method", "cache"], sort=False):
        low, high = bootstrap_ci(frame["correct"].to_numpy(), seed=seed)
        intervened = frame["intervened"].dropna()
        rows.append({"dataset": dataset, "method": method, "cache": cache,
                     "accuracy": 100 * frame["correct"].mean(),
                     "accuracy 95% CI": f"{100 * low:.1f}–{100 * high:.1f}",
                     "CI low": 100 * low, "CI high": 100 * high,
                     "accuracy (embedding)": 100 * frame["correct (embedding)"].mean(),
                     "informative": 100 * frame["informative"].mean(),
                     "intervention rate": 100 * intervened.astype(float).mean() if len(intervened) else np.nan,
                     "retrieval calls": frame["retrieval_calls"].mean(),
                     "model calls": frame["model_calls"].mean(), "n": len(frame), "source": "kit"})
    kit = pd.DataFrame(rows)
    published = paper.TABLE2.assign(dataset="truthfulqa", n=817)
    return pd.concat([kit, published], ignore_index=True).round(2)


def table3(results: pd.DataFrame, dataset: str = "truthfulqa") -> pd.DataFrame:
    """Per category stratum (the paper's five and "other"), per cache: count, FVA-RAG's
    intervention rate and every method's accuracy."""
    frame = results[results["dataset"] == dataset]
    accuracy = (frame.pivot_table(index=["cache", "stratum"], columns="method", values="correct",
                                  aggfunc="mean") * 100).add_prefix("accuracy ")
    fva = frame[frame["method"] == "fva-rag"].groupby(["cache", "stratum"])
    table = pd.concat([fva.size().rename("n"),
                       (fva["intervened"].apply(lambda s: s.astype(float).mean()) * 100).rename("intervention rate"),
                       accuracy], axis=1)
    return table.reset_index().round(1)


def significance(results: pd.DataFrame, reference: str = "fva-rag") -> pd.DataFrame:
    """Exact McNemar of every other method (alphabetically) against the reference on the same
    questions, per dataset and cache (``metrics.paired_tests``): n, the questions only the method
    and only the reference got right, and p — uncorrected; ``comparisons`` counts the tests and
    ``family`` says which."""
    return paired_tests(results, reference, by=["dataset", "cache"], methods=sorted(results["method"].unique()))


def adjudicator_agreement(results: pd.DataFrame, tau: float = paper.TAU) -> pd.DataFrame:
    """NLI vs answer-conflict on the same (draft, anti-context passage) pairs of FVA-RAG's run:
    how often each says "contradicts" (score >= τ), their raw agreement and Cohen's κ."""
    fva = results[results["method"] == "fva-rag"]
    nli, lexical = [], []
    for trace, conflict in zip(fva["trace"], fva["answer_conflict"]):
        scores = trace["contradiction"]
        nli.extend(s >= tau for s in scores)
        lexical.extend(c >= tau for c in conflict)
    a, b = np.asarray(nli, bool), np.asarray(lexical, bool)
    if not len(a):
        return pd.DataFrame([{"pairs": 0}])
    agree = float(np.mean(a == b))
    chance = a.mean() * b.mean() + (1 - a.mean()) * (1 - b.mean())
    kappa = (agree - chance) / (1 - chance) if chance < 1 else np.nan
    return pd.DataFrame([{"pairs": len(a), "NLI contradicts": 100 * a.mean(),
                          "answer-conflict contradicts": 100 * b.mean(), "both": int(np.sum(a & b)),
                          "agreement": 100 * agree, "Cohen's kappa": kappa}]).round(3)


def falsified_examples(results: pd.DataFrame, corpora: dict, n: int = 5) -> pd.DataFrame:
    """Falsified drafts beside the passage that falsified them and the revision, from the run
    (the paper's Table 1); ``corpora`` maps (dataset, cache) to its ``Corpus``. Fixed drafts
    (wrong → right) first, then harmed, then the rest."""
    fva = results[(results["method"] == "fva-rag") & results["intervened"].fillna(False).astype(bool)]
    vanilla = results[results["method"] == "dense"].set_index(["dataset", "cache", "question_id"])["correct"]
    rows = []
    for _, row in fva.iterrows():
        trace = row["trace"]
        worst = int(np.argmax(trace["contradiction"]))
        passage = corpora[(row["dataset"], row["cache"])][trace["anti_context_ids"][worst]]
        before = vanilla.get((row["dataset"], row["cache"], row["question_id"]), np.nan)
        outcome = {(0, 1): "fixed", (1, 0): "harmed"}.get((before, row["correct"]), "unchanged")
        rows.append({"dataset": row["dataset"], "cache": row["cache"], "question": row["query"],
                     "draft": trace["draft"], "counter-evidence": passage.content[:160],
                     "P(contradiction)": round(trace["contradiction"][worst], 3),
                     "revision": trace["revision"], "outcome": outcome})
    order = {"fixed": 0, "harmed": 1, "unchanged": 2}
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    return table.sort_values("outcome", key=lambda s: s.map(order), kind="stable").head(n).reset_index(drop=True)


def tau_sweep(results: pd.DataFrame, revisions: pd.DataFrame | None = None,
              taus=np.linspace(0, 1, 21), *, seed: int = 0) -> pd.DataFrame:
    """FVA-RAG's intervention rate at every τ, from the run's recorded contradiction scores (no
    new model call), per dataset × cache; a draft without an anti-context is never falsified.
    With ``revisions`` (``pipeline.revisions_at_any_tau``: the revision every draft would get)
    also its accuracy at every τ, exact, with a question-level 95% bootstrap CI."""
    fva = results[results["method"] == "fva-rag"]
    traces = fva["trace"]
    scores = pd.DataFrame({"dataset": fva["dataset"], "cache": fva["cache"], "question_id": fva["question_id"],
                           "s": traces.map(lambda t: t["max_contradiction"]),
                           "falsifiable": traces.map(lambda t: bool(t["anti_context_ids"]))})
    if revisions is not None:
        scores = scores.merge(revisions[["dataset", "cache", "question_id", "draft correct", "revision correct"]],
                              on=["dataset", "cache", "question_id"], how="left", validate="one_to_one")
        if scores["draft correct"].isna().any():
            raise ValueError("revisions do not cover every FVA-RAG question of the run: rebuild them "
                             "with pipeline.revisions_at_any_tau(cfg, results)")
    rows = []
    for (dataset, cache), part in scores.groupby(["dataset", "cache"], sort=False):
        for tau in taus:
            falsified = is_falsified(part["s"], part["falsifiable"], tau)
            row = {"dataset": dataset, "cache": cache, "tau": round(float(tau), 4),
                   "intervention rate": 100 * float(falsified.mean()), "n": len(part)}
            if revisions is not None:
                correct = np.where(falsified, part["revision correct"], part["draft correct"])
                low, high = bootstrap_ci(correct, seed=seed)
                row.update({"accuracy": 100 * float(correct.mean()), "CI low": 100 * low, "CI high": 100 * high})
            rows.append(row)
    return pd.DataFrame(rows)


def adjudicator_diagnostics(revisions: pd.DataFrame, tau: float = paper.TAU) -> pd.DataFrame:
    """Does the adjudicator find the drafts that need revising, and does revising help? Per
    dataset × cache, from ``pipeline.revisions_at_any_tau``: how often a false / a true draft is
    falsified at τ, the AUC of the max contradiction for telling false drafts from true ones
    (0.5 = chance), and what revising *every* draft would do (fixed: false → true; broken)."""
    rows = []
    for (dataset, cache), part in revisions.groupby(["dataset", "cache"], sort=False):
        false = part["draft correct"] == 0
        falsified = pd.Series(is_falsified(part["max_contradiction"], part["anti_context"], tau), index=part.index)
        rows.append({"dataset": dataset, "cache": cache, "n": len(part), "false drafts": int(false.sum()),
                     "falsified if false (%)": 100 * falsified[false].mean(),
                     "falsified if true (%)": 100 * falsified[~false].mean(),
                     "AUC false vs true draft": separation_auc(part.loc[false, "max_contradiction"],
                                                               part.loc[~false, "max_contradiction"]),
                     "revising all: fixed": int((false & (part["revision correct"] == 1)).sum()),
                     "revising all: broken": int((~false & (part["revision correct"] == 0)).sum())})
    return pd.DataFrame(rows).round(3)


def cost(results: pd.DataFrame) -> pd.DataFrame:
    """Mean retrieval calls, model calls and latency per question, per method (all datasets)."""
    return (results.groupby("method")[["retrieval_calls", "model_calls", "latency_s"]].mean()
            .rename(columns={"latency_s": "s/question"}).reset_index().round(3))


