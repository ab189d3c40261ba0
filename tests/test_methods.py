"""The Method / Answer interface and the results table built from it."""
import numpy as np
import pandas as pd
import pytest

from robustkit.artifacts import read_manifest
from robustkit.judges import LLMJudge, MatchThenJudge, NormalisedMatch
from robustkit.methods import Answer, Query, answers_table, evaluate, queries_from, run


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
    assert by_id.loc["a", "trace"] == {"draft": "PARIS IS THE CAPITAL"}  # the trace, one dict
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


def test_answers_table_keeps_the_trace_in_one_column():
    table = answers_table([Answer("a", "qa", "m", "x", trace={"kill_queries": ["k1"]})])
    assert table.loc[0, "answer"] == "x" and table.loc[0, "trace"] == {"kill_queries": ["k1"]}
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


class Known(Echo):
    """Echo that says what decides its answers, so its results can be staged."""

    def __init__(self, knob=1, fail=False):
        super().__init__()
        self.knob, self.fail = knob, fail

    def identity(self):
        return {"method": "Known", "knob": self.knob}

    def answer(self, queries):
        if self.fail:
            raise KeyboardInterrupt  # the run stopped here
        answers = super().answer(queries)
        for a in answers:
            a.trace["scores"] = np.array([0.25, 0.5], dtype=np.float32)  # numpy, as rankers return
        return answers


def test_evaluate_stages_each_method_and_reuses_it_identically(tmp_path):
    first, second = Known(), Known()
    built = evaluate({"known": first, "other one": second}, QUERIES, tmp_path)
    assert len(built) == 6 and list(built["method"].unique()) == ["known", "other one"]
    assert built["trace"].iloc[0]["scores"] == [0.25, 0.5] and built["correct"].tolist() == [1.0, 0.0, 0.0] * 2
    files = sorted(p.name for p in tmp_path.glob("*.jsonl"))
    assert len(files) == 2 and files[0].startswith("known-") and files[1].startswith("other-one-")
    again = Known()
    reused = evaluate({"known": again, "other one": Known()}, QUERIES, tmp_path)
    assert again.seen == []  # nothing answered twice
    pd.testing.assert_frame_equal(reused, built)
    manifest = read_manifest(tmp_path / files[0])
    assert manifest["inputs"]["identity"] == {"method": "Known", "knob": 1}
    assert manifest["inputs"]["judge"] == "normalised-match" and manifest["stats"]["rows"] == 3


def test_evaluate_keeps_other_knobs_and_queries_apart_and_resumes_after_an_interruption(tmp_path):
    evaluate({"known": Known()}, QUERIES, tmp_path)
    other_knob, subset = Known(knob=2), Known()
    evaluate({"known": other_knob}, QUERIES, tmp_path)
    evaluate({"known": subset}, QUERIES.iloc[:2], tmp_path)
    assert other_knob.seen and subset.seen == [list(QUERIES["query"][:2])]
    assert len(list(tmp_path.glob("known-*.jsonl"))) == 3  # three artifacts, none overwritten
    with pytest.raises(KeyboardInterrupt):
        evaluate({"a": Known(knob=3), "b": Known(knob=4, fail=True)}, QUERIES, tmp_path)
    finished, resumed = Known(knob=3), Known(knob=4)
    evaluate({"a": finished, "b": resumed}, QUERIES, tmp_path)
    assert finished.seen == [] and resumed.seen == [list(QUERIES["query"])]


def test_evaluate_refuses_a_method_that_cannot_say_what_decides_it(tmp_path):
    with pytest.raises(TypeError, match="'echo' \\(Echo\\) has no identity\\(\\)"):
        evaluate({"echo": Echo()}, QUERIES, tmp_path)
    assert not list(tmp_path.iterdir())


def test_pending_names_the_methods_evaluate_would_run(tmp_path):
    from robustkit.methods import pending

    assert pending({"known": Known(), "other": Known(knob=2)}, QUERIES, tmp_path) == ["known", "other"]
    evaluate({"known": Known()}, QUERIES, tmp_path)
    assert pending({"known": Known(), "other": Known(knob=2)}, QUERIES, tmp_path) == ["other"]
    assert pending({"known": Known()}, QUERIES.iloc[:2], tmp_path) == ["known"]  # other queries
    (built,) = tmp_path.glob("known-*.jsonl")
    built.write_text(built.read_text().replace("paris", "rome"))  # bytes the manifest does not vouch for
    assert pending({"known": Known()}, QUERIES, tmp_path) == ["known"]
    with pytest.raises(TypeError, match="has no identity"):
        pending({"echo": Echo()}, QUERIES, tmp_path)
