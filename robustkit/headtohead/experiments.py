"""The head-to-head's tables: pure functions of the results table ``pipeline.run`` returns.

    summary(results)       per method: accuracy (question-clustered CI), abstention, how often it
                           changed its first answer and whether that fixed or broke it, cost
    robustness(results)    per method and bias type: the drop from clean, with a CI
    significance(results)  exact McNemar of every method against dense RAG, per condition
    composition(results)   does the CoRM critic's evidence help FVA-RAG and CounterRefine?
    pareto(table)          which methods no other beats on both accuracy and model calls
    disagreements(results) the queries on which the methods disagree, and who got them right
    by_set(built, methods) each method on the sets it was built for, or why it is not run there
    findings(...)          the run's headline numbers as sentences (notebook 08 prints them)
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from robustkit.headtohead.pipeline import BUILT_FOR, LABELS, NOT_RUN, REFERENCE
from robustkit.judges import NormalisedMatch
from robustkit.methods import first_answer
from robustkit.metrics import cluster_bootstrap_ci, exact_match, paired_tests


def summary(results: pd.DataFrame) -> pd.DataFrame:
    """One row per method, in run order: accuracy over all its queries (clean and biased) with a
    95% CI that resamples questions, the share answered and the accuracy on those, for methods
    with a first answer the share of queries where the final answer differs from it and how many
    of those changes fixed or broke the answer (judged like the final one), and the mean model
    calls, retrieval calls and wall milliseconds per query (as run: a call replayed from the call
    cache takes ~0 s, so compare latencies within one fresh run only)."""
    judge, rows = NormalisedMatch(), []
    for method, frame in results.groupby("method", sort=False):
        low, high = cluster_bootstrap_ci(frame["correct"].to_numpy(float), frame["question_id"].to_numpy())
        answered = ~frame["abstained"].astype(bool)
        row = {"method": method, "label": LABELS.get(method, method), "paper": frame["paper"].iloc[0],
               "questions": frame["question_id"].nunique(), "queries": len(frame),
               "accuracy": 100 * frame["correct"].mean(), "CI low": 100 * low, "CI high": 100 * high,
               "answered %": 100 * answered.mean(),
               "accuracy answered": 100 * frame.loc[answered, "correct"].mean() if answered.any() else np.nan}
        firsts = [first_answer(t) for t in frame["trace"]]
        if all(f is not None for f in firsts):
            first_ok = judge(list(frame["query"]), firsts, list(frame["answers"]))
            final_ok = frame["correct"].astype(bool).tolist()
            changed = [not exact_match(a, [f]) for a, f in zip(frame["answer"], firsts)]
            row.update({"changed %": 100 * np.mean(changed),
                        "fixed": sum(c and ok and not was for c, ok, was in zip(changed, final_ok, first_ok)),
                        "broke": sum(c and was and not ok for c, ok, was in zip(changed, final_ok, first_ok))})
        row.update({"model calls / query": frame["model_calls"].mean(),
                    "retrieval calls / query": frame["retrieval_calls"].mean(),
                    "ms / query": 1000 * frame["latency_s"].mean()})
        rows.append(row)
    return pd.DataFrame(rows).round(2)


def robustness(results: pd.DataFrame) -> pd.DataFrame:
    """One row per method and bias type (and ``all`` biased queries): on the questions that have
    a rewrite of that type, clean and biased accuracy and the drop (clean − biased, points) with
    a 95% CI that resamples questions (the pair of a question's clean and biased answer is kept)."""
    clean = results.loc[results["condition"] == "clean", ["method", "question_id", "correct"]]
    biased = results[results["condition"] == "biased"]
    parts = [("all", biased), *biased.groupby("type", sort=True)]  # rows: "all" first, then each type
    rows = []
    for kind, part in parts:
        paired = part.merge(clean, on=["method", "question_id"], suffixes=("", " clean"), validate="m:1")
        for method, frame in paired.groupby("method", sort=False):
            drop = (frame["correct clean"] - frame["correct"]).to_numpy(float)
            low, high = cluster_bootstrap_ci(drop, frame["question_id"].to_numpy())
            rows.append({"method": method, "label": LABELS.get(method, method), "type": kind,
                         "questions": frame["question_id"].nunique(), "queries": len(frame),
                         "clean accuracy": 100 * frame["correct clean"].mean(),
                         "biased accuracy": 100 * frame["correct"].mean(), "drop": 100 * drop.mean(),
                         "drop CI low": 100 * low, "drop CI high": 100 * high})
    return pd.DataFrame(rows).round(2)


def significance(results: pd.DataFrame, reference: str = REFERENCE) -> pd.DataFrame:
    """Exact McNemar of every other method against ``reference`` on the clean queries and on the
    queries of each bias type (one query per question in each: the kit's protocol), read from the
    method's side, uncorrected; ``comparisons`` counts them all and ``family`` names them
    (Bonferroni: 0.05 / comparisons)."""
    return paired_tests(results, reference, by=["type"])


COMPOSED = {"fva-rag+corm": "fva-rag", "counterrefine+corm": "counterrefine"}  # composed → the method alone


def composition(results: pd.DataFrame) -> pd.DataFrame:
    """Each composed method (the CoRM critic as its retriever) against the same method over dense
    retrieval, on the clean and on the biased queries: both accuracies and the exact McNemar test
    (the composed method against the method alone, the reference), uncorrected."""
    frames = []
    for composed, alone in COMPOSED.items():
        part = results[results["method"].isin([composed, alone])]
        if part["method"].nunique() < 2:
            continue
        accuracy = 100 * part.pivot_table(index="condition", columns="method", values="correct", sort=False)
        tests = paired_tests(part, alone, by=["condition"])
        frames.append(tests.assign(**{"accuracy alone": tests["condition"].map(accuracy[alone]),
                                      "accuracy composed": tests["condition"].map(accuracy[composed])}))
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if not len(table):
        return table
    return table.assign(comparisons=len(table), family=f"{len(table)} tests: each composed method vs the method "
                                                       "alone, clean and biased").round(2)


def pareto(table: pd.DataFrame, cost: str = "model calls / query", value: str = "accuracy") -> pd.Series:
    """Whether each row of ``summary``'s table is on the cost–accuracy front: no other method
    is at least as accurate for at most the cost, and strictly better on one of them."""
    c, v = table[cost].to_numpy(float), table[value].to_numpy(float)
    dominated = [bool(np.any((c <= c[i]) & (v >= v[i]) & ((c < c[i]) | (v > v[i])))) for i in range(len(table))]
    return pd.Series(~np.array(dominated), index=table.index, name="on the front")


def disagreements(results: pd.DataFrame) -> pd.DataFrame:
    """One row per query on which the methods disagree (some right, some wrong): the query, its
    type, how many methods got it right and which, most disputed first."""
    wide = results.pivot_table(index=["query_id", "type", "query"], columns="method", values="correct",
                               sort=False)
    right = wide.sum(axis=1)
    split = wide[(right > 0) & (right < wide.notna().sum(axis=1))]
    rows = [{"query_id": qid, "type": kind, "query": text, "right": int(row.sum()), "of": int(row.notna().sum()),
             "right methods": ", ".join(m for m, ok in row.items() if ok == 1)}
            for (qid, kind, text), row in split.iterrows()]
    table = pd.DataFrame(rows, columns=["query_id", "type", "query", "right", "of", "right methods"])
    return table.assign(balance=(table["right"] / table["of"] - 0.5).abs()).sort_values(
        "balance", kind="stable").drop(columns="balance").reset_index(drop=True)


def by_set(built: pd.DataFrame, methods) -> pd.DataFrame:
    """One row per (set, method) for every method of ``methods``, in the sets' order of
    ``pipeline.BUILT_FOR``: for a method built for the set, its questions, accuracy with a 95% CI
    over questions, model calls per question and the exact McNemar test against dense RAG on that
    set (``comparisons`` counts them all); for the others, ``not run`` says why."""
    tests = paired_tests(built, REFERENCE, by=["set"]).set_index(["set", "method"])
    rows = []
    for name in BUILT_FOR:
        part = built[built["set"] == name]
        for method in methods:
            row = {"set": name, "method": method, "label": LABELS.get(method, method)}
            frame = part[part["method"] == method]
            if frame.empty:
                missing = "built for this set, but no results were given" if method in BUILT_FOR[name] else None
                rows.append({**row, "not run": missing or NOT_RUN.get((name, method))
                             or NOT_RUN.get(method, "not built for this set")})
                continue
            low, high = cluster_bootstrap_ci(frame["correct"].to_numpy(float), frame["question_id"].to_numpy())
            row.update({"questions": frame["question_id"].nunique(), "accuracy": 100 * frame["correct"].mean(),
                        "CI low": 100 * low, "CI high": 100 * high,
                        "model calls / question": frame["model_calls"].mean()})
            if (name, method) in tests.index:
                test = tests.loc[(name, method)]
                row.update({"only it right": test["only method right"], "only dense right": test["only reference right"],
                            "p": test["p"]})
            rows.append(row)
    return pd.DataFrame(rows).assign(comparisons=len(tests)).round(2)


