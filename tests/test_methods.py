"""The Method / Answer interface and the results table built from it."""
import pandas as pd
import pytest

from robustkit.judges import LLMJudge, MatchThenJudge, NormalisedMatch
from robustkit.methods import Answer, Query, answers_table, queries_from, run


class Echo:
    """A fake method: answers with the query text, abstains on queries containing '?'."""

    name = "echo"

    def __init__(self):
        self.seen = []

    def answer(self, queries):
        self.seen.append([q.text for q in queries])
        return [Answer(q.id, q.question_id, self.name, q.text, abstained="?" in q.text,
                       confidence=0.5, passage_ids=["p"], retrieval_calls=1, model_calls=2,
                       trace={"draft": q.text.upper()}) for q in queries]


class Shuffled(Echo):
    def answer(self, queries):
        return super().answer(queries)[::-1]


QUERIES = pd.DataFrame([
    {"query_id": "a", "question_id": "qa", "query": "paris is the capital", "answers": ("Paris",), "type": "clean"},
    {"query_id": "b", "question_id": "qb", "query": "lyon", "answers": ("Paris",), "type": "clean"},
    {"query_id": "c", "question_id": "qa", "query": "paris?", "answers": ("Paris",), "type": "biased"},
])


def test_run_scores_every_method_on_the_same_queries():
    echo = Echo()
    table = run({"echo": echo, "again": Echo()}, QUERIES)
    assert echo.seen == [list(QUERIES["query"])]  # one batch, in order; gold never passed in
    assert len(table) == 6 and set(table["method"]) == {"echo", "again"}
    by_id = table[table["method"] == "echo"].set_index("query_id")
    assert by_id.loc["a", "correct"] == 1.0 and by_id.loc["b", "correct"] == 0.0
    assert by_id.loc["c", "correct"] == 0.0  # matches "paris" but abstained: never correct
    assert by_id.loc["a", "draft"] == "PARIS IS THE CAPITAL"  # trace keys become columns
    assert by_id.loc["c", "type"] == "biased" and by_id.loc["a", "model_calls"] == 2


def test_run_refuses_answers_out_of_order():
    with pytest.raises(RuntimeError, match="out of order"):
        run({"shuffled": Shuffled()}, QUERIES)


def test_queries_table_is_checked():
    with pytest.raises(ValueError, match="duplicate query_id 'a'"):
        queries_from(pd.concat([QUERIES, QUERIES.iloc[:1]]))
    with pytest.raises(ValueError, match="lacks column"):
        queries_from(QUERIES.drop(columns=["question_id"]))
    with pytest.raises(ValueError, match="gold 'answers'"):
        run({"echo": Echo()}, QUERIES.drop(columns=["answers"]))
    assert queries_from(QUERIES)[1] == Query("b", "qb", "lyon")


def test_answers_table_flattens_the_trace():
    table = answers_table([Answer("a", "qa", "m", "x", trace={"kill_queries": ["k1"]})])
    assert table.loc[0, "answer"] == "x" and table.loc[0, "kill_queries"] == ["k1"]
    assert table.loc[0, "abstained"] == False  # noqa: E712 (numpy bool)


class Says:
    name = "says"

    def __init__(self, verdict):
        self.verdict, self.calls = verdict, []

    def __call__(self, questions, predictions, answer_lists):
        self.calls.append(list(predictions))
        return [self.verdict] * len(predictions)


def test_match_then_judge_asks_only_what_the_match_rejects():
    second = Says(True)
    judge = MatchThenJudge(second)
    verdicts = judge(["q"] * 4, ["Paris.", "Lutetia", "unknown", ""], [("Paris",)] * 4)
    assert verdicts == [True, True, False, False]
    assert second.calls == [["Lutetia"]] and judge.name == "normalised-match+says"
    assert NormalisedMatch()(["q"], ["the city of Paris"], [("Paris",)]) == [True]
    with pytest.raises(ValueError, match="align one to one"):
        NormalisedMatch()(["q"], ["a", "b"], [("a",)])


def test_llm_judge_names_its_model(generator):
    assert LLMJudge(generator).name == f"llm-judge:{generator.model_id}"
