"""AlignRAG's tables from a run: Table 1 (accuracy per benchmark), Table 5 (critique fine-tuning
vs preference optimisation), the numbers behind Fig. 2 (out-of-domain drop), Fig. 3 (accuracy
per critique round), Fig. 4 (informative vs noisy retrieval) and Fig. 6 (critic ablation), with
paired tests, outcome transitions, critique examples and findings computed from them.

AlignRAG (Wei et al., 2025, arXiv:2504.14858) refines an answer by critique-driven alignment:

    y_0 = G(q, D),    Δ_t = C(q, D, y_t),    y_{t+1} = G(q, D, y_t ⊕ Δ_t),    t < T.

A run has one row per (dataset, method, question_id, iteration): the row at iteration t holds
y_t and, for t ≥ 1, the critique Δ_{t−1} that produced it. A method's answer is y_T, its row at
its largest iteration. The question is the unit: confidence intervals resample questions, and
tests pair two methods on the same questions (exact McNemar).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from robustkit.alignrag import paper
from robustkit.alignrag.build import IDS
from robustkit.metrics import bootstrap_ci, format_p, paired_tests

METHODS = IDS
BASELINES, REFINERS = METHODS[:2], METHODS[2:]  # baselines answer once (iteration 0 only)
REFERENCE, CPO, FROZEN = "alignrag", "alignrag-cpo", "frozen-critic"  # AlignRAG: the paper's CFT critic
ABLATION = ("dense", "frozen-critic", "critic-no-ccs", "alignrag")  # Fig. 6
DOMAINS = ("in-domain", "out-of-domain")
OUTCOMES = ("stay correct", "stay wrong", "fixed", "harmed")
POOLED = "all (pooled)"  # the dataset label of rows that pool every dataset's questions
# (what a contrast tests, method A, method B) for the pooled tests of ``findings``
CONTRASTS = (("retrieval", "dense", "cot"),
             ("critique-driven refinement", REFERENCE, "dense"),
             ("a trained critic over self-critique", REFERENCE, "self-refine"),
             ("training the critic", REFERENCE, FROZEN),
             ("contrastive critique synthesis", REFERENCE, "critic-no-ccs"),
             ("preference optimisation over fine-tuning", CPO, REFERENCE))
_KEYS = ["dataset", "method", "question_id"]


def final(results: pd.DataFrame) -> pd.DataFrame:
    """Each (dataset, method, question)'s answer: its row at its largest iteration, in the run's
    dataset order, then ``METHODS`` order."""
    check_results(results)
    return _final(results)


def table1(results: pd.DataFrame, *, seed: int = 0) -> pd.DataFrame:
    """Accuracy (%) of every method's final answer per dataset, with a 95% bootstrap CI over
    questions ("CI low", "CI high"), F1 (%) and n; an ``all (pooled)`` row per method pools every
    dataset's questions; the paper's averages (source "paper") follow."""
    check_results(results, "domain", "f1")
    last = _final(results)
    scopes = [({"dataset": d, "domain": part["domain"].iloc[0]}, part) for d, part in last.groupby("dataset", sort=False)]
    if len(scopes) > 1:
        scopes.append(({"dataset": POOLED, "domain": last["domain"].iloc[0] if last["domain"].nunique() == 1
                        else "both"}, last))
    kit = _accuracy_rows(scopes, seed, f1=True).assign(source="kit")
    return pd.concat([kit, paper.TABLE1], ignore_index=True).astype({"n": "Int64"})


def significance(results: pd.DataFrame, reference: str = REFERENCE) -> pd.DataFrame:
    """Exact McNemar of every other method's final answers against the reference's, per dataset:
    the questions only the method and only the reference got right, p (uncorrected), and the
    number of tests run (``comparisons``, which ``family`` names)."""
    check_results(results)
    last = _final(results)
    return paired_tests(last, reference, by=["dataset"], methods=_present(last["method"]))


def table5(results: pd.DataFrame, *, seed: int = 0) -> pd.DataFrame:
    """Table 5: the critic trained by fine-tuning on contrastive critiques (CFT) vs by DPO (CPO),
    per dataset: each one's accuracy with its CI, CPO − CFT (points), the discordant questions
    and the exact McNemar p between them."""
    check_results(results)
    last, rows = _final(results), []
    for dataset, part in last.groupby("dataset", sort=False):
        wide = part.pivot(index="question_id", columns="method", values="correct")
        if {REFERENCE, CPO} <= set(wide.columns):
            acc = {label: _accuracy(wide[m].dropna(), seed) for label, m in (("CFT", REFERENCE), ("CPO", CPO))}
            test = paired_tests(part, CPO, methods=[REFERENCE]).iloc[0]
            rows.append({"dataset": dataset, **{f"{label} {k}": v for label, a in acc.items() for k, v in a.items()
                                                if k != "n"},
                         "CPO − CFT": acc["CPO"]["accuracy"] - acc["CFT"]["accuracy"], "n": test["n"],
                         "CPO only": test["only reference right"], "CFT only": test["only method right"],
                         "p": test["p"]})
    if not rows:
        raise ValueError(f"table5 needs {REFERENCE!r} and {CPO!r} on one dataset at least")
    return pd.DataFrame(rows)


def ood_drop(results: pd.DataFrame, *, seed: int = 0) -> pd.DataFrame:
    """Fig. 2: per method, accuracy on the in-domain and on the out-of-domain questions (each
    domain's datasets pooled), the drop in − out (points) with a 95% CI from bootstrapping the
    two question sets independently, n_in and n_out; the paper's drops (source "paper") follow."""
    check_results(results, "domain")
    last, rows = _final(results), []
    missing = [d for d in DOMAINS if d not in set(last["domain"])]
    if missing:
        raise ValueError(f"ood_drop needs both domains; this run has no {missing[0]!r} questions")
    for method in _present(last["method"]):
        part = last[last["method"] == method]
        inside = part.loc[part["domain"] == DOMAINS[0], "correct"].to_numpy(float)
        outside = part.loc[part["domain"] == DOMAINS[1], "correct"].to_numpy(float)
        if len(inside) and len(outside):
            low, high = _difference_ci(inside, outside, seed)
            rows.append({"method": method, "in-domain": 100 * inside.mean(), "out-of-domain": 100 * outside.mean(),
                         "drop": 100 * (inside.mean() - outside.mean()), "CI low": 100 * low,
                         "CI high": 100 * high, "n_in": len(inside), "n_out": len(outside), "source": "kit"})
    return pd.concat([pd.DataFrame(rows), paper.OOD_DROP], ignore_index=True).astype({"n_in": "Int64", "n_out": "Int64"})


def iterations(results: pd.DataFrame, methods=("self-refine", REFERENCE), *, seed: int = 0) -> pd.DataFrame:
    """Fig. 3: accuracy (%) with its CI after each critique round t = 0..T, per method and dataset.
    A question whose trajectory stopped before T keeps its last answer in later rounds."""
    check_results(results)
    unknown = [m for m in methods if m not in REFINERS]
    if unknown:
        raise ValueError(f"iterations takes refiners {list(REFINERS)}, got {unknown}")
    rows = []
    for method in methods:
        part = results[results["method"] == method]
        if part.empty:
            raise ValueError(f"method {method!r} is not in results (methods: {_present(results['method'])})")
        for dataset, frame in part.groupby("dataset", sort=False):
            last_t = int(frame["iteration"].max())
            wide = frame.pivot(index="question_id", columns="iteration", values="correct")
            wide = wide.reindex(columns=range(last_t + 1)).ffill(axis=1)
            if wide[0].isna().any():
                raise ValueError(f"{method!r} on {dataset!r}: question {wide.index[wide[0].isna()][0]!r} "
                                 "has no iteration-0 row")
            rows += [{"method": method, "dataset": dataset, "iteration": t, **_accuracy(wide[t], seed)}
                     for t in range(last_t + 1)]
    return pd.DataFrame(rows)[["method", "dataset", "iteration", "accuracy", "n", "CI low", "CI high"]]


def informative_vs_noisy(results: pd.DataFrame, *, seed: int = 0) -> pd.DataFrame:
    """Fig. 4: final accuracy (%) with its CI per method on questions whose retrieved documents
    hold an answer-bearing passage ("informative") and on the rest ("noisy"), pooled over datasets
    (``all (pooled)``) and per dataset. Chain of thought reads no documents: its split shows how
    much easier the informative questions are without them."""
    check_results(results, "informative")
    last = _final(results).dropna(subset=["informative"])
    odd = last["informative"][~last["informative"].isin([True, False])]
    if len(odd):
        raise ValueError(f"informative must be True/False (or missing), got {_plain(odd.iloc[0])!r}")
    last = last.assign(retrieval=np.where(last["informative"].astype(bool), "informative", "noisy"))
    scopes = [(POOLED, last), *last.groupby("dataset", sort=False)]
    return _accuracy_rows([({"dataset": d, "retrieval": r}, part[part["retrieval"] == r])
                           for d, part in scopes for r in ("informative", "noisy")], seed)


def ablation(results: pd.DataFrame, *, seed: int = 0) -> pd.DataFrame:
    """Fig. 6: no critique (vanilla RAG), an untrained critic, a critic trained on non-contrastive
    self-critiques, and AlignRAG's critic, per dataset: accuracy with its CI, n, and the exact
    McNemar p of AlignRAG (CFT) against each."""
    check_results(results)
    last = _final(results)
    if REFERENCE not in set(last["method"]):
        raise ValueError(f"ablation needs {REFERENCE!r} in results")
    tests = significance(results).set_index(["dataset", "method"])["p"].map(format_p)
    table = _accuracy_rows([({"dataset": d}, part) for d, part in last.groupby("dataset", sort=False)], seed, ABLATION)
    table[f"p vs {REFERENCE}"] = [tests.get(key, "") for key in zip(table["dataset"], table["method"])]
    return table


def transitions(results: pd.DataFrame) -> pd.DataFrame:
    """Per refiner and dataset, from y_0 to the final answer: how many questions stay correct,
    stay wrong, are fixed or harmed (count, share % and n)."""
    check_results(results)
    rows = []
    for method in _present(results["method"], REFINERS):
        part = results[results["method"] == method]
        for dataset, frame in part.groupby("dataset", sort=False):
            first = frame[frame["iteration"] == 0].set_index("question_id")["correct"]
            last = _final(frame).set_index("question_id")["correct"]
            lacking = last.index.difference(first.index)
            if len(lacking):
                raise ValueError(f"{method!r} on {dataset!r}: question {lacking[0]!r} has no iteration-0 row")
            outcome = pd.Series([_outcome(first[q], last[q]) for q in last.index], dtype=object)
            rows += [{"method": method, "dataset": dataset, "outcome": name, "count": int((outcome == name).sum()),
                      "share": 100 * float((outcome == name).mean()), "n": len(outcome)} for name in OUTCOMES]
    return pd.DataFrame(rows)


def critique_examples(results: pd.DataFrame, n: int = 3) -> pd.DataFrame:
    """Questions on which the frozen and the trained (CFT) critic both critiqued y_0: the question,
    gold, y_0, each critique Δ_0 and the answer y_1 it led to. Questions where exactly one critique
    led to a right y_1 come first (the trained one's first), then the rest in run order."""
    check_results(results, "question", "gold", "answer", "critique")
    keys = ["dataset", "question_id"]
    at = lambda method, t: results[(results["method"] == method) & (results["iteration"] == t)]  # noqa: E731
    y0 = at(FROZEN, 0)[[*keys, "question", "gold", "answer", "correct"]].rename(
        columns={"answer": "y0", "correct": "y0 correct"})
    for who, method in (("frozen", FROZEN), ("trained", REFERENCE)):
        step = at(method, 1)[[*keys, "critique", "answer", "correct"]]
        y0 = y0.merge(step.rename(columns={"critique": f"{who} critique", "answer": f"{who} y1",
                                           "correct": f"{who} right"}), on=keys)  # inner: both critiqued
    table = y0.dropna(subset=["frozen critique", "trained critique"]).reset_index(drop=True)
    table["gold"], table["y0 correct"] = table["gold"].map(_gold_text), table["y0 correct"].astype(bool)
    table["right after one critique"] = [{(1, 0): "trained only", (0, 1): "frozen only", (1, 1): "both",
                                          (0, 0): "neither"}[(int(t), int(f))]
                                         for t, f in zip(table["trained right"], table["frozen right"])]
    rank = table["right after one critique"].map({"trained only": 0, "frozen only": 1}).fillna(2)
    return (table.assign(rank=rank).sort_values("rank", kind="stable").head(n)
            .drop(columns=["rank", "frozen right", "trained right"]).reset_index(drop=True))


# --- helpers --------------------------------------------------------------------------------

def check_results(results: pd.DataFrame, *columns: str) -> None:
    """Reject a run's table that would be summarised wrongly (a missing column, an unknown
    method, a non-0/1 verdict …), naming the offending value."""
    if not isinstance(results, pd.DataFrame):
        raise TypeError(f"results must be a pandas DataFrame, got {type(results).__name__}")
    needed = list(dict.fromkeys([*_KEYS, "iteration", "correct", *columns]))
    missing = [c for c in needed if c not in results.columns]
    if missing:
        raise ValueError(f"results lacks column(s) {missing} (it has {list(results.columns)})")
    if results.empty:
        raise ValueError("results has no rows")
    unknown = sorted(set(results["method"]) - set(METHODS))
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; a run's methods are {list(METHODS)}")
    keys, iteration = [*_KEYS, "iteration"], pd.to_numeric(results["iteration"], errors="coerce")
    correct = pd.to_numeric(results["correct"], errors="coerce")
    for bad, message in ((~correct.isin([0, 1]), "correct must be 0/1, got {correct!r}"),
                         (~((iteration >= 0) & (iteration % 1 == 0)), "iteration must be a whole number ≥ 0, "
                                                                        "got {iteration!r}"),
                         (results["method"].isin(BASELINES) & (iteration > 0),
                          "{method!r} answers once, but has an iteration-{iteration} row"),
                         (results.duplicated(keys), "two rows for one (dataset, method, question_id, iteration): {key}")):
        if bad.any():
            row = results[bad].iloc[0]
            raise ValueError(message.format(**{c: _plain(row[c]) for c in keys + ["correct"]}, key=tuple(row[keys])))
    if "domain" in columns:
        strange = sorted(set(results["domain"]) - set(DOMAINS), key=str)
        if strange:
            raise ValueError(f"domain must be one of {list(DOMAINS)}, got {strange[0]!r}")


def _final(results: pd.DataFrame) -> pd.DataFrame:
    frame = results.reset_index(drop=True)
    last = frame.loc[frame.groupby(_KEYS, sort=False)["iteration"].idxmax()]
    order = {d: i for i, d in enumerate(frame["dataset"].unique())}
    rank = last["dataset"].map(order) * len(METHODS) + last["method"].map(METHODS.index)
    return last.assign(_rank=rank).sort_values("_rank", kind="stable").drop(columns="_rank").reset_index(drop=True)


def _accuracy_rows(scopes, seed: int, methods=METHODS, f1: bool = False) -> pd.DataFrame:
    """Accuracy with its CI and n of each method in each scope, a list of (labels, final rows)."""
    rows = []
    for labels, part in scopes:
        for method in _present(part["method"], methods):
            frame = part[part["method"] == method]
            rows.append({**labels, "method": method, **_accuracy(frame["correct"], seed),
                         **({"f1": 100 * frame["f1"].mean()} if f1 else {})})
    return pd.DataFrame(rows)


def _present(methods, wanted=METHODS) -> list[str]:
    have = set(methods)
    return [m for m in wanted if m in have]


def _accuracy(correct, seed: int) -> dict:
    values = np.asarray(correct, dtype=float)
    low, high = bootstrap_ci(values, seed=seed)
    return {"accuracy": 100 * values.mean(), "CI low": 100 * low, "CI high": 100 * high, "n": len(values)}


def _difference_ci(a: np.ndarray, b: np.ndarray, seed: int, n_resamples: int = 2000,
                   confidence: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap CI of mean(a) − mean(b), resampling a and b independently (two
    different question sets, so there is nothing to pair)."""
    rng = np.random.default_rng(seed)
    draws = (a[rng.integers(0, len(a), (n_resamples, len(a)))].mean(axis=1)
             - b[rng.integers(0, len(b), (n_resamples, len(b)))].mean(axis=1))
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(draws, [tail, 100 - tail])
    return float(low), float(high)


def _outcome(before: float, after: float) -> str:
    return {(1, 1): "stay correct", (0, 0): "stay wrong", (0, 1): "fixed", (1, 0): "harmed"}[(int(before), int(after))]


def _plain(value):
    return value.item() if hasattr(value, "item") else value  # np.float64(0.5) → 0.5 in messages


def _gold_text(gold) -> str:
    return gold if isinstance(gold, str) else " | ".join(map(str, gold))
