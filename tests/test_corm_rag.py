import pandas as pd
import pytest

from robustkit.baselines import ABSTAIN, FirstStage
from robustkit.corm import experiments as ex
from robustkit.corm import pipeline
from robustkit.corm import settings
from robustkit.corm.method import RiskAwareRAG, select_context
from robustkit.data import PERTURBATION_TYPES, Corpus, Passage
from robustkit.methods import Query
from robustkit.metrics import format_p
from robustkit.retrieval import Hit


def test_select_context_follows_algorithm_1():
    ids, scores = ["a", "b", "c", "d"], [0.9, 0.7, 0.4, 0.2]
    assert select_context(ids, scores, None, 3) == ["a", "b", "c"]  # forced: top C
    assert select_context(ids, scores, 0.5, 3) == ["a", "b"]  # only S >= γ
    assert select_context(ids, scores, 0.1, 2) == ["a", "b"]  # at most C
    assert select_context(ids, scores, 0.95, 3) == []  # S[0] < γ: abstain


class EmptyRetriever:
    def search(self, queries, k):
        return [[] for _ in queries]


class FixedRetriever:
    def search(self, queries, k):
        return [[Hit("p1", 0.9, 0), Hit("p2", 0.2, 1)] for _ in queries]


CORPUS = Corpus([Passage("p1", "Canberra", "Canberra is the capital of Australia."),
                 Passage("p2", "Sydney", "Sydney is the largest city in Australia.")])


def _ask(rag, *texts):
    return rag.answer([Query(str(i), str(i), t) for i, t in enumerate(texts)])


def test_abstains_when_retriever_returns_nothing(generator):
    rag = RiskAwareRAG(EmptyRetriever(), FirstStage("dense"), generator, CORPUS, m=5, c=1, gamma=0.5)
    answer = _ask(rag, "what is the capital of australia")[0]
    assert answer.abstained and answer.text == ABSTAIN and answer.confidence == 0.0
    assert answer.model_calls == 0 and answer.retrieval_calls == 1


def test_gamma_gates_generation(generator):
    keep = RiskAwareRAG(FixedRetriever(), FirstStage("dense"), generator, CORPUS, m=2, c=1, gamma=0.5)
    strict = RiskAwareRAG(FixedRetriever(), FirstStage("dense"), generator, CORPUS, m=2, c=1, gamma=0.95)
    answered, abstained = _ask(keep, "what is the capital of australia")[0], \
        _ask(strict, "what is the capital of australia")[0]
    assert not answered.abstained and answered.passage_ids == ["p1"] and "canberra" in answered.text.lower()
    assert answered.trace["ranked_ids"] == ["p1", "p2"] and answered.model_calls == 1
    assert abstained.abstained and abstained.confidence == pytest.approx(0.9) and not abstained.passage_ids


@pytest.mark.parametrize("kwargs,message", [({"c": 0}, "C .* >= 1"), ({"m": 2, "c": 3}, "M .* must be >= C")])
def test_bad_parameters(generator, kwargs, message):
    with pytest.raises(ValueError, match=message):
        RiskAwareRAG(FixedRetriever(), FirstStage("dense"), generator, CORPUS, **kwargs)


@pytest.mark.parametrize("gamma", [-0.1, 1.5])
def test_gamma_out_of_range(generator, gamma):
    with pytest.raises(ValueError, match=r"gamma .* must be [<>]= [01]"):
        RiskAwareRAG(FixedRetriever(), FirstStage("dense"), generator, CORPUS, m=2, c=1, gamma=gamma)


def _results():
    """Two methods, 4 questions, clean + biased, with hand-set outcomes."""
    rows = []
    for method, clean, biased, conf, ranks in [("corm", [1, 1, 1, 0], [1, 1, 0, 0], [.9, .8, .3, .1], [1, 1, 3, None]),
                                               ("relevance-ce", [1, 1, 0, 0], [1, 0, 0, 0], [.5, .6, .7, .8], [2, 1, 3, None])]:
        for i in range(4):
            rows.append({"method": method, "question_id": f"q{i}", "condition": "clean", "type": "clean",
                         "correct": clean[i], "confidence": conf[i], "gold_rank": ranks[i],
                         "ranked_ids": ["g", "x"], "gold_ids_ranked": ["g"], "query": f"clean {i}"})
            rows.append({"method": method, "question_id": f"q{i}", "condition": "biased", "type": "false_premise",
                         "correct": biased[i], "confidence": conf[i], "gold_rank": ranks[i],
                         "ranked_ids": ["x", "g"] if ranks[i] != 1 else ["g", "x"], "gold_ids_ranked": ["g"],
                         "query": f"biased {i}"})
    return pd.DataFrame(rows)


def test_table1_and_gap():
    table = ex.table1(_results()).set_index("key")
    assert table.loc["corm", "clean accuracy"] == 75.0 and table.loc["corm", "biased accuracy"] == 50.0
    assert table.loc["corm", "robustness gap"] == 25.0
    assert table.loc["relevance-ce", "biased accuracy"] == 25.0
    # both conditions carry a CI, and the figure draws both (error bars on the clean bars too)
    corm = table.loc["corm"]
    assert corm["clean CI low"] <= corm["clean accuracy"] <= corm["clean CI high"]
    assert corm["biased CI low"] <= corm["biased accuracy"] <= corm["biased CI high"]
    from robustkit.corm import figures
    import matplotlib.pyplot as plt

    fig = figures.plot_table1(ex.table1(_results()), scale="tiny", name=None)
    bars = [c for c in fig.axes[0].containers if hasattr(c, "errorbar") and c.errorbar is not None]
    assert len(bars) == 2  # clean and biased bars, each with its error bars
    plt.close(fig)


def test_recall_table_carries_a_ci_that_resamples_questions():
    recall = ex.recall_table(_results(), methods=("corm",)).set_index("k")
    assert (recall["CI low"] <= recall["recall"]).all() and (recall["recall"] <= recall["CI high"]).all()


def test_risk_coverage_and_paired_ranks():
    _, summary = ex.risk_coverage_table(_results())
    corm = summary.set_index("method").loc["corm"]
    assert corm["acc@50%"] == 1.0 and corm["acc@100%"] == 0.5
    rce = summary.set_index("method").loc["relevance-ce"]
    assert rce["acc@50%"] == 0.0  # its confidence is anti-correlated with correctness
    _, shares = ex.paired_ranks(_results())
    assert shares == {"corm better": pytest.approx(1 / 3), "relevance-ce better": 0.0,
                      "tie": pytest.approx(2 / 3), "n": 3}


def test_significance_names_p_below_display_precision():
    rows = []
    for i in range(40):  # the reference right on all 40, the other on none
        for method, ok in (("corm", 1), ("dense", 0)):
            rows.append({"method": method, "question_id": f"q{i}", "type": "false_premise",
                         "condition": "biased", "correct": ok})
    tests = ex.significance(pd.DataFrame(rows))
    row = tests.iloc[0]
    assert row["only reference right"] == 40 and row["only method right"] == 0
    assert row["p"] < 1e-4 and format_p(row["p"]) == "< 1e-4"


def test_recall_table_counts_only_queries_with_gold():
    recall = ex.recall_table(_results(), methods=("corm",))
    assert recall.set_index("k").loc[1, "recall"] == pytest.approx(0.5)
    assert recall.set_index("k").loc[2, "recall"] == 1.0


def test_an_explorer_is_a_widget_live_and_its_opening_state_in_a_static_view():
    from robustkit import widgets

    explorer = widgets.gamma_explorer(_results(), "corm")
    assert explorer.widget.children[0].description == "γ"
    bundle = explorer._repr_mimebundle_()
    # a live frontend renders the widget; GitHub, nbviewer and the course site fall back to the HTML
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == explorer.widget.model_id
    assert "VBox" not in bundle["text/plain"]
    for view in (bundle["text/plain"], bundle["text/html"]):
        assert "γ explorer (corm, biased), as it opens" in view and "coverage 100.0%" in view
    explorer.widget.children[0].value = 0.99  # moving the slider re-renders; the static view stays the opening
    assert "coverage 100.0%" in explorer._repr_mimebundle_()["text/html"]
    # opened at a γ (the notebook's, chosen on validation questions) the static view shows that state:
    # S[0] = .9, .8 answered (both right), .3 and .1 declined
    opened = widgets.gamma_explorer(_results(), "corm", gamma=0.5)._repr_mimebundle_()["text/plain"]
    assert "coverage 50.0% (2/4), selective accuracy 100.0%" in opened
    assert "abstains on 2" in opened and "biased 2" in opened and "biased 3" in opened


def test_tiny_test_set_rotates_one_rewrite_per_question():
    from collections import Counter

    from robustkit.corm import train

    questions, rewrites = train.test_set("tiny")
    assert [r.question_id for r in rewrites] == [q.id for q in questions]
    counts = Counter(r.type for r in rewrites)
    assert max(counts.values()) - min(counts.values()) <= 1 and len(counts) == 3


def _biased_results(correct_by_method: dict[str, list[int]], rewrites_per_question: int = 1):
    """A results table as run_methods returns it: biased rows only, one per (question, rewrite)."""
    rows = [{"method": method, "condition": "biased", "question_id": f"q{i // rewrites_per_question}",
             "type": PERTURBATION_TYPES[i % rewrites_per_question], "correct": c}
            for method, values in correct_by_method.items() for i, c in enumerate(values)]
    return pd.DataFrame(rows)


def test_significance_is_question_level_and_names_its_reference():
    results = _biased_results({"corm": [1, 1, 1, 0, 1, 1], "dense": [0, 0, 1, 0, 0, 1]})
    tests = ex.significance(results)
    assert tests.loc[0, ["method", "reference", "n", "only method right", "only reference right"]].tolist() \
        == ["dense", "corm", 6, 0, 3]
    assert tests.loc[0, "p"] == pytest.approx(0.25)  # exact: 2 * 0.5**3
    # two rewrites of each question, of two types: each type tested apart, one query per question
    by_type = ex.significance(_biased_results({"corm": [1, 0, 1, 0], "dense": [0, 0, 1, 1]}, rewrites_per_question=2))
    assert by_type["type"].tolist() == list(PERTURBATION_TYPES[:2]) and by_type["n"].tolist() == [2, 2]
    assert by_type[["only method right", "only reference right"]].values.tolist() == [[0, 1], [1, 0]]
    same_type = _biased_results({"corm": [1, 0, 1, 0], "dense": [0, 0, 1, 1]}, rewrites_per_question=2)
    same_type["type"] = PERTURBATION_TYPES[0]  # two rewrites of one type: the pairs would not be independent
    with pytest.raises(ValueError, match="several rows per question_id"):
        ex.significance(same_type)


def test_queries_for_any_questions_and_several_rewrites_each():
    from robustkit.data import Question, Rewrite

    questions = [Question("a", "Who wrote Frankenstein?", ("Mary Shelley",)),
                 Question("b", "What is the capital of Norway?", ("Oslo",))]
    fp, cb = PERTURBATION_TYPES[0], PERTURBATION_TYPES[1]
    rewrites = [Rewrite("a", fp, "Who wrote Frankenstein, Lord Byron's novel?", "Lord Byron"),
                Rewrite("a", fp, "Who wrote Frankenstein, Percy Shelley's novel?", "Percy Shelley"),
                Rewrite("a", cb, "Who wrote Frankenstein, the gothic tale everyone loves?"),
                Rewrite("b", cb, "What is the capital of Norway, the fjord country?")]
    table = pipeline.queries_for(questions, rewrites)
    assert table["query_id"].tolist() == ["a", "b", f"a|{fp}", f"a|{fp}|2", f"a|{cb}", f"b|{cb}"]
    assert table["query_id"].is_unique and (table["condition"] == "biased").sum() == 4
    assert table.loc[table["question_id"] == "b", "answers"].map(tuple).tolist() == [("Oslo",)] * 2
    with pytest.raises(ValueError, match=r"\['c'\]"):
        pipeline.queries_for(questions, [Rewrite("c", fp, "Who painted it, Monet?", "Monet")])


def test_table1_interval_resamples_questions_not_rewrites():
    # three rewrites of each question, all right or all wrong: 4 questions, not 12 observations
    per_question = [1, 0, 1, 1]
    clustered = ex.table1(_biased_results({"corm": [c for c in per_question for _ in range(3)]}, 3))
    independent = ex.table1(_biased_results({"corm": [c for c in per_question for _ in range(3)]}, 1))
    assert clustered.loc[0, "biased accuracy"] == independent.loc[0, "biased accuracy"] == 75.0
    assert _ci_width(clustered) > _ci_width(independent)


def _ci_width(table) -> float:
    low, high = map(float, table.loc[0, "biased 95% CI"].split("–"))
    return high - low


def test_llm_rerank_subset_is_the_biased_queries_of_a_seeded_sample():
    cfg = settings("tiny")
    queries = pipeline.test_queries(cfg)
    subset = pipeline.llm_rerank_subset(cfg, queries)
    assert set(subset["condition"]) == {"biased"}
    assert subset["question_id"].nunique() == len(subset) == cfg.llm_rerank_questions
    assert subset.equals(pipeline.llm_rerank_subset(cfg, queries))  # the seed decides, not the call
    assert len(pipeline.llm_rerank_subset(settings(cfg, llm_rerank_questions=0), queries)) == len(queries)


class NamedRetriever(FixedRetriever):
    def identity(self):
        return {"retriever": "fixed", "corpus": CORPUS.checksum}


class NamedReader:
    def identity(self):
        return {"model": "reader", "dtype": "float32", "system_prompt": None}


def test_identity_changes_with_everything_that_decides_the_answers():
    """methods.evaluate stages results under identity(): a knob it missed would reuse stale rows."""
    from robustkit.baselines import RandomOrder, RerankedRAG

    def rag(reranker=FirstStage("dense"), **knobs):
        knobs = {"m": 2, "c": 1, **knobs}
        return RiskAwareRAG(NamedRetriever(), reranker, NamedReader(), CORPUS, **knobs)

    base = rag().identity()
    assert base["gamma"] is None and base["generator"]["model"] == "reader" and base["retriever"]["retriever"] == "fixed"
    variants = [rag(m=3), rag(c=2), rag(gamma=0.5), rag(max_words=20), rag(RandomOrder(0)), rag(RandomOrder(1))]
    identities = [base] + [v.identity() for v in variants]
    assert len({repr(i) for i in identities}) == len(identities)
    plain = RerankedRAG(NamedRetriever(), FirstStage("dense"), NamedReader(), CORPUS, m=2, c=1).identity()
    assert plain["method"] == "RerankedRAG" and "gamma" not in plain


@pytest.mark.slow
def test_methods_run_on_a_researchers_own_corpus_questions_and_several_rewrites(tmp_path, monkeypatch):
    """Three questions with all three of their hand-written rewrites, over a corpus of the user's
    own (data/mini passages under new ids, 30 of them): every ranking reads that corpus, the gold
    bookkeeping finds the gold passages there, and the paired test splits the bias types."""
    from dataclasses import replace

    from robustkit.data import mini_corpus, mini_questions, mini_rewrites

    monkeypatch.setenv("ROBUSTKIT_RUNS", str(tmp_path))
    questions = mini_questions("test")[:3]
    gold = {g for q in questions for g in q.gold_ids}
    chosen = [p for p in mini_corpus() if p.id in gold] + [p for p in mini_corpus() if p.id not in gold][:27]
    own = Corpus([Passage(f"own-{p.id}", p.title, p.text, p.kind) for p in chosen], "own corpus")
    questions = [replace(q, gold_ids=tuple(f"own-{g}" for g in q.gold_ids)) for q in questions]
    rewrites = [r for r in mini_rewrites() if r.question_id in {q.id for q in questions}]
    queries = pipeline.queries_for(questions, rewrites)
    assert len(queries) == 3 + 9  # each question clean and in each of the three bias types

    results = pipeline.run_methods(settings("tiny"), ["dense", "bm25"], queries, corpus=own)
    assert len(results) == 2 * len(queries)
    assert all(d.startswith("own-") for ranked in results["ranked_ids"] for d in ranked)
    found = results[results["gold_rank"].notna()]
    assert len(found) and all(d in {p.id for p in own} for ids in found["gold_ids_ranked"] for d in ids)
    tests = ex.significance(results, reference="dense")
    assert sorted(tests["type"]) == sorted(PERTURBATION_TYPES) and (tests["n"] == 3).all()

    from robustkit import headtohead

    both = headtohead.run(headtohead.settings("tiny", methods=["dense", "self-rag"]), queries, corpus=own)
    assert sorted(both["method"].unique()) == ["dense", "self-rag"] and len(both) == 2 * len(queries)
    assert all(d.startswith("own-") for ids in both["passage_ids"] for d in ids)
    assert set(headtohead.significance(both)["type"]) == {"clean", *PERTURBATION_TYPES}


@pytest.mark.slow
def test_the_adversary_rewrites_a_users_questions_once_and_stages_them(tmp_path, monkeypatch):
    import robustkit as rk
    from robustkit.corm.train import adversary_rewrites
    from robustkit.data import Question

    monkeypatch.setenv("ROBUSTKIT_RUNS", str(tmp_path))
    questions = [Question("own-1", "Who wrote the novel Frankenstein?", ("Mary Shelley",), "person"),
                 Question("own-2", "What is the capital city of Norway?", ("Oslo",), "place")]
    rewrites = adversary_rewrites("tiny", questions, name="own")
    assert [(r.question_id, r.type) for r in rewrites] == [("own-1", PERTURBATION_TYPES[0]),
                                                           ("own-2", PERTURBATION_TYPES[1])]
    assert all(r.source in ("llm", "template") and r.text for r in rewrites)
    assert (tmp_path / "tiny" / "corm" / "own.jsonl").exists()
    with rk.load_only():  # staged: read back, not rewritten
        assert adversary_rewrites("tiny", questions, name="own") == rewrites
    with pytest.raises(ValueError, match="lower-case"):
        adversary_rewrites("tiny", questions, name="../elsewhere")
