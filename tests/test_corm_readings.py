"""The sentences notebooks 02-04 print instead of typed numbers: each states what its table holds."""
import pandas as pd
import pytest

from robustkit.corm import paper, readings
from robustkit.methods import Answer, trace_table


def _table():
    rows = [("dense (MiniLM)", "dense", 42.9, 28.6, 57.1), ("warm start (kit)", "warm-start", 61.9, 47.6, 76.2),
            ("relevance CE", "relevance-ce", 64.3, 50.0, 78.6), ("CoRM critic", "corm", 59.5, 45.2, 73.8),
            ("random order", "random", 23.8, 11.9, 38.1), ("LLM-rerank", "llm-rerank", 50.0, 12.5, 87.5)]
    return pd.DataFrame([{"method": m, "key": k, "biased accuracy": a, "biased 95% CI": f"{lo:.1f}–{hi:.1f}",
                          "n biased": 42, "rerank ms/query": 4000.0 if k == "llm-rerank" else 250.0}
                         for m, k, a, lo, hi in rows])


def _tests():
    return pd.DataFrame([{"method": "dense", "only reference right": 11, "only method right": 4, "p": 0.118},
                         {"method": "random", "only reference right": 17, "only method right": 2, "p": 0.000729},
                         {"method": "warm-start", "only reference right": 1, "only method right": 2, "p": 1.0},
                         {"method": "relevance-ce", "only reference right": 1, "only method right": 3, "p": 0.625},
                         {"method": "llm-rerank", "only reference right": 2, "only method right": 0, "p": 0.5}])


def test_table1_names_the_best_row_the_warm_starts_share_and_only_what_passes_bonferroni():
    text = readings.table1(_table(), _tests())
    assert "Highest biased accuracy: relevance CE (64.3%" in text
    assert "11 questions only the critic gets right, 4 only dense; exact McNemar p = 0.118" in text
    assert "-2.4 points from the warm start" in text  # 59.5 - 61.9
    assert "5 comparisons, Bonferroni level 0.01: the critic differs significantly from random order only." in text
    no_random = _tests().query("method != 'random'")
    assert "no difference is significant" in readings.table1(_table(), no_random)
    tied = _table().replace({"biased accuracy": {59.5: 64.3}})  # the critic ties the relevance CE
    assert "Highest biased accuracy: relevance CE and CoRM critic, tied (64.3%" in readings.table1(tied, _tests())


def test_risk_coverage_says_whether_the_confidence_is_a_risk_signal():
    coverage = pd.DataFrame([{"method": "corm", "AURC": 0.465, "E-AURC": 0.364, "acc@100%": 0.595, "acc@80%": 0.618,
                              "acc@50%": 0.590, "n": 42},
                             {"method": "relevance-ce", "AURC": 0.333, "E-AURC": 0.256, "acc@100%": 0.643,
                              "acc@80%": 0.706, "acc@50%": 0.762, "n": 42}])
    text = readings.risk_coverage(coverage).splitlines()
    assert text[0] == ("corm: 59.5% answering all, 61.8% at 80% coverage, 59.0% at 50% (n = 42); AURC 0.465 against "
                       "0.405 for a random confidence — not below: over the whole curve its confidence orders its "
                       "answers no better than chance.")
    # not below chance overall, yet its top half right more often: the sentence says both
    top_half = coverage.assign(**{"acc@50%": [0.667, 0.762]})
    assert readings.risk_coverage(top_half).splitlines()[0].endswith(
        "no better than chance, though its most confident half is right 7.2 points more often than answering all.")
    assert "0.333 against 0.357 for a random confidence — below" in text[1]
    assert text[2] == (f"Paper (CoRM-RAG): {100 * paper.FULL_COVERAGE:.1f} → {100 * paper.RISK_COVERAGE[0][1]:.1f} → "
                       f"{100 * paper.RISK_COVERAGE[1][1]:.1f}%.")


def test_ablation_reports_only_the_left_out_type_with_its_interval_and_the_papers_drop():
    changes = pd.DataFrame([
        {"critic": "no-false_premise", "test type": "false_premise", "change": 0.0, "change CI low": -14.3,
         "change CI high": 14.3, "n": 14},
        {"critic": "no-false_premise", "test type": "topical_distraction", "change": 7.1, "change CI low": 0.0,
         "change CI high": 21.4, "n": 14},
        {"critic": "no-confirmation_bias", "test type": "confirmation_bias", "change": 14.3, "change CI low": 7.1,
         "change CI high": 28.6, "n": 14}])
    lines = readings.ablation(changes).splitlines()
    assert len(lines) == 2  # the off-type row is not a finding about the left-out type
    full, without = paper.ABLATION["false_premise"]
    assert lines[0] == (f"Without false_premise: +0.0 points on false_premise queries (95% CI -14.3 to +14.3, "
                        f"n = 14, includes zero); paper {without - full:+.1f}.")
    assert "includes zero" not in lines[1]
    # every question unchanged: a degenerate interval is said as such, not printed as "+0.0 to +0.0"
    unchanged = changes.assign(**{"change CI low": 0.0, "change CI high": 0.0, "change": 0.0})
    assert readings.ablation(unchanged).splitlines()[0].startswith(
        "Without false_premise: +0.0 points on false_premise queries (no query's outcome changed, n = 14)")


def test_sensitivity_says_when_intervals_do_not_overlap():
    table = pd.DataFrame([{"knob": "K", "value": 1, "biased accuracy": 61.9, "CI low": 47.6, "CI high": 76.2},
                          {"knob": "K", "value": 3, "biased accuracy": 59.5, "CI low": 45.2, "CI high": 73.8},
                          {"knob": "M", "value": 2, "biased accuracy": 20.0, "CI low": 10.0, "CI high": 30.0},
                          {"knob": "M", "value": 10, "biased accuracy": 60.0, "CI low": 45.0, "CI high": 75.0}])
    lines = readings.sensitivity(table).splitlines()
    assert lines[0] == "K — 1: 61.9%, 3: 59.5%; every 95% interval overlaps every other."
    assert lines[1].endswith("some intervals do not overlap.")


def test_cost_states_the_kits_ratio_beside_the_papers():
    text = readings.cost(_table())
    assert "critic 250 ms, LLM-rerank 4000 ms (16× the critic; paper 93×" in text


def test_label_and_rank1_findings_read_their_tables():
    by_kind = pd.DataFrame({"share s > 0": [0.905, 0.15, 0.25]}, index=["gold", "premise-matching", "distractor"])
    separation = pd.DataFrame([{"AUC gold vs other": 0.881, "gold ranked first (questions)": 10.0,
                                "questions with a positive": 12, "questions": 12},
                               {"AUC gold vs other": 0.909, "gold ranked first (questions)": 12.0,
                                "questions with a positive": 12, "questions": 12}], index=["s", "s_soft"])
    text = readings.label_findings(by_kind, separation)
    assert "s > 0 for 90.5% of gold candidates, 15.0% of premise-matching" in text
    assert "(s_soft separates better)" in text and "gold for 10 (s) and 12 (s_soft) of 12 questions" in text
    top1 = pd.DataFrame({"gold at rank 1 (%)": [52.4, 78.6, 73.8], "premise-matching at rank 1 (%)": [42.9, 11.9, 7.1],
                         "n": [42, 42, 42]}, index=["dense", "warm-start", "corm"])
    text = readings.rank1_findings(top1)
    assert "dense: a premise-matching passage first for 42.9%" in text
    assert "premise-matching first 7.1–11.9%, gold first 73.8–78.6%" in text
    assert "corm: premise-matching 7.1% (lowest: corm), gold 73.8% (highest: warm-start)" in text
    tied = top1.assign(**{"premise-matching at rank 1 (%)": [42.9, 7.1, 7.1]})
    assert "(lowest: warm-start and corm, tied)" in readings.rank1_findings(tied)
    assert "one query moves a share by 2.4 points" in text


def test_trace_table_lists_each_step_and_item_and_refuses_an_unknown_step():
    answer = Answer("q|fp", "q", "fva-rag", "x", trace={"draft": "A.", "kill_queries": ["a", "b"],
                                                        "contradiction": [0.123456], "revision": None})
    table = trace_table(answer, ["draft", "kill_queries", "contradiction", "revision"])
    assert list(table.index) == ["draft", "kill_queries [1]", "kill_queries [2]", "contradiction [1]", "revision"]
    assert table.loc["contradiction [1]", "value"] == 0.123 and table.loc["kill_queries [2]", "value"] == "b"
    with pytest.raises(KeyError, match="no step \\['verdict'\\].*'draft'"):
        trace_table(answer, ["verdict"])
