"""CounterRefine's tables from a run (``counterrefine.pipeline.run``): Table 3 (Baseline-RAG vs
CounterRefine), Table 4 (ablations), the outcome transitions of Fig. 3 with a paired test, why
the validator rejected revisions, helped and hurt examples (Table 5) and the cost per question.

The question is the unit: each row of a run is one (dataset, method, question), so confidence
intervals resample questions and tests pair methods on the same question.
"""
from __future__ import annotations

import pandas as pd

from robustkit.counterrefine import paper
from robustkit.counterrefine.pipeline import BASELINE, METHODS
from robustkit.counterrefine.validate import REASONS, cited_snippets
from robustkit.metrics import bootstrap_ci, format_p, mcnemar, paired_tests, substring_match

REFERENCE = "counterrefine"
OUTCOMES = ("stay correct", "stay wrong", "fixed", "harmed")


def table3(results: pd.DataFrame, *, seed: int = 0) -> pd.DataFrame:
    """Correct (normalised match) with a question-level 95% bootstrap CI and token F1 for
    Baseline-RAG and CounterRefine per dataset; the paper's SimpleQA rows appended."""
    kit = _summary(results[results["method"].isin([BASELINE, REFERENCE])], seed)
    return pd.concat([kit, paper.TABLE3], ignore_index=True)


def table4(results: pd.DataFrame, *, seed: int = 0) -> pd.DataFrame:
    """Every variant on the same questions: correct (CI), F1, revisions accepted (outputs changed)
    and proposed, and the exact McNemar p of CounterRefine against it (uncorrected; the number
    of comparisons is in the ``comparisons`` column)."""
    table = _summary(results, seed)
    tests = significance(results).set_index(["dataset", "method"])
    changed, proposed = [], []
    for _, row in table.iterrows():
        traces = _traces(results, row["dataset"], row["method"])
        changed.append(100 * sum(t["changed"] for t in traces) / len(traces) if traces else 0.0)
        proposed.append(100 * sum(t["decision"] == "REVISE" for t in traces) / len(traces) if traces else 0.0)
    table["REVISE proposed %"], table["changed %"] = proposed, changed
    table["p vs counterrefine"] = [format_p(tests["p"][(d, m)]) if (d, m) in tests.index else ""
                                   for d, m in zip(table["dataset"], table["method"])]
    table["comparisons"] = len(tests)
    return table


def significance(results: pd.DataFrame, reference: str = REFERENCE) -> pd.DataFrame:
    """Exact McNemar of every other method against the reference on the same questions, per
    dataset (``metrics.paired_tests``): the questions only the method and only the reference got
    right, and p (uncorrected; ``family`` says what ``comparisons`` counts)."""
    return paired_tests(results, reference, by=["dataset"], methods=METHODS)


def transitions(results: pd.DataFrame, method: str = REFERENCE) -> pd.DataFrame:
    """From the draft (Baseline-RAG) to ``method``'s answer, per question: stay correct / stay
    wrong / fixed / harmed, as share (%) and count per dataset; the paper's shares appended."""
    rows = []
    for dataset, frame in results.groupby("dataset", sort=False):
        before, after = _paired(frame, method)
        outcome = pd.Series([_outcome(b, a) for b, a in zip(before, after)])
        for name in OUTCOMES:
            count = int((outcome == name).sum())
            rows.append({"dataset": dataset, "outcome": name, "share": 100 * count / len(outcome),
                         "count": count, "n": len(outcome), "source": "kit"})
    rows += [{"dataset": "simpleqa (paper)", "outcome": name, "share": share, "count": None, "n": 4326,
              "source": "paper"} for name, share in paper.TRANSITIONS.items()]
    return pd.DataFrame(rows)


def helped_vs_harmed(results: pd.DataFrame, method: str = REFERENCE) -> pd.DataFrame:
    """Per dataset: outputs changed, fixed vs harmed and the exact McNemar p of the pair (the
    paired test the paper's 4.2% fixed vs 0.2% harmed invites)."""
    rows = []
    for dataset, frame in results.groupby("dataset", sort=False):
        before, after = _paired(frame, method)
        test = mcnemar(after, before)
        traces = _traces(results, dataset, method)
        rows.append({"dataset": dataset, "n": len(before), "changed": sum(t["changed"] for t in traces),
                     "changed %": 100 * sum(t["changed"] for t in traces) / len(traces),
                     "fixed": test["a_only"], "harmed": test["b_only"],
                     "p (exact McNemar)": format_p(test["p_value"])})
    return pd.DataFrame(rows)


def validation_outcomes(results: pd.DataFrame, method: str = REFERENCE) -> pd.DataFrame:
    """What happened to each reply, per dataset: kept, malformed, accepted, or the validator's
    reason for rejecting the REVISE (counts and share of the dataset's questions)."""
    rows = []
    for dataset in results["dataset"].unique():
        traces = _traces(results, dataset, method)
        reasons = pd.Series([_reason(t["validation"]) for t in traces])
        for reason, count in reasons.value_counts().items():
            rows.append({"dataset": dataset, "outcome": reason, "count": int(count), "share": 100 * count / len(traces)})
    return pd.DataFrame(rows)


def examples(results: pd.DataFrame, method: str = REFERENCE, n: int = 6) -> pd.DataFrame:
    """Helped (fixed) and hurt (harmed) questions from the run, then rejected revisions — those
    that would have been right first — each with a one-line diagnosis computed from its trace."""
    rows = []
    for dataset, frame in results.groupby("dataset", sort=False):
        mine = frame[frame["method"] == method].set_index("question_id")
        base = frame[frame["method"] == BASELINE].set_index("question_id")["correct"]
        for qid, row in mine.iterrows():
            trace = row["trace"]
            outcome = _outcome(base[qid], row["correct"])
            if outcome in ("fixed", "harmed") or (trace["proposed"] and trace["validation"] != "accepted"):
                right = bool(substring_match(trace["proposed"] or "", row["answers"]))
                rows.append({"dataset": dataset, "question": row["query"], "gold": row["answers"][0],
                             "draft": trace["draft"], "proposed": trace["proposed"], "proposal right": right,
                             "final": row["answer"], "outcome": outcome, "diagnosis": diagnose(trace, outcome)})
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    rank = table["outcome"].map({"fixed": 0, "harmed": 1}).fillna(3) - table["proposal right"] * (table["outcome"] == "stay wrong")
    return table.assign(rank=rank).sort_values("rank", kind="stable").drop(columns="rank").head(n).reset_index(drop=True)


def diagnose(trace: dict, outcome: str) -> str:
    """One line on why a question went the way it did, from its trace alone."""
    if trace["validation"] != "accepted":
        verdict = "kept the draft" if trace["validation"] == "keep" else f"revision blocked: {trace['validation']}"
        return f"{verdict} (P(REVISE) {trace['p_revise']:.2f})" if trace.get("p_revise") is not None else verdict
    queries, (cited, _) = trace["queries"], cited_snippets(trace["evidence"] or "")
    found = sorted({queries[j] for i in cited if 0 <= i < len(trace["found_by"]) for j in trace["found_by"][i]})
    source = f"cited snippet found by {found}" if found else "cited one of the draft's own snippets"
    return f"revision accepted, {source}; {'now correct' if outcome == 'fixed' else 'now wrong' if outcome == 'harmed' else 'no change in correctness'}"


def cost(results: pd.DataFrame) -> pd.DataFrame:
    """Mean retrieval calls, snippets read by the last call, model calls and latency per question."""
    return (results.groupby("method", sort=False)[["retrieval_calls", "snippets", "model_calls", "latency_s"]]
            .mean().rename(columns={"latency_s": "s/question"}).reset_index().round(3))


def _summary(results: pd.DataFrame, seed: int) -> pd.DataFrame:
    rows = []
    for (dataset, method), frame in results.groupby(["dataset", "method"], sort=False):
        low, high = bootstrap_ci(frame["correct"].to_numpy(), seed=seed)
        rows.append({"dataset": dataset, "method": method, "correct": 100 * frame["correct"].mean(),
                     "correct 95% CI": f"{100 * low:.1f}–{100 * high:.1f}", "CI low": 100 * low,
                     "CI high": 100 * high, "f1": 100 * frame["f1"].mean(), "n": len(frame), "source": "kit"})
    return pd.DataFrame(rows).round(2)


def _reason(validation: str) -> str:
    """A validation outcome without its details ("cites snippet 7, but …" → "cites snippet")."""
    return next((r for r in REASONS if validation.startswith(r)), validation)


def _paired(frame: pd.DataFrame, method: str):
    wide = frame.pivot(index="question_id", columns="method", values="correct")
    return wide[BASELINE].to_numpy(), wide[method].to_numpy()


def _outcome(before: float, after: float) -> str:
    return {(1, 1): "stay correct", (0, 0): "stay wrong", (0, 1): "fixed", (1, 0): "harmed"}[(int(before), int(after))]


def _traces(results: pd.DataFrame, dataset: str, method: str) -> list[dict]:
    part = results[(results["dataset"] == dataset) & (results["method"] == method)]
    return [t for t in part["trace"] if t is not None]  # Baseline-RAG's rows have none
