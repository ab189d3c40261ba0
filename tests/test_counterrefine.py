"""CounterRefine: the second pass's queries and budget, scoped retrieval, KEEP/REVISE decided by
the decoder and gated by the validator, the REVISE threshold from training questions, the
transition tables, and knobs checked before any work."""

import numpy as np
import pandas as pd
import pytest

from robustkit.counterrefine import settings
from robustkit.counterrefine.experiments import helped_vs_harmed, transitions
from robustkit.counterrefine.method import CounterRefine, answer_conditioned_queries, calibrate_revise_threshold
from robustkit.counterrefine.validate import parse_refinement, validate
from robustkit.data import Corpus, mini_multihop, mini_questions
from robustkit.methods import Query
from robustkit.retrieval import ScopedRetriever


@pytest.fixture(scope="module")
def questions():
    return mini_multihop("train")[:2] + mini_questions("train")[:2]


def queries_of(questions):
    return [Query(q.id, q.id, q.text) for q in questions]


def test_answer_conditioned_queries_add_the_draft_alone_for_typed_questions():
    who = "who wrote the novel that the film blade runner was adapted from"
    assert answer_conditioned_queries(who, "Philip K. Dick") == [who, f"{who} Philip K. Dick", "Philip K. Dick"]
    what = "what is the currency of india"
    assert answer_conditioned_queries(what, "the rupee") == [what, f"{what} the rupee"]
    assert answer_conditioned_queries(who, "Unknown.") == [who]  # an abstaining draft conditions nothing


def test_scoped_retrieval_ranks_only_the_questions_own_passages(mini):
    corpus, dense = mini
    scope = [p.id for p in corpus.passages[:10]]
    scoped = ScopedRetriever(dense, {"q1": scope, "q2": [p.id for p in corpus.passages[10:20]]})
    alone = dense.restricted_to(Corpus([corpus[d] for d in scope], "scope"))
    query = ["who was the first emperor of rome"]
    got = scoped.search_for(["q1"], query, 4)[0]
    want = alone.search(query, 4)[0]
    assert [h.doc_id for h in got] == [h.doc_id for h in want]
    assert np.allclose([h.score for h in got], [h.score for h in want], atol=1e-5)
    assert all(h.doc_id in scope for h in got)
    with pytest.raises(KeyError, match="no passage scope"):
        scoped.search_for(["q9"], query, 4)
    with pytest.raises(ValueError, match="is empty"):
        ScopedRetriever(dense, {"q1": []})


def test_second_pass_budget_merge_and_provenance(counting, generator, mini, questions):
    corpus, dense = mini
    retriever = counting(dense)
    method = CounterRefine(retriever, generator, corpus, k=3, max_snippets=6, max_words=20, draft_tokens=12,
                           refine_tokens=12, decoding="constrained", revise_above=1.0)
    answers = method.answer(queries_of(questions))
    n_queries = sum(len(a.trace["queries"]) for a in answers)
    # one call for the drafts, one shared by every second-pass query of every question
    assert retriever.calls == [(len(questions), 3), (n_queries, 3)]
    for a in answers:
        assert len(a.passage_ids) == len(set(a.passage_ids)) <= 6
        assert a.passage_ids[:3] == a.trace["draft_ids"]  # q comes first and finds the draft's own
        assert all(found and all(0 <= j < len(a.trace["queries"]) for j in found) for found in a.trace["found_by"])
        assert (a.trace["decision"], a.text, a.retrieval_calls) == ("KEEP", a.trace["draft"], 2)


@pytest.mark.parametrize("second_pass, calls", [("question", 2), ("none", 1)])
def test_ablations_second_pass_budgets(counting, generator, mini, questions, second_pass, calls):
    corpus, dense = mini
    retriever = counting(dense)
    method = CounterRefine(retriever, generator, corpus, k=2, max_snippets=9, max_words=20, draft_tokens=12,
                           decoding="constrained", revise_above=1.0, second_pass=second_pass)
    answers = method.answer(queries_of(questions))
    assert len(retriever.calls) == calls and all(a.retrieval_calls == calls for a in answers)
    for a in answers:
        if second_pass == "none":
            assert a.passage_ids == a.trace["draft_ids"] and a.trace["queries"] == []
        else:  # q alone, as deep as the full method's 2 or 3 queries together
            full = answer_conditioned_queries(a.trace["queries"][0], a.trace["draft"])
            assert a.trace["queries"] == [a.trace["queries"][0]] and len(a.passage_ids) == 2 * len(full)


@pytest.mark.parametrize("validator", [True, False])
def test_a_revision_counts_only_when_the_validator_accepts_it(generator, mini, questions, validator):
    corpus, dense = mini
    method = CounterRefine(dense, generator, corpus, k=2, max_snippets=6, max_words=20, draft_tokens=12,
                           refine_tokens=12, decoding="constrained", revise_above=0.0, validator=validator)
    for q, a in zip(questions, method.answer(queries_of(questions))):
        proposal = parse_refinement(a.trace["reply"])
        assert a.trace["decision"] == proposal.decision == "REVISE" or proposal.error  # revise_above 0
        verdict = validate(q.text, a.trace["draft"], proposal, [corpus[d].content for d in a.passage_ids])
        accepted = verdict.accepted if validator else not proposal.error
        assert (a.trace["validation"] == "accepted") == accepted
        assert a.text == (proposal.answer if accepted else a.trace["draft"])
        assert a.model_calls == 4  # draft, decision, answer line, citation


def test_free_decoding_keeps_the_draft_when_the_reply_is_malformed(generator, mini, questions):
    corpus, dense = mini
    method = CounterRefine(dense, generator, corpus, k=2, max_snippets=4, max_words=20, draft_tokens=12,
                           refine_tokens=24)
    for a in method.answer(queries_of(questions[:2])):
        assert a.trace["p_revise"] is None and a.model_calls == 2
        if a.trace["malformed"]:
            assert a.trace["validation"].startswith("malformed") and a.text == a.trace["draft"]


def test_revise_threshold_revises_as_often_as_training_drafts_are_wrong():
    p = [0.05, 0.30, 0.10, 0.20]
    threshold = calibrate_revise_threshold(p, [1, 0, 1, 0])
    assert [x > threshold for x in p] == [False, True, False, True]
    assert calibrate_revise_threshold(p, [1, 1, 1, 1]) == 1.0
    with pytest.raises(ValueError, match="one P\\(REVISE\\) per draft"):
        calibrate_revise_threshold(p, [1, 0])


def test_transitions_and_the_paired_test_count_questions():
    before, after = [1, 1, 0, 0, 0], [1, 0, 1, 1, 0]
    trace = {"changed": True}  # a trace is a dict in the results table (methods.run)
    rows = [{"dataset": "d", "method": m, "question_id": f"q{i}", "correct": c, "trace": trace if m != "dense" else None}
            for m, values in (("dense", before), ("counterrefine", after)) for i, c in enumerate(values)]
    table = transitions(pd.DataFrame(rows))
    kit = table[table["source"] == "kit"].set_index("outcome")
    assert kit["count"].to_dict() == {"stay correct": 1, "stay wrong": 1, "fixed": 2, "harmed": 1}
    assert kit["share"].sum() == pytest.approx(100)
    assert set(table.loc[table["source"] == "paper", "outcome"]) == set(kit.index)
    paired = helped_vs_harmed(pd.DataFrame(rows)).iloc[0]
    assert (paired["fixed"], paired["harmed"], paired["changed"]) == (2, 1, 5)


@pytest.mark.parametrize("changes, message", [
    ({"k": 0}, "k"), ({"tau": 0.5}, "unknown CounterRefine knob"), ({"decoding": "beam"}, "unknown decoding"),
    ({"decoding": "constrained", "max_snippets": 12}, "at most 9 snippets"), ({"k": 6, "max_snippets": 5}, "must be >= k"),
])
def test_bad_knobs_fail_before_any_work(changes, message):
    with pytest.raises(ValueError, match=message):
        settings("tiny", **changes)


def test_method_refuses_bad_knobs(generator, mini):
    corpus, dense = mini
    with pytest.raises(ValueError, match="unknown second_pass"):
        CounterRefine(dense, generator, corpus, second_pass="web")
    with pytest.raises(ValueError, match="at most 9 snippets"):
        CounterRefine(dense, generator, corpus, max_snippets=15, decoding="constrained")


class FindsNothing:
    """A search backend that finds nothing for these queries (a web search can)."""

    name = "finds-nothing"

    def search(self, queries, k):
        return [[] for _ in queries]


def test_no_snippets_is_a_printed_and_recorded_fallback(generator, mini, questions, capsys):
    corpus, _ = mini
    method = CounterRefine(FindsNothing(), generator, corpus, k=2, max_snippets=4, max_words=20,
                           draft_tokens=8, decoding="constrained", revise_above=0.0)
    answers = method.answer(queries_of(questions[:2]))
    assert "2 of 2 questions got no snippets" in capsys.readouterr().out
    assert all(a.trace["validation"] == "no snippets" and a.text == a.trace["draft"] for a in answers)
    assert all(a.model_calls == 2 for a in answers)  # draft and decision; nothing to cite
