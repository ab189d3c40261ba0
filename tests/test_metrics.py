import numpy as np
import pytest

from robustkit import metrics


def test_exact_match_normalises():
    assert metrics.exact_match("The Beatles!", ["beatles"]) == 1.0
    assert metrics.exact_match("Beatles band", ["beatles"]) == 0.0


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
