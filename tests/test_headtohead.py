"""The head-to-head's tables (fast: hand-built results with known answers) and its config."""
import pandas as pd
import pytest

from robustkit.headtohead import experiments as ex
from robustkit.headtohead import readings
from robustkit.headtohead.config import METHODS, settings
from robustkit.headtohead.pipeline import LABELS


def _results():
    """Two methods × 3 questions × (clean, biased). dense: right on every clean query, wrong on
    q2's and q3's biased ones; fva-rag: drafts like dense, then one revision fixes q2's biased
    answer, one breaks q1's clean answer, one rewords q1's biased answer (no change in judgement)."""
    rows = []
    types = {"q1": "false_premise", "q2": "leading", "q3": "false_premise"}
    gold = {"q1": ["Paris"], "q2": ["Oslo"], "q3": ["Rome"]}
    dense = {("q1", "clean"): "Paris", ("q1", "biased"): "Paris", ("q2", "clean"): "Oslo",
             ("q2", "biased"): "Bergen", ("q3", "clean"): "Rome", ("q3", "biased"): "Milan"}
    fva = {**dense, ("q1", "clean"): "Lyon", ("q2", "biased"): "Oslo", ("q1", "biased"): "It is Paris"}
    for method, answers in (("dense", dense), ("fva-rag", fva)):
        for (q, condition), answer in answers.items():
            draft = dense[(q, condition)]
            rows.append({"method": method, "paper": "x", "query_id": f"{q}|{condition}", "question_id": q,
                         "condition": condition, "type": "clean" if condition == "clean" else types[q],
                         "query": f"{q} {condition}", "answers": gold[q], "answer": answer,
                         "correct": float(any(g in answer for g in gold[q])), "abstained": False,
                         "model_calls": 1 if method == "dense" else 3, "retrieval_calls": 1,
                         "latency_s": 0.1, "trace": {"draft": draft} if method == "fva-rag" else {}})
    return pd.DataFrame(rows)


def test_summary_counts_changes_fixes_and_breaks_against_the_first_answer():
    table = ex.summary(_results()).set_index("method")
    assert table.loc["dense", "accuracy"] == pytest.approx(100 * 4 / 6, abs=0.01)
    assert pd.isna(table.loc["dense", "changed %"])  # no first answer to change
    fva = table.loc["fva-rag"]
    assert fva["accuracy"] == pytest.approx(100 * 4 / 6, abs=0.01)
    assert fva["changed %"] == pytest.approx(100 * 3 / 6, abs=0.01)
    assert (fva["fixed"], fva["broke"]) == (1, 1)
    assert fva["CI low"] <= fva["accuracy"] <= fva["CI high"]
    assert fva["model calls / query"] == 3 and fva["questions"] == 3 and fva["queries"] == 6


def test_robustness_pairs_each_question_with_its_own_clean_answer():
    drops = ex.robustness(_results())
    dense = drops[drops["method"] == "dense"].set_index("type")
    assert dense.loc["all", "drop"] == pytest.approx(100 * 2 / 3, abs=0.01)
    assert dense.loc["leading", "drop"] == 100 and dense.loc["leading", "questions"] == 1
    assert dense.loc["false_premise", "drop"] == 50
    fva = drops[drops["method"] == "fva-rag"].set_index("type")
    # q1 clean wrong, biased right (-1); q2 both right (0); q3 clean right, biased wrong (+1)
    assert fva.loc["all", "drop"] == pytest.approx(0, abs=0.01)
    assert fva.loc["false_premise", "clean accuracy"] == 50


def test_pareto_front_keeps_only_undominated_methods():
    table = pd.DataFrame({"model calls / query": [1, 2, 3, 3], "accuracy": [40, 60, 50, 60]})
    assert ex.pareto(table).tolist() == [True, True, False, False]


def test_disagreements_list_split_queries_most_disputed_first():
    table = ex.disagreements(_results())
    assert set(table["query_id"]) == {"q1|clean", "q2|biased"}  # q1|biased: both right (reworded)
    assert table.set_index("query_id").loc["q2|biased", "right methods"] == "fva-rag"


def test_significance_tests_every_condition_against_dense():
    tests = ex.significance(_results())
    assert set(tests["type"]) == {"clean", "false_premise", "leading"}
    assert (tests["reference"] == "dense").all() and (tests["comparisons"] == 3).all()


def test_findings_state_n_the_reference_and_the_number_of_comparisons():
    results = _results()
    text = readings.findings(ex.summary(results), ex.robustness(results), ex.significance(results))
    assert "3 questions, 6 queries per method" in text
    assert "3 comparisons" in text and "0 below 0.05 uncorrected" in text
    # BM25 answers as dense does: the largest drop is theirs together, and the sentence names both
    both = pd.concat([results, results[results["method"] == "dense"].assign(method="bm25")], ignore_index=True)
    text = readings.findings(ex.summary(both), ex.robustness(both), ex.significance(both))
    assert f"Largest drop from clean to biased: {LABELS['dense']} and {LABELS['bm25']}, tied, +66.7 points" in text


def test_config_refuses_unknown_methods_and_runs_the_reference_first_when_missing():
    assert settings("tiny").methods == METHODS and settings("tiny").n_questions == 6
    assert settings("tiny").reference == "dense"
    with pytest.raises(ValueError, match="unknown method"):
        settings("tiny", methods=["dense", "vanilla"])
    with pytest.raises(ValueError, match=r"unknown method\(s\) \['sparse'\]"):
        settings("tiny", methods=["corm"], reference="sparse")
    assert settings("tiny", methods=["corm"]).methods == ("dense", "corm")  # every test needs its answers
    assert settings("tiny", methods=["corm", "bm25"], reference="bm25").methods == ("corm", "bm25")
    assert "reference='bm25'" in repr(settings("tiny", methods=["corm"], reference="bm25"))
    with pytest.raises(ValueError, match="unknown head-to-head knob"):
        settings("tiny", n_question=3)


def test_a_reranked_retriever_returns_the_rerankers_top_k_of_the_first_stages_top_m():
    import numpy as np

    from robustkit.baselines import RerankedRetriever
    from robustkit.data import mini_corpus
    from robustkit.retrieval import BM25Retriever

    class Reverse:  # scores the first stage's order backwards: its M-th candidate comes first
        name, llm_calls_per_candidate = "reverse", 0

        def score(self, queries, candidates, first_stage):
            return [-np.asarray(s, dtype=np.float32) for s in first_stage]

        def identity(self):
            return {"reranker": self.name}

    base = BM25Retriever(mini_corpus())
    composed = RerankedRetriever(base, Reverse(), m=6)
    queries = ["who wrote hamlet", "capital of australia"]
    first = base.search(queries, 6)
    hits = composed.search(queries, 2)
    assert [[h.doc_id for h in row] for row in hits] == [[row[5].doc_id, row[4].doc_id] for row in first]
    assert [h.rank for h in hits[0]] == [0, 1] and hits[0][0].score == -first[0][5].score
    assert composed.identity()["reranker"] == {"reranker": "reverse"} and composed.identity()["m"] == 6
    assert composed.search([], 2) == []
    with pytest.raises(TypeError, match="list of strings"):
        composed.search("who wrote hamlet", 2)


def test_composition_tests_each_composed_method_against_itself_alone():
    results = _results()
    composed = results[results["method"] == "fva-rag"].assign(method="fva-rag+corm")
    alone = results[results["method"] == "dense"].assign(method="fva-rag")  # "alone": right on 4 of 6
    table = ex.composition(pd.concat([alone, composed], ignore_index=True)).set_index("condition")
    assert table.loc["clean", "method"] == "fva-rag+corm" and table.loc["clean", "reference"] == "fva-rag"
    assert table.loc["clean", "accuracy alone"] == 100 and table.loc["clean", "accuracy composed"] == pytest.approx(66.67)
    assert (table.loc["clean", "only reference right"], table.loc["biased", "only method right"]) == (1, 1)
    assert (table["comparisons"] == 2).all()
    assert ex.composition(results).empty  # nothing composed in the run


def test_by_set_scores_each_sets_methods_and_says_why_the_others_did_not_run():
    """Two sets: on the two-hop questions read by AlignRAG's reader dense gets q1 right, alignrag q1
    and q2; on "misconceptions" dense and fva-rag each get one of two questions right, different
    ones. Every other method is a 'not run' row with its reason, none with a number."""
    from robustkit.headtohead.pipeline import TWO_HOP_ALIGNRAG, TWO_HOP_COUNTERREFINE

    rows = []
    right = {(TWO_HOP_ALIGNRAG, "dense"): {"q1"}, (TWO_HOP_ALIGNRAG, "alignrag-cpo"): {"q1", "q2"},
             ("misconceptions", "dense"): {"m1"}, ("misconceptions", "fva-rag"): {"m2"}}
    for (name, method), correct in right.items():
        for q in (("q1", "q2") if name == TWO_HOP_ALIGNRAG else ("m1", "m2")):
            rows.append({"set": name, "method": method, "question_id": q, "correct": float(q in correct),
                         "model_calls": 5 if method == "alignrag-cpo" else 1})
    table = ex.by_set(pd.DataFrame(rows), ["dense", "fva-rag", "alignrag-cpo", "counterrefine", "corm"])
    table = table.set_index(["set", "method"])
    assert table.loc[(TWO_HOP_ALIGNRAG, "alignrag-cpo"), "accuracy"] == 100
    assert table.loc[(TWO_HOP_ALIGNRAG, "alignrag-cpo"), "only it right"] == 1
    assert table.loc[(TWO_HOP_ALIGNRAG, "alignrag-cpo"), "only dense right"] == 0
    assert table.loc[(TWO_HOP_ALIGNRAG, "alignrag-cpo"), "model calls / question"] == 5
    assert table.loc[("misconceptions", "fva-rag"), "accuracy"] == 50
    assert table.loc[("misconceptions", "fva-rag"), "p"] == 1  # one discordant question each way
    assert (table["comparisons"] == 2).all()
    not_run = table[table["not run"].notna()]
    assert not_run["accuracy"].isna().all()
    assert (TWO_HOP_ALIGNRAG, "fva-rag") in not_run.index and ("misconceptions", "alignrag-cpo") in not_run.index
    assert "misconception" in table.loc[(TWO_HOP_ALIGNRAG, "fva-rag"), "not run"]
    # on the other reader's set a method says where it ran, not that it was never built for two hops
    assert TWO_HOP_COUNTERREFINE in table.loc[(TWO_HOP_ALIGNRAG, "counterrefine"), "not run"]
    assert "built for this set" in table.loc[(TWO_HOP_COUNTERREFINE, "counterrefine"), "not run"]
    # the debunking set has no rows at all: every method says why instead of leaving a hole
    assert table.loc["misconceptions + debunking"]["not run"].notna().all()


def test_system_takes_another_corpus_with_the_retriever_that_searches_it():
    from robustkit.data import Corpus, Passage
    from robustkit.headtohead.pipeline import system

    corpus = Corpus([Passage("p1", "Oslo", "Oslo is the capital of Norway.")], "one passage")
    with pytest.raises(ValueError, match="needs its retriever"):
        system(settings("tiny"), "alignrag-cpo", corpus=corpus)
    with pytest.raises(ValueError, match="pass corpus= too"):
        system(settings("tiny"), "corm", retriever=object())
