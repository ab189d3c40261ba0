"""FVA-RAG: kill-query parsing, the anti-context budget, τ deciding the verdict, the
adjudicators, the adaptive baselines' control flow, and knobs checked before any work."""
import numpy as np
import pytest

from robustkit.adaptive import CRAG, SelfRAG, calibrate_thresholds, graded_retrieval
from robustkit.data import mini_misconceptions
from robustkit.fva import settings
from robustkit.fva.method import FVARAG, parse_queries
from robustkit.fva.data import stratified_sample, stratum
from robustkit.judges import AnswerConflict, NLIAdjudicator
from robustkit.methods import Query
from mirror import needs_mirror


@pytest.fixture(scope="module")
def queries():
    return [Query(m.id, m.id, m.text) for m in mini_misconceptions("test")[:3]]


def test_parse_queries_drops_echoes_labels_repeats_and_the_question():
    text = ("1. Question: Was Napoleon short?\n2. Proposed answer: No\n3. Query: Napoleon height myth\n"
            "- \"Napoleon was average height\"\n4. napoleon height myth\n5. Was Napoleon unusually short?\n6. ")
    assert parse_queries(text, exclude="Was Napoleon unusually short?") == [
        "Napoleon height myth", "Napoleon was average height"]
    assert parse_queries("1. " + "word " * 31) == []  # a rambling line is no query


@pytest.mark.parametrize("tau, falsified", [(0.0, True), (1.0, False)])
def test_tau_decides_the_verdict_and_the_budget_is_two_calls_of_k(counting, generator, mini, queries, tau, falsified):
    corpus, dense = mini
    retriever = counting(dense)

    class Never:  # an adjudicator that never sees a contradiction: τ = 0 still falsifies (s >= τ)
        name = "never"

        def contradiction(self, questions, answers, passages):
            return [np.zeros(len(p), dtype=np.float32) for p in passages]

    fva = FVARAG(retriever, generator, corpus, Never(), k=2, m=3, tau=tau)
    answers = fva.answer(queries)
    # one call for the drafts, one shared by every kill query of every question
    assert retriever.calls == [(len(queries), 2), (3 * len(queries), 2)]
    for a in answers:
        assert a.retrieval_calls == 2 and len(a.passage_ids) == 2
        assert len(a.trace["kill_queries"]) == 3 and 0 <= a.trace["kill_query_templates"] <= 3
        assert 1 <= len(a.trace["anti_context_ids"]) <= 2  # fused, then cut to k
        assert (a.trace["verdict"] == "falsified") == falsified
        assert a.model_calls == 2 + falsified
        if falsified:
            assert a.text == a.trace["revision"] and a.trace["revision"] is not None
        else:
            assert a.text == a.trace["draft"] and a.trace["revision"] is None


def test_anti_context_fuses_kill_query_rankings_by_reciprocal_rank(generator, mini):
    corpus, dense = mini
    fva = FVARAG(dense, generator, corpus, AnswerConflict(), k=3)
    kill = [["knuckle cracking arthritis", "cracking knuckles is harmless"], ["Great Wall of China visible from space"]]
    fused = fva.anti_context(kill)
    assert [len(d) for d in fused] == [3, 3]
    single = [h.doc_id for h in dense.search(kill[1], 3)[0]]
    assert [p.id for p in fused[1]] == single  # one kill query: its own ranking, unchanged
    both = dense.search(kill[0], 3)
    assert {p.id for p in fused[0]} <= {h.doc_id for hits in both for h in hits}


def test_answer_conflict_needs_the_claim_and_a_negation_in_one_sentence():
    judge = AnswerConflict()
    passages = [["Cracking your knuckles does not cause arthritis. It is a harmless habit.",
                 "Cracking your knuckles causes arthritis, people say.",
                 "Arthritis is common. Nobody knows why knuckles crack, it is not studied."]]
    scores = judge.contradiction(["Does cracking knuckles cause arthritis?"], ["knuckles cause arthritis"], passages)
    assert scores[0].tolist() == [1.0, 0.0, 0.0]
    assert judge.contradiction(["q"], ["unknown"], [["It is not known."]])[0].tolist() == [0.0]
    assert [len(s) for s in judge.contradiction(["q", "r"], ["a", "b"], [[], ["x"]])] == [0, 1]


def test_adjudicators_refuse_misaligned_input():
    judge = AnswerConflict()
    with pytest.raises(ValueError, match="align one to one"):
        judge.contradiction(["q"], ["a", "b"], [["p"]])
    with pytest.raises(TypeError, match="one string"):
        judge.contradiction(["q"], ["a"], ["passage text"])
    with pytest.raises(ValueError, match="overlap"):
        AnswerConflict(overlap=0)
    with pytest.raises(ValueError, match="answer"):
        NLIAdjudicator(object(), hypothesis="{question}")


@pytest.mark.parametrize("changes, message", [
    ({"tau": 1.5}, "tau"), ({"tau": float("nan")}, "tau"), ({"m_kill_queries": 0}, "m_kill_queries"),
    ({"k": 0}, "k"), ({"adjudicator": "gpt"}, "unknown adjudicator"), ({"cache": "C"}, "unknown FVA knob"),
    ({"crag_evaluator": "t5"}, "unknown CRAG evaluator")])
def test_bad_knobs_fail_before_any_work(changes, message):
    with pytest.raises(ValueError, match=message):
        settings("tiny", **changes)


def test_method_refuses_bad_knobs(generator, mini):
    corpus, dense = mini
    for kwargs in ({"tau": -0.1}, {"m": 0}, {"k": 0}, {"kill_tokens": 0}):
        with pytest.raises(ValueError):
            FVARAG(dense, generator, corpus, AnswerConflict(), **kwargs)


def test_crag_actions_follow_the_thresholds(generator, mini):
    corpus, dense = mini
    crag = CRAG(dense, generator, corpus, upper=0.8, lower=0.4)
    assert [crag.action(np.array(s)) for s in ([0.9, 0.1], [0.5, 0.3], [0.39], [])] == [
        "correct", "ambiguous", "incorrect", "incorrect"]
    with pytest.raises(ValueError, match="lower <= upper"):
        CRAG(dense, generator, corpus, upper=0.2, lower=0.4)


def test_crag_thresholds_come_from_training_questions(mini, embedder, generator, queries):
    corpus, dense = mini
    train = [m.text for m in mini_misconceptions("train")]
    lower, upper = calibrate_thresholds(dense, corpus, train)
    assert -1 <= lower <= upper <= 1
    best = np.array([hits[0].score for hits in dense.search(train, 3)])  # the grade: dense cosine
    assert np.mean(best >= upper) == pytest.approx(1 / 3, abs=0.05)
    assert np.mean(best < lower) == pytest.approx(1 / 3, abs=0.05)
    docs, grades = graded_retrieval(dense, corpus, train[:2], 3)
    q = embedder.encode(train[:1])[0]
    direct = embedder.encode([p.content for p in docs[0]]) @ q
    np.testing.assert_allclose(grades[0], direct, atol=1e-4)  # scores are real cosines
    with pytest.raises(ValueError, match=">= 2 questions"):
        calibrate_thresholds(dense, corpus, train[:1])
    answers = CRAG(dense, generator, corpus, upper=upper, lower=lower).answer(queries)
    for a in answers:
        assert a.retrieval_calls == (1 if a.trace["crag_action"] == "correct" else 2)
        assert 1 <= len(a.passage_ids) <= 3 and (a.trace["rewrite"] is None) == (a.retrieval_calls == 1)


def test_crag_grades_retrieval_with_the_kits_relevance_cross_encoder(mini, queries):
    """By default a passage's grade is the relevance CE's score of (question, passage), the
    thresholds its tertiles over training questions, and the run log names the checkpoint."""
    from robustkit.artifacts import read_manifest
    from robustkit.crossencoder.relevance import relevance_model
    from robustkit.fva import build, pipeline, train

    corpus, dense = mini
    cfg = settings("tiny")
    grader = train.crag_evaluator(cfg)
    assert grader is train.crag_evaluator(cfg)  # one scorer per config
    crag = build.build("crag", cfg, corpus=corpus, retriever=dense, calibration=train.calibration_questions())
    assert crag.evaluator is grader and 0 <= crag.lower <= crag.upper <= 1
    answers = crag.answer(queries)
    first = crag.retriever.search([q.text for q in queries], 3)
    for q, a, row in zip(queries, answers, first):
        expected = grader.score([q.text] * len(row), [corpus[h.doc_id].content for h in row])
        np.testing.assert_allclose(a.trace["evaluator_scores"], expected, atol=1e-6)
        assert a.trace["crag_action"] == crag.action(expected)
    logged = pipeline.run_log(cfg)["crag evaluator"]
    assert logged["sha256"] == read_manifest(relevance_model("tiny"))["sha256"]
    assert logged["recipe"]["dataset"] == "mini"
    cosine = settings("tiny", crag_evaluator="dense-cosine")
    assert train.crag_evaluator(cosine) is None and pipeline.run_log(cosine)["crag evaluator"] == "dense-cosine"


def test_self_rag_keeps_the_best_critiqued_candidate(generator, mini, queries):
    corpus, dense = mini
    answers = SelfRAG(dense, generator, corpus, k=3, relevance_threshold=0.0).answer(queries)
    for a in answers:  # threshold 0: every passage is relevant, one candidate each
        assert a.trace["selfrag_path"] == "retrieve" and len(a.trace["candidates"]) == 3
        assert a.text in a.trace["candidates"] and a.model_calls == 3 + 2 * 3
    closed = SelfRAG(dense, generator, corpus, k=3, relevance_threshold=1.0).answer(queries[:1])[0]
    assert closed.trace["selfrag_path"] == "no relevant passage" and closed.passage_ids == []


@needs_mirror("truthfulqa")
def test_stratified_sample_balances_the_paper_categories():
    from robustkit.data import load

    items = load("truthfulqa").records
    chosen = stratified_sample(items, 48, seed=0)
    counts = {}
    for item in chosen:
        counts[stratum(item.category)] = counts.get(stratum(item.category), 0) + 1
    assert len(chosen) == 48 and len({i.id for i in chosen}) == 48
    assert set(counts) == {"Myths and Fairytales", "Paranormal", "Superstitions", "Fiction", "Health", "other"}
    assert set(counts.values()) == {8}  # 48 over 6 strata
    assert [i.id for i in stratified_sample(items, 48, seed=0)] == [i.id for i in chosen]
    assert [i.id for i in stratified_sample(items, 48, seed=1)] != [i.id for i in chosen]
    assert len(stratified_sample(items, 0, seed=0)) == len(items)


def test_fva_interrupted_midway_resumes_to_the_same_answers(tmp_path, generator, mini, queries, monkeypatch):
    """Ctrl-C in the kill-query step (the drafts are cached, the rest is not): the rerun replays the
    finished calls from the call cache and ends with the answers of an uninterrupted run."""
    from robustkit.callcache import CallCache

    corpus, dense = mini

    def fva(cache):
        reader = generator.with_cache(CallCache(tmp_path / cache))
        return reader, FVARAG(dense, reader, corpus, AnswerConflict(), k=2, m=2, tau=0.0)

    whole = fva("a.sqlite")[1].answer(queries)
    reader, system = fva("b.sqlite")
    real, calls = reader._decode, []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:  # after the drafts' batch
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(reader, "_decode", interrupted)
    with pytest.raises(KeyboardInterrupt):
        system.answer(queries)
    monkeypatch.setattr(reader, "_decode", real)
    resumed = system.answer(queries)

    def steps(a):
        return a.text, a.trace["draft"], a.trace["kill_queries"], a.trace["verdict"], a.passage_ids

    assert [steps(a) for a in resumed] == [steps(a) for a in whole]
    assert all(a.trace["verdict"] == "falsified" for a in whole)  # τ = 0: the revision step ran too


def _fva_rows(scores, anti_context, correct):
    import pandas as pd

    return pd.DataFrame([{"dataset": "d", "cache": "A", "method": "fva-rag", "question_id": f"q{i}",
                          "correct": c, "trace": {"max_contradiction": s, "anti_context_ids": ["p"] if a else []}}
                         for i, (s, a, c) in enumerate(zip(scores, anti_context, correct))])


def test_tau_sweep_uses_each_drafts_revision_where_tau_falsifies_it():
    import pandas as pd

    from robustkit.fva.experiments import tau_sweep

    results = _fva_rows([0.9, 0.4, 0.0, 0.7], [True, True, False, True], [1, 0, 1, 0])
    revisions = pd.DataFrame({"dataset": "d", "cache": "A", "question_id": ["q0", "q1", "q2", "q3"],
                              "draft correct": [0.0, 0.0, 1.0, 1.0], "revision correct": [1.0, 1.0, 0.0, 0.0]})
    curve = tau_sweep(results, revisions, taus=[0.0, 0.5, 0.8, 1.0]).set_index("tau")
    # τ = 0: every draft with an anti-context is falsified (q2 has none: never)
    assert curve["intervention rate"].tolist() == [75.0, 50.0, 25.0, 0.0]
    assert curve["accuracy"].tolist() == [75.0, 50.0, 75.0, 50.0]
    assert (curve["CI low"] <= curve["accuracy"]).all() and (curve["accuracy"] <= curve["CI high"]).all()
    assert "accuracy" not in tau_sweep(results).columns  # without revisions: the rate only
    with pytest.raises(ValueError, match="do not cover every FVA-RAG question"):
        tau_sweep(results, revisions.iloc[:3])


@pytest.mark.slow
def test_accuracy_at_the_runs_tau_is_the_runs_accuracy():
    """The τ curve is exact: at the run's τ it reproduces FVA-RAG's accuracy in Table 2, and every
    revision the run wrote is the one the curve uses (tiny: the run notebook 05 then reuses)."""
    from robustkit import fva

    cfg = settings("tiny")
    results = fva.run(cfg)
    revisions = fva.pipeline.revisions_at_any_tau(cfg, results)
    curve = fva.experiments.tau_sweep(results, revisions, taus=[cfg.tau])
    table = fva.experiments.table2(results).query("source == 'kit' and method == 'fva-rag'")
    assert dict(zip(zip(curve["dataset"], curve["cache"]), curve["accuracy"].round(2))) == \
        dict(zip(zip(table["dataset"], table["cache"]), table["accuracy"]))
    ran = results[results["method"] == "fva-rag"].merge(revisions, on=["dataset", "cache", "question_id"])
    falsified = ran["trace"].map(lambda t: t["verdict"] == "falsified")
    assert (ran.loc[falsified, "revision"] == ran.loc[falsified, "answer"]).all()
    assert not ran.loc[falsified, "written for the curve"].any()
    assert ran["written for the curve"].sum() == (~falsified & ran["trace"].map(
        lambda t: bool(t["anti_context_ids"]))).sum()


def test_diagnostics_say_whether_the_score_finds_false_drafts_and_what_revising_does():
    import pandas as pd

    from robustkit.fva.experiments import adjudicator_diagnostics

    revisions = pd.DataFrame({"dataset": "d", "cache": "A", "question_id": ["q0", "q1", "q2", "q3"],
                              "max_contradiction": [0.9, 0.6, 0.2, 0.7], "anti_context": [True, True, True, False],
                              "draft correct": [0.0, 0.0, 1.0, 1.0], "revision correct": [1.0, 0.0, 0.0, 1.0]})
    row = adjudicator_diagnostics(revisions, tau=0.5).iloc[0]
    assert row["false drafts"] == 2 and row["falsified if false (%)"] == 100.0
    assert row["falsified if true (%)"] == 0.0  # q3 clears τ but has no anti-context
    assert row["AUC false vs true draft"] == 0.75  # pairs: 0.9>0.2, 0.9>0.7, 0.6>0.2, 0.6<0.7
    assert (row["revising all: fixed"], row["revising all: broken"]) == (1, 1)


def test_table2_figure_saves_what_it_draws_and_numbers_each_paper_diamond(tmp_path, monkeypatch):
    """Each paper ◆ sits at paper.py's value and has that number printed at its x in the strip above
    100, clear of every kit bar and CI; the CSV is the table drawn (kit and paper rows)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd
    from matplotlib.collections import PathCollection

    from robustkit.fva import paper
    from robustkit.fva.experiments import table2
    from robustkit.fva.figures import COLUMNS, TOP, plot_table2

    monkeypatch.setenv("ROBUSTKIT_FIGURES", str(tmp_path))
    rng = np.random.default_rng(0)
    results = pd.DataFrame([{"dataset": dataset, "method": method, "cache": cache, "question_id": f"q{i}",
                             "correct": float(rng.random() < 0.5), "correct (embedding)": 0.0, "informative": 1.0,
                             "intervened": bool(rng.random() < 0.5) if method in ("crag", "fva-rag") else None,
                             "retrieval_calls": 1, "model_calls": 1}
                            for dataset in ("mini", "truthfulqa")
                            for method in ("vanilla", "self-rag", "crag", "fva-rag")
                            for cache in ("A", "B") for i in range(8)])
    table = table2(results)
    fig = plot_table2(table, scale="tiny", name="t2")
    saved = pd.read_csv(tmp_path / "t2.csv")
    pd.testing.assert_frame_equal(saved, table[COLUMNS].reset_index(drop=True), check_dtype=False)
    kit = saved[saved["source"] == "kit"]
    assert ((kit["CI low"] <= kit["accuracy"]) & (kit["accuracy"] <= kit["CI high"])).all()
    assert saved[saved["source"] == "paper"][["method", "cache", "accuracy"]].values.tolist() == \
        paper.TABLE2[["method", "cache", "accuracy"]].values.tolist()
    accuracy_ax, rate_ax = fig.axes[1], fig.axes[3]  # truthfulqa's column: top, bottom
    for ax, metric in ((accuracy_ax, "accuracy"), (rate_ax, "intervention rate")):
        diamonds = [xy for c in ax.collections if isinstance(c, PathCollection) for xy in c.get_offsets()]
        numbers = {round(t.xy[0], 6): t for t in ax.texts}
        assert sorted(y for _, y in diamonds) == sorted(paper.TABLE2[metric].dropna())
        assert len(numbers) == len(diamonds)
        for x, y in diamonds:  # each ◆'s own number, as paper.py has it, above the panel's bars
            text = numbers[round(x, 6)]
            assert text.get_text() == f"{y:g}" and text.xy[1] == 100
        assert max(p.get_height() for p in ax.patches) <= 100 and ax.get_ylim() == (0, TOP)
    assert not fig.axes[0].texts and not fig.axes[2].texts  # mini: the paper reports none
    plt.close(fig)
