"""Metrics: answer scoring, retrieval ranking, selective prediction and significance.

Definitions, as a paper reader would want them stated:

* Answers follow the SQuAD v1.1 script: normalise (lower-case, drop punctuation, drop the
  articles a/an/the, collapse whitespace; diacritics folded too, "Janáček" = "Janacek"), then
  exact match or token F1, best over gold aliases.
* Recall@k is the hit rate (success@k): 1 when any gold id is in the top k. Tables average it over
  the queries whose candidate pool holds gold (``corm.experiments.recall_table`` filters them).
* NDCG@k uses linear gains, and NDCG and MRR average over the orders of tied scores (scikit-learn's
  ``ndcg_score(ignore_ties=False)``), so a critic that scores everything alike gets chance, not 1.
* Selective prediction follows Geifman & El-Yaniv: coverage is P(confidence ≥ θ), evaluated only at
  the distinct confidences, so rows with tied confidence are answered or abstained on together.
* McNemar is the exact (binomial) test; confidence intervals are percentile bootstraps (by row or by
  cluster); p-values are printed with ``format_p``.
"""
from __future__ import annotations

from collections import Counter
from math import comb
from typing import Iterable, Sequence

import numpy as np

from robustkit.data.records import contains_answer, normalize_answer


def exact_match(prediction: str, answers: Iterable[str]) -> float:
    """1.0 when the normalised prediction equals a normalised gold answer. A gold answer that
    normalises to nothing ('---', 'A+') matches nothing: else an empty reply would be right."""
    pred = normalize_answer(prediction)
    return float(any(pred == gold for gold in map(normalize_answer, _gold_answers(answers)) if gold))


def token_f1(prediction: str, answers: Iterable[str]) -> float:
    """Best token-overlap F1 between the prediction and any gold answer (0 when nothing overlaps)."""
    pred = normalize_answer(prediction).split()
    best = 0.0
    for answer in _gold_answers(answers):
        gold = normalize_answer(answer).split()
        common = sum((Counter(pred) & Counter(gold)).values())
        if common:
            precision, recall = common / len(pred), common / len(gold)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


def substring_match(prediction: str, answers: Iterable[str]) -> float:
    """1.0 when a normalised gold answer occurs (as whole words) in the normalised prediction.

    The usual accuracy for chatty generators that wrap the answer in a sentence; it is
    ``data.contains_answer``, the same test that marks a passage as gold-bearing, so
    "Ocean's Eleven" matches "Oceans Eleven" as in ``exact_match`` and "NASA'S budget" contains
    "NASA".
    """
    return float(contains_answer(prediction, _gold_answers(answers)))


def recall_at_k(ranked_ids: Sequence[str], relevant: Iterable[str], k: int) -> float:
    """Hit rate (success@k) of one query: 1.0 when any relevant id is among the first ``k``.

    Averaged over queries this is Recall@k as the tables report it; queries without any relevant
    id in the pool score 0 here, so callers leave them out of the average.
    """
    if k <= 0:
        raise ValueError(f"k must be positive, got k={k}")
    relevant = set(_ids(relevant))
    return float(any(doc in relevant for doc in ranked_ids[:k]))


def first_relevant_rank(ranked_ids: Sequence[str], relevant: Iterable[str]) -> int | None:
    """1-based rank of the first relevant id, or None when none is ranked."""
    relevant = set(_ids(relevant))
    return next((i + 1 for i, doc in enumerate(ranked_ids) if doc in relevant), None)


def ndcg_at_k(scores: Sequence[float], gains: Sequence[float], k: int) -> float:
    """NDCG@k with linear gains, DCG = Σ_{i<k} g_(i) / log2(i + 2), over the ideal ordering's DCG.

    Tied scores are averaged over every order of the tie (scikit-learn's ``ignore_ties=False``):
    all items of a tied block share its mean gain. 0 when no item has positive ideal DCG.
    """
    if k <= 0:
        raise ValueError(f"k must be positive, got k={k}")
    scores, gains = _paired(scores, gains, ("scores", "gains"))
    discounts = np.zeros(len(gains))
    depth = min(k, len(gains))
    discounts[:depth] = 1.0 / np.log2(np.arange(2, depth + 2))
    _, block, size = _tied_blocks(scores)
    block_start = np.cumsum(size) - size
    # each member of a tied block is equally likely to sit at each of the block's positions
    dcg = (np.bincount(block, weights=gains) / size) @ np.add.reduceat(discounts, block_start)
    ideal = np.sort(gains)[::-1] @ discounts
    return float(dcg / ideal) if ideal > 0 else 0.0


def mrr(scores: Sequence[float], gains: Sequence[float]) -> float:
    """Reciprocal rank of the first item with positive gain, ranked by score (0 when none).

    With tied scores this is the exact expectation over uniformly random orders of each tie.
    """
    scores, gains = _paired(scores, gains, ("scores", "gains"))
    _, block, size = _tied_blocks(scores)
    relevant = np.bincount(block, weights=gains > 0, minlength=len(size)).astype(int)
    blocks_with_hits = np.flatnonzero(relevant)
    if not len(blocks_with_hits):
        return 0.0
    first = blocks_with_hits[0]
    rank_before = int(np.sum(size[:first]))
    t, r = int(size[first]), int(relevant[first])
    # with r relevant among t shuffled items, the first relevant one is at offset j (0-based)
    # with probability C(t - 1 - j, r - 1) / C(t, r)
    return sum(comb(t - 1 - j, r - 1) / comb(t, r) / (rank_before + j + 1) for j in range(t - r + 1))


def risk_coverage(confidence: Sequence[float], correct: Sequence[float]) -> dict[str, np.ndarray]:
    """The risk–coverage curve, one point per distinct confidence θ (highest first).

    At threshold θ every row with confidence ≥ θ is answered, so tied rows move together and the
    curve does not depend on row order. Returns equal-length arrays ``threshold`` (θ),
    ``coverage`` (share of rows with confidence ≥ θ) and ``accuracy`` (mean correctness of those
    rows; risk is 1 − accuracy).
    """
    conf, corr = _paired(confidence, correct, ("confidence", "correct"))
    thresholds, block, size = _tied_blocks(conf)
    answered = np.cumsum(size)
    right = np.cumsum(np.bincount(block, weights=corr))
    return {"coverage": answered / len(conf), "accuracy": right / answered, "threshold": thresholds}


def aurc(confidence: Sequence[float], correct: Sequence[float]) -> float:
    """Area under the risk–coverage curve (lower = better): AURC = Σ_j (c_j − c_{j−1}) · risk_j.

    c_j and risk_j are the coverage and risk at the j-th distinct threshold (c_0 = 0): the mean
    risk over thresholds weighted by the coverage each adds. Without ties this is the mean
    selective risk over coverages 1/n … n/n; a tie contributes only its end point, e.g. two tied
    rows, one right, give 0.5 in either order.
    """
    curve = risk_coverage(confidence, correct)
    coverage_added = np.diff(curve["coverage"], prepend=0.0)
    return float(coverage_added @ (1.0 - curve["accuracy"]))


def excess_aurc(confidence: Sequence[float], correct: Sequence[float]) -> float:
    """E-AURC: AURC minus that of an oracle confidence ranking every right answer above every
    wrong one (Geifman et al., 2019), so a curve is judged by its shape, not the base accuracy.
    0 is a perfect ranking; a random confidence expects about the base risk minus the oracle's."""
    ranked = np.sort(np.asarray(correct, dtype=float))[::-1]  # the oracle: all right answers first
    answered = np.arange(1, len(ranked) + 1)
    oracle = float(np.mean(np.cumsum(1.0 - ranked) / answered))  # strict order: no tied blocks
    return aurc(confidence, correct) - oracle


def accuracy_at_coverage(confidence: Sequence[float], correct: Sequence[float],
                         coverage: float) -> float:
    """Selective accuracy at the highest threshold that answers at least ``coverage`` of the rows.

    With ties the coverage actually reached can exceed the one asked for (tied rows move together).
    """
    curve = risk_coverage(confidence, correct)
    return float(curve["accuracy"][_coverage_point(curve, coverage)])


def threshold_at_coverage(confidence: Sequence[float], coverage: float) -> float:
    """The highest threshold θ with P(confidence ≥ θ) ≥ ``coverage``: the γ that answers at
    least that share of the rows (more when rows tie at θ)."""
    curve = risk_coverage(confidence, np.zeros(len(confidence)))
    return float(curve["threshold"][_coverage_point(curve, coverage)])


def _coverage_point(curve: dict, coverage: float) -> int:
    if not 0 < coverage <= 1:
        raise ValueError(f"coverage must be in (0, 1], got {coverage}")
    # the tolerance lets a coverage written as, say, 0.1 * 3 still land on 3/10
    return int(np.argmax(curve["coverage"] >= coverage - 1e-12))


def expected_calibration_error(confidence: Sequence[float], correct: Sequence[float],
                               n_bins: int = 10) -> float:
    """ECE = Σ_b (|B_b| / n) · |acc(B_b) − conf(B_b)| over equal-width confidence bins."""
    conf, corr = _paired(confidence, correct, ("confidence", "correct"))
    if conf.min() < 0 or conf.max() > 1:
        raise ValueError("ECE needs confidences in [0, 1]")
    bins = np.minimum((conf * n_bins).astype(int), n_bins - 1)
    ece = 0.0
    for b in np.unique(bins):
        mask = bins == b
        ece += mask.mean() * abs(corr[mask].mean() - conf[mask].mean())
    return float(ece)


def mcnemar(correct_a: Sequence[float], correct_b: Sequence[float]) -> dict[str, float]:
    """Exact McNemar test on paired 0/1 correctness: two-sided binomial test of the discordant pairs.

    ``a_only`` / ``b_only`` count the rows only A / only B got right; under H0 each discordant pair
    is A's with probability 1/2, so p = min(1, 2 · P(Bin(a_only + b_only, 1/2) ≤ min(a_only, b_only))),
    as statsmodels' ``mcnemar(table, exact=True)``. NaN (e.g. a row lost in a reindex) is an error.
    """
    from scipy.stats import binom

    a, b = _paired(correct_a, correct_b, ("correct_a", "correct_b"))
    for name, values in (("correct_a", a), ("correct_b", b)):
        not_binary = values[(values != 0) & (values != 1)]
        if len(not_binary):
            raise ValueError(f"{name} must hold only 0/1/True/False, got {not_binary[0]:g}")
    a_only, b_only = int(np.sum((a == 1) & (b == 0))), int(np.sum((a == 0) & (b == 1)))
    p_value = min(1.0, 2 * float(binom.cdf(min(a_only, b_only), a_only + b_only, 0.5)))
    return {"a_only": a_only, "b_only": b_only, "p_value": p_value}


def paired_tests(results, reference: str, *, by: Sequence[str] = (), methods: Sequence[str] | None = None,
                 unit: str | Sequence[str] = "question_id", outcome: str = "correct"):
    """Exact McNemar of every other method against ``reference``, within each group of ``by``
    (e.g. dataset), on the questions both answered: one row per comparison, read from the method's
    side — ``method``, ``reference``, ``n``, ``only method right``, ``only reference right``, ``p``
    (uncorrected: the reader corrects) — with ``comparisons``, the number of tests in the table,
    and ``family``, what they are, in words (Bonferroni: 0.05 / comparisons). ``results`` is a tidy
    table (one row per method and question); ``methods`` picks and orders the others (default: as
    they appear); a group without the reference is left out. ``unit`` names the question's column
    (or columns: ``["dataset", "question_id"]`` pools datasets).

    The question is the unit: a method with several rows for one question in a group (e.g. two
    biased rewrites) is refused — its pairs would not be independent (use a clustered bootstrap)."""
    import pandas as pd

    units = [unit] if isinstance(unit, str) else list(unit)
    missing = {*units, outcome, "method", *by} - set(results.columns)
    if missing:
        raise ValueError(f"paired_tests needs the column(s) {sorted(missing)}; results has {list(results.columns)}")
    if reference not in set(results["method"]):
        raise ValueError(f"reference {reference!r} is not in results (methods: {list(results['method'].unique())})")
    repeated = results[results.duplicated([*by, *units, "method"], keep=False)]
    if len(repeated):
        raise ValueError(f"methods {sorted(repeated['method'].unique())} have several rows per {'/'.join(units)} "
                         f"{'within ' + ', '.join(by) if by else ''}; a question-level McNemar needs one "
                         "(use cluster_bootstrap_ci)")
    groups = results.groupby(list(by), sort=False) if by else [((), results)]
    rows = []
    for key, part in groups:
        wide = part.pivot(index=units, columns="method", values=outcome)
        if reference not in wide.columns:
            continue
        where = dict(zip(by, key if isinstance(key, tuple) else (key,)))
        for other in [m for m in (methods or part["method"].unique()) if m in wide.columns and m != reference]:
            pair = wide[[reference, other]].dropna()
            if pair.empty:
                raise ValueError(f"{reference!r} and {other!r} share no {'/'.join(units)} in {where or 'results'}")
            test = mcnemar(pair[other].to_numpy(), pair[reference].to_numpy())
            rows.append({**where, "method": other, "reference": reference, "n": len(pair),
                         "only method right": test["a_only"], "only reference right": test["b_only"],
                         "p": test["p_value"]})
    table = pd.DataFrame(rows, columns=[*by, "method", "reference", "n", "only method right",
                                        "only reference right", "p"])
    return table.assign(comparisons=len(table), family=_family(table, reference, by))


def show_p(table):
    """``table`` to display in a notebook or a terminal: ``p_as_text``'s table, a ``paired_tests``
    table's family printed once above it with the Bonferroni level instead of on every row."""
    if "family" in table.columns and len(table):
        comparisons = int(table["comparisons"].iloc[0])
        print(f"{table['family'].iloc[0]}; Bonferroni level 0.05 / {comparisons} = {0.05 / comparisons:.2g}")
        table = table.drop(columns=["family", "comparisons"])
    return p_as_text(table)


def p_as_text(table):
    """``table`` with its ``p`` column as the kit prints a p-value (``format_p``: "0.0312",
    "< 1e-4"); the numbers stay in the table it was given."""
    return table.assign(p=table["p"].map(format_p))


def _family(tests, reference: str, by: Sequence[str]) -> str:
    """The tests a Bonferroni correction counts, in words: "12 tests: 4 methods vs dense, in each
    of 3 types"."""
    methods = tests["method"].nunique()
    text = f"{len(tests)} test{'s' * (len(tests) != 1)}: {methods} method{'s' * (methods != 1)} vs {reference}"
    if by and len(tests):
        groups, named = len(tests.drop_duplicates(list(by))), by[0] if len(by) == 1 else f"({', '.join(by)})"
        text += (f", in each of {groups} {named}{'s' if len(by) == 1 else ' groups'}" if groups > 1 else
                 f", in {named} {', '.join(map(str, tests.iloc[0][list(by)]))}")
    return text


def separation_auc(positive: Sequence[float], negative: Sequence[float]) -> float:
    """P(score of a positive > score of a negative), ties counting half — the ROC AUC as the
    Mann-Whitney U over the pairs (scikit-learn's ``roc_auc_score``); NaN when a side is empty."""
    from scipy.stats import mannwhitneyu

    pos, neg = (np.asarray(v, dtype=float) for v in (positive, negative))
    for name, values in (("positive", pos), ("negative", neg)):
        _reject_nan(values, name)
    if not len(pos) or not len(neg):
        return float("nan")
    return float(mannwhitneyu(pos, neg).statistic / (len(pos) * len(neg)))


def extreme_names(values, best: str = "max", labels: dict | None = None) -> str:
    """Who holds the highest (``best="max"``) or lowest (``"min"``) value of a pandas Series, as a
    phrase that names every tie: "corm", or "corm, pa-ce and relevance-ce, tied" — where
    ``idxmax`` would name one of them as if it stood alone. ``labels`` maps an index label to the
    name shown (e.g. a method id to its label); a label it lacks is shown as it is."""
    if best not in ("max", "min"):
        raise ValueError(f"best must be 'max' or 'min', got {best!r}")
    if len(values) == 0:
        raise ValueError("extreme_names needs at least one value, got none")
    target = values.max() if best == "max" else values.min()
    names = [(labels or {}).get(label, label) for label, value in values.items() if value == target]
    if len(names) == 1:
        return names[0]
    return f"{', '.join(names[:-1])} and {names[-1]}, tied"


def format_p(p: float, relation: bool = False) -> str:
    """A p-value for a table ("0.0312", or "< 1e-4" below that — never "0"); with ``relation``,
    for a sentence ("= 0.0312" / "< 1e-4")."""
    if p < 1e-4:
        return "< 1e-4"
    return f"= {p:.3g}" if relation else f"{p:.3g}"


def bootstrap_ci(values: Sequence[float], n_resamples: int = 2000, confidence: float = 0.95,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean, resampling rows (scipy)."""
    return cluster_bootstrap_ci(values, np.arange(len(values)), n_resamples, confidence, seed)


def cluster_bootstrap_ci(values: Sequence[float], clusters: Sequence, n_resamples: int = 2000,
                         confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean, resampling whole clusters (e.g. questions).

    Use it when rows are not independent (several rewrites of one question): each resample draws
    clusters with replacement and takes the mean over all their rows. Clusters are numbered in order
    of first appearance, so with one row per cluster it reproduces ``bootstrap_ci`` for the same
    seed. For a question-level paired comparison, pass the per-row differences ``a - b``.
    A single cluster, or identical values, gives the degenerate interval (mean, mean).
    """
    from scipy.stats import bootstrap

    values, clusters = np.asarray(values, dtype=float), np.asarray(clusters)
    if values.ndim != 1 or clusters.shape != values.shape:
        raise ValueError(f"expected values and clusters of equal length, got {values.shape} and "
                         f"{clusters.shape}")
    if len(values) == 0:
        raise ValueError("a bootstrap needs at least one value, got none")
    _reject_nan(values, "values")
    _, first_row, cluster_of_row = np.unique(clusters, return_index=True, return_inverse=True)
    cluster_of_row = np.argsort(np.argsort(first_row))[cluster_of_row]
    sums, sizes = np.bincount(cluster_of_row, weights=values), np.bincount(cluster_of_row)
    if len(sizes) < 2 or np.all(values == values[0]):
        return float(values.mean()), float(values.mean())

    def pooled_mean(drawn: np.ndarray, axis: int = -1) -> np.ndarray:
        return sums[drawn].sum(axis=axis) / sizes[drawn].sum(axis=axis)

    result = bootstrap((np.arange(len(sizes)),), pooled_mean, n_resamples=n_resamples,
                       confidence_level=confidence, method="percentile", vectorized=True,
                       random_state=seed)
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def _gold_answers(answers: Iterable[str]) -> list[str]:
    return list(_collection(answers, "answers"))


def _ids(ids: Iterable[str]) -> Iterable[str]:
    return _collection(ids, "relevant ids")


def _collection(values: Iterable[str], what: str) -> Iterable[str]:
    # a bare string would otherwise be read as a collection of its characters ("p-12" as the
    # ids "p", "-", "1", "2"; "abc" as the answers "a", "b", "c")
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{what} must be a collection of strings, not a bare "
                        f"{type(values).__name__} ({values!r:.40}); wrap it in a list")
    return values


def _tied_blocks(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct scores, highest first; each item's block (index into them); each block's size."""
    negated, block, size = np.unique(-scores, return_inverse=True, return_counts=True)
    return -negated, block, size


def _reject_nan(values: np.ndarray, name: str) -> None:
    missing = int(np.isnan(values).sum())
    if missing:
        raise ValueError(f"{name} holds {missing} NaN value(s) (a row missing after a join?); "
                         f"drop or fill them first")


def _paired(a: Sequence[float], b: Sequence[float],
            names: tuple[str, str]) -> tuple[np.ndarray, np.ndarray]:
    """Two aligned 1-D float arrays, non-empty and free of NaN (a NaN would otherwise sort
    somewhere arbitrary, or count as correct)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"expected {names[0]} and {names[1]} as two 1-D sequences of equal "
                         f"length, got {a.shape} and {b.shape}")
    if len(a) == 0:
        raise ValueError("expected at least one item, got none")
    _reject_nan(a, names[0])
    _reject_nan(b, names[1])
    return a, b
