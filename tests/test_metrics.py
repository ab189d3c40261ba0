import itertools

import numpy as np
import pytest

from robustkit import metrics


def test_exact_match_normalises():
    assert metrics.exact_match("The Beatles!", ["beatles"]) == 1.0
    assert metrics.exact_match("Beatles band", ["beatles"]) == 0.0


@pytest.mark.parametrize("spelled, gold", [
    ("Leoš Janáček", "Leos Janacek"),  # a public benchmark's two spellings of one name
    ("Gabriel García Márquez", "Gabriel Garcia Marquez"),
    ("Jørn Utzon", "Jorn Utzon"),  # letters Unicode does not decompose are spelled out
    ("Marie Skłodowska", "Marie Sklodowska"),
    ("Æsir", "Aesir"),
])
def test_the_judge_folds_diacritics_either_way(spelled, gold):
    for prediction, answers in ((spelled, [gold]), (gold, [spelled])):
        assert metrics.exact_match(prediction, answers) == 1.0
        assert metrics.substring_match(f"It was {prediction}, I think.", answers) == 1.0
        assert metrics.token_f1(prediction, answers) == 1.0


def test_folding_keeps_squad_normalisation_and_whole_words():
    from robustkit.data import normalize_answer

    # the SQuAD v1.1 script's steps, unchanged on plain ASCII
    assert normalize_answer("The  Beatles' \"Abbey Road\"!") == "beatles abbey road"
    assert normalize_answer("Île-de-France") == "iledefrance"  # punctuation dropped as SQuAD does
    assert metrics.substring_match("Janáčekova", ["Janacek"]) == 0.0  # a longer word is another word
    assert metrics.exact_match("Lodz", ["Łódź"]) == 1.0 and metrics.exact_match("Lodi", ["Łódź"]) == 0.0


def test_token_f1_hand_computed():
    # pred tokens {george, washington, carver}, gold {george, washington}: P=2/3, R=1 -> F1=0.8
    assert metrics.token_f1("George Washington Carver", ["George Washington"]) == pytest.approx(0.8)
    assert metrics.token_f1("Paris", ["London", "paris"]) == 1.0
    assert metrics.token_f1("nothing", ["Paris"]) == 0.0


def test_substring_match_whole_words():
    assert metrics.substring_match("It was George Washington.", ["George Washington"]) == 1.0
    assert metrics.substring_match("Washingtonian", ["Washington"]) == 0.0


def test_recall_at_k_and_first_rank():
    ranked = ["a", "b", "c", "d"]
    assert metrics.recall_at_k(ranked, {"c"}, 2) == 0.0
    assert metrics.recall_at_k(ranked, {"c"}, 3) == 1.0
    assert metrics.first_relevant_rank(ranked, {"d", "c"}) == 3
    assert metrics.first_relevant_rank(ranked, {"z"}) is None
    with pytest.raises(ValueError):
        metrics.recall_at_k(ranked, {"a"}, 0)


def test_risk_coverage_and_aurc_hand_computed():
    conf = [0.9, 0.8, 0.3, 0.1]
    correct = [1, 0, 1, 0]
    curve = metrics.risk_coverage(conf, correct)
    np.testing.assert_allclose(curve["accuracy"], [1, 0.5, 2 / 3, 0.5])
    # risks 0, .5, 1/3, .5 -> mean 1/3
    assert metrics.aurc(conf, correct) == pytest.approx(1 / 3)
    assert metrics.accuracy_at_coverage(conf, correct, 0.5) == 0.5


def test_ece_hand_computed():
    # bin 9: conf .9,.9 acc .5 -> .4 gap, weight .5; bin 1: conf .1 acc 0 -> .1 gap, weight .5
    assert metrics.expected_calibration_error([0.9, 0.9, 0.1, 0.1], [1, 0, 0, 0]) == pytest.approx(0.25)


def test_mcnemar_discordant_counts():
    out = metrics.mcnemar([1, 1, 1, 0, 0], [0, 0, 1, 0, 1])
    assert (out["a_only"], out["b_only"]) == (2, 1)
    assert 0 < out["p_value"] <= 1


def test_bootstrap_ci_brackets_mean():
    low, high = metrics.bootstrap_ci([0, 1] * 50)
    assert low < 0.5 < high


def test_mismatched_lengths_rejected():
    with pytest.raises(ValueError, match="equal length"):
        metrics.aurc([0.1, 0.2], [1])


def test_p_values_are_never_printed_as_zero():
    assert metrics.format_p(0.0) == "< 1e-4" and metrics.format_p(3e-7, relation=True) == "< 1e-4"
    assert metrics.format_p(0.03124) == "0.0312" and metrics.format_p(0.5, relation=True) == "= 0.5"


# --- ranking: ties are averaged over their orders -------------------------------------------

def _tie_average_by_enumeration(metric, scores, gains):
    """The metric averaged over every order of the items, each ranked by score (stable within ties)."""
    values = []
    for order in itertools.permutations(range(len(scores))):
        order = list(order)
        # strictly decreasing stand-in scores that follow score, then the permutation for ties
        ranked = sorted(order, key=lambda i: -scores[i])
        stand_in = np.empty(len(scores))
        stand_in[ranked] = np.arange(len(scores), 0, -1)
        values.append(metric(stand_in, gains))
    return float(np.mean(values))


def test_constant_scores_get_chance_not_perfect_ranking():
    # a collapsed critic, positive first as in the training groups (the old code gave 1.0 for both)
    scores, gains = [0.3] * 4, [1, 0, 0, 0]
    expected_ndcg = (1 + 1 / np.log2(3) + 1 / 2) / 4
    assert metrics.ndcg_at_k(scores, gains, 3) == pytest.approx(expected_ndcg)
    assert metrics.mrr(scores, gains) == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4)


def test_mrr_tied_block_with_several_relevant_hand_computed():
    # ranks 2-4 tied, two relevant: first relevant at rank 2 w.p. 2/3, at rank 3 w.p. 1/3
    assert metrics.mrr([1, .5, .5, .5], [0, 1, 1, 0]) == pytest.approx(2 / 3 / 2 + 1 / 3 / 3)
    assert metrics.mrr([.2, .1], [0, 0]) == 0.0


def test_ranking_metrics_match_enumeration_over_tie_orders():
    rng = np.random.default_rng(7)
    for _ in range(20):
        n = int(rng.integers(2, 6))
        scores = rng.integers(0, 3, n).astype(float)
        gains = rng.integers(0, 3, n).astype(float)
        assert metrics.mrr(scores, gains) == pytest.approx(
            _tie_average_by_enumeration(metrics.mrr, scores, gains))
        ndcg2 = lambda s, g: metrics.ndcg_at_k(s, g, 2)  # noqa: E731
        assert ndcg2(scores, gains) == pytest.approx(_tie_average_by_enumeration(ndcg2, scores, gains))


def test_ndcg_agrees_with_scikit_learn_with_and_without_ties():
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    for trial in range(40):
        n = int(rng.integers(2, 10))
        gains = rng.integers(0, 4, n).astype(float)
        scores = rng.normal(size=n)
        if trial % 2:
            scores = np.round(scores)  # plenty of ties
        for k in (1, 3, n, n + 2):
            expected = sklearn_metrics.ndcg_score([gains], [scores], k=k, ignore_ties=False)
            assert metrics.ndcg_at_k(scores, gains, k) == pytest.approx(expected)


def test_ranking_metrics_reject_bad_k_and_lengths():
    with pytest.raises(ValueError, match="k=0"):
        metrics.ndcg_at_k([0.1, 0.2], [1, 0], 0)
    with pytest.raises(ValueError, match="k=-1"):
        metrics.recall_at_k(["a"], {"a"}, -1)
    with pytest.raises(ValueError, match="equal length"):
        metrics.ndcg_at_k([0.1, 0.2], [1], 3)
    with pytest.raises(ValueError, match="equal length"):
        metrics.mrr([0.1], [1, 0])


# --- selective prediction: coverage is P(confidence >= threshold) ---------------------------

def test_tied_confidences_are_answered_together():
    # one threshold, coverage 1, risk 0.5, whatever the row order (old: 0.25 and 0.75)
    assert metrics.aurc([.5, .5], [1, 0]) == pytest.approx(0.5)
    assert metrics.aurc([.5, .5], [0, 1]) == pytest.approx(0.5)
    curve = metrics.risk_coverage([.5, .5], [1, 0])
    np.testing.assert_allclose(curve["coverage"], [1.0])
    np.testing.assert_allclose(curve["accuracy"], [0.5])
    # at 50% the tie forces 3/4 coverage; old: 1.0 or 0.5 depending on the row order
    assert metrics.accuracy_at_coverage([.9, .5, .5, .1], [1, 1, 0, 0], 0.5) == pytest.approx(2 / 3)
    assert metrics.accuracy_at_coverage([.9, .5, .5, .1], [1, 0, 1, 0], 0.5) == pytest.approx(2 / 3)


def test_risk_coverage_is_order_invariant_and_thresholds_reproduce_coverage():
    rng = np.random.default_rng(1)
    conf = rng.integers(0, 6, 40) / 5  # many ties
    correct = rng.integers(0, 2, 40)
    curve = metrics.risk_coverage(conf, correct)
    assert len(curve["threshold"]) == len(np.unique(conf))
    for theta, coverage, accuracy in zip(curve["threshold"], curve["coverage"], curve["accuracy"]):
        answered = conf >= theta
        assert answered.mean() == pytest.approx(coverage)
        assert correct[answered].mean() == pytest.approx(accuracy)
    for _ in range(5):
        order = rng.permutation(40)
        assert metrics.aurc(conf[order], correct[order]) == pytest.approx(metrics.aurc(conf, correct))
        assert metrics.accuracy_at_coverage(conf[order], correct[order], 0.8) == pytest.approx(
            metrics.accuracy_at_coverage(conf, correct, 0.8))


@pytest.mark.parametrize("coverage", [0.1, 0.5, 0.8, 0.95, 1.0])
def test_threshold_at_coverage_is_the_highest_gamma_that_keeps_the_coverage(coverage):
    rng = np.random.default_rng(2)
    conf = rng.integers(0, 8, 30) / 7  # with ties
    gamma = metrics.threshold_at_coverage(conf, coverage)
    assert (conf >= gamma).mean() >= coverage - 1e-12
    higher = conf[conf > gamma]
    assert not len(higher) or (conf >= higher.min()).mean() < coverage  # any higher γ answers less
    assert metrics.threshold_at_coverage([0.9, 0.1, 0.5, 0.7], 0.5) == 0.7
    with pytest.raises(ValueError, match="coverage"):
        metrics.threshold_at_coverage(conf, 0)


def test_risk_coverage_rejects_nan_confidence():
    with pytest.raises(ValueError, match="1 NaN"):
        metrics.risk_coverage([0.2, np.nan], [1, 0])


# --- McNemar -------------------------------------------------------------------------------

def test_mcnemar_rejects_missing_and_non_binary_values():
    with pytest.raises(ValueError, match="2 NaN"):
        metrics.mcnemar([1, np.nan, 0, np.nan], [1, 1, 0, 0])
    with pytest.raises(ValueError, match="equal length"):
        metrics.mcnemar([1, 0], [1])
    with pytest.raises(ValueError, match="0/1"):
        metrics.mcnemar([1, 2], [1, 0])
    with pytest.raises(ValueError, match="0/1"):
        metrics.mcnemar([1, 0.5], [1, 0])
    assert metrics.mcnemar([True, False], [False, False])["a_only"] == 1


def test_mcnemar_matches_statsmodels_exact():
    from statsmodels.stats.contingency_tables import mcnemar as reference

    rng = np.random.default_rng(2)
    cases = [([1, 1], [1, 1]), ([1, 0], [0, 1])]  # no discordant pairs; b == c
    cases += [(rng.integers(0, 2, n), rng.integers(0, 2, n)) for n in (5, 20, 60, 200)]
    for a, b in cases:
        a, b = np.asarray(a, bool), np.asarray(b, bool)
        table = [[np.sum(a & b), np.sum(a & ~b)], [np.sum(~a & b), np.sum(~a & ~b)]]
        assert metrics.mcnemar(a, b)["p_value"] == pytest.approx(reference(table, exact=True).pvalue)


# --- answers: SQuAD v1.1 normalisation -----------------------------------------------------

def test_squad_hand_computed_cases():
    assert metrics.exact_match("the Denver Broncos", ["Denver Broncos"]) == 1.0
    assert metrics.exact_match("U.S.A.", ["USA"]) == 1.0  # punctuation is deleted, not spaced
    assert metrics.exact_match("Theater", ["ater"]) == 0.0  # articles only as whole words
    # Counter overlap: cat 1, dog 1 -> P = R = 2/3
    assert metrics.token_f1("cat cat dog", ["cat dog dog"]) == pytest.approx(2 / 3)
    # best alias: P=2/3, R=1 -> 0.8 beats P=1/3, R=1 -> 0.5
    assert metrics.token_f1("Denver Broncos won", ["Broncos", "the Denver Broncos"]) == pytest.approx(0.8)
    assert metrics.token_f1("", ["Paris"]) == 0.0


def test_substring_match_possessives_and_agreement_with_exact_match():
    assert metrics.substring_match("NASA'S budget grew", ["NASA"]) == 1.0
    assert metrics.substring_match("Shakespeare's plays", ["Shakespeare"]) == 1.0
    for prediction, gold in [("Ocean's Eleven", "Ocean's Eleven"), ("Oceans Eleven", "Ocean's Eleven"),
                             ("Ocean's Eleven", "Oceans Eleven")]:
        assert metrics.exact_match(prediction, [gold]) == 1.0
        assert metrics.substring_match(prediction, [gold]) == 1.0


def test_bare_string_answers_rejected():
    for metric in (metrics.exact_match, metrics.token_f1, metrics.substring_match):
        with pytest.raises(TypeError, match="bare str"):
            metric("a", "Paris")  # the old code read this as answers "P", "a", … and matched "a"
        with pytest.raises(TypeError, match="bare bytes"):
            metric("a", b"Paris")


# --- bootstrap -----------------------------------------------------------------------------

def test_bootstrap_rejects_empty_and_nan():
    with pytest.raises(ValueError, match="at least one"):
        metrics.bootstrap_ci([])
    with pytest.raises(ValueError, match="NaN"):
        metrics.bootstrap_ci([1.0, np.nan, 0.0])
    with pytest.raises(ValueError, match="equal length"):
        metrics.cluster_bootstrap_ci([1.0, 0.0], ["q1"])


def test_bootstrap_ci_is_scipys_percentile_bootstrap():
    from scipy.stats import bootstrap

    values = np.random.default_rng(3).integers(0, 2, 50).astype(float)
    ci = bootstrap((values,), np.mean, n_resamples=2000, method="percentile", random_state=5)
    assert metrics.bootstrap_ci(values, seed=5) == pytest.approx(
        (ci.confidence_interval.low, ci.confidence_interval.high))


def test_cluster_bootstrap_with_singleton_clusters_is_the_row_bootstrap():
    rng = np.random.default_rng(4)
    values = rng.integers(0, 2, 30).astype(float)
    labels = [f"q{i}" for i in rng.permutation(30)]  # unsorted labels: order of appearance counts
    assert metrics.cluster_bootstrap_ci(values, labels, seed=11) == pytest.approx(
        metrics.bootstrap_ci(values, seed=11))
    assert metrics.cluster_bootstrap_ci(values, labels, seed=11) == metrics.cluster_bootstrap_ci(
        values, labels, seed=11)


def test_cluster_bootstrap_is_wider_for_correlated_rows():
    # 20 questions x 5 rewrites that all share the question's outcome
    outcome = np.random.default_rng(6).integers(0, 2, 20).astype(float)
    values, questions = np.repeat(outcome, 5), np.repeat(np.arange(20), 5)
    row_low, row_high = metrics.bootstrap_ci(values)
    low, high = metrics.cluster_bootstrap_ci(values, questions)
    assert low <= values.mean() <= high
    assert high - low > 1.5 * (row_high - row_low)
    assert metrics.cluster_bootstrap_ci([1.0, 0.0, 1.0], ["q", "q", "q"]) == pytest.approx((2 / 3, 2 / 3))


def test_excess_aurc_is_zero_for_a_perfect_ranking_and_positive_otherwise():
    correct = np.array([1, 0, 1, 1, 0], dtype=float)
    assert metrics.excess_aurc([0.9, 0.1, 0.8, 0.7, 0.2], correct) == pytest.approx(0.0)
    # the oracle answers the 3 right first: risks 0, 0, 0, 1/4, 2/5 at coverages 1/5 … 5/5
    oracle = (0 + 0 + 0 + 1 / 4 + 2 / 5) / 5
    worst = metrics.aurc([0.1, 0.9, 0.2, 0.3, 0.8], correct)
    assert metrics.excess_aurc([0.1, 0.9, 0.2, 0.3, 0.8], correct) == pytest.approx(worst - oracle)
    assert worst - oracle > 0


def test_separation_auc_counts_ties_half_and_refuses_nan():
    from robustkit.metrics import separation_auc

    assert separation_auc([0.9, 0.5], [0.5, 0.1]) == 0.875  # 3 wins and one tie of 4 pairs
    assert separation_auc([0.1], [0.9]) == 0.0
    assert np.isnan(separation_auc([], [0.3]))
    with pytest.raises(ValueError, match="NaN"):
        separation_auc([0.2, float("nan")], [0.1])


def _tidy(correct_by_method: dict, dataset: str = "nq") -> list[dict]:
    return [{"dataset": dataset, "question_id": f"q{i}", "method": method, "correct": c}
            for method, values in correct_by_method.items() for i, c in enumerate(values)]


def test_paired_tests_pairs_questions_within_each_group_and_counts_the_comparisons():
    import pandas as pd

    rows = _tidy({"ref": [1, 1, 1, 0, 1], "a": [0, 0, 1, 0, 1], "b": [1, 1, 1, 1, 1]}, "nq")
    rows += _tidy({"ref": [0, 0], "b": [1, 1]}, "hotpotqa")
    rows += _tidy({"a": [1, 0]}, "popqa")  # no reference here: left out
    tests = metrics.paired_tests(pd.DataFrame(rows), "ref", by=["dataset"], methods=["b", "a"])
    # read from the method's side: b alone right on nq's q3 and hotpotqa's q0 and q1, a never alone
    assert tests[["dataset", "method", "n", "only method right", "only reference right"]].values.tolist() == [
        ["nq", "b", 5, 1, 0], ["nq", "a", 5, 0, 2], ["hotpotqa", "b", 2, 2, 0]]
    assert tests["p"].tolist() == pytest.approx([1.0, 0.5, 0.5])  # exact: 2 * 0.5**2 for 2 vs 0
    assert set(tests["comparisons"]) == {3} and set(tests["reference"]) == {"ref"}
    assert set(tests["family"]) == {"3 tests: 2 methods vs ref, in each of 2 datasets"}
    assert set(metrics.paired_tests(pd.DataFrame(rows), "ref", by=["dataset", "question_id"])["family"]) == \
        {"12 tests: 2 methods vs ref, in each of 7 (dataset, question_id) groups"}
    assert not {"vs", "improvements", "regressions", "p (exact McNemar)"} & set(tests.columns)  # one p, one side
    # a question one method did not answer is left out of that pair only
    partial = pd.DataFrame(_tidy({"ref": [1, 1, 0], "a": [0, 0, 0]}) + _tidy({"b": [1]}))
    one = metrics.paired_tests(partial, "ref")
    assert one.set_index("method")["n"].to_dict() == {"a": 3, "b": 1}
    assert one["family"].iloc[0] == "2 tests: 2 methods vs ref"
    # pooled over datasets: the question is (dataset, question_id)
    pooled = metrics.paired_tests(pd.DataFrame(rows[:5] + rows[10:]), "ref", methods=["b"],
                                  unit=["dataset", "question_id"])
    assert pooled.loc[0, ["n", "only method right"]].tolist() == [7, 3]
    shown = metrics.p_as_text(tests.assign(p=[1.0, 3e-5, 0.03125]))
    assert shown["p"].tolist() == ["1", "< 1e-4", "0.0312"] and tests["p"].dtype == float  # the table keeps numbers


def test_show_p_says_the_family_once_above_the_table(capsys):
    import pandas as pd

    tests = metrics.paired_tests(pd.DataFrame(_tidy({"ref": [1, 1, 0], "a": [0, 0, 0], "b": [1, 0, 0]})), "ref")
    shown = metrics.show_p(tests)
    assert capsys.readouterr().out == "2 tests: 2 methods vs ref; Bonferroni level 0.05 / 2 = 0.025\n"
    assert "family" not in shown.columns and "comparisons" not in shown.columns
    assert shown["p"].tolist() == ["0.5", "1"]


def test_paired_tests_refuses_what_would_make_pairs_dependent_or_empty():
    import pandas as pd

    twice = pd.DataFrame(_tidy({"ref": [1, 0], "a": [1, 1]}) + _tidy({"ref": [1]}))
    with pytest.raises(ValueError, match=r"methods \['ref'\] have several rows per question_id"):
        metrics.paired_tests(twice, "ref")
    with pytest.raises(ValueError, match="reference 'corm' is not in results"):
        metrics.paired_tests(pd.DataFrame(_tidy({"a": [1]})), "corm")
    with pytest.raises(ValueError, match=r"needs the column\(s\) \['cache'\]"):
        metrics.paired_tests(pd.DataFrame(_tidy({"ref": [1]})), "ref", by=["cache"])
    disjoint = pd.DataFrame(_tidy({"ref": [1]}) + [{"dataset": "nq", "question_id": "other", "method": "a",
                                                    "correct": 1}])
    with pytest.raises(ValueError, match="'ref' and 'a' share no question_id"):
        metrics.paired_tests(disjoint, "ref")


def test_extreme_names_names_every_tie_and_maps_labels():
    import pandas as pd

    from robustkit.metrics import extreme_names

    shares = pd.Series({"relevance-ce": 9.5, "pa-ce": 9.5, "corm": 9.5, "random": 14.3})
    assert extreme_names(shares, "min") == "relevance-ce, pa-ce and corm, tied"
    assert extreme_names(shares) == "random"
    assert extreme_names(shares, "max", {"random": "random order"}) == "random order"
    assert extreme_names(pd.Series({"a": 1.0, "b": 1.0}), "max") == "a and b, tied"
    with pytest.raises(ValueError, match="'max' or 'min'"):
        extreme_names(shares, "lowest")
