"""Fig. 5-7's tables and figures: the ablation's paired changes, and CSVs that hold what is drawn."""
import matplotlib.pyplot as plt
import pandas as pd
import pytest

from robustkit.corm import experiments as ex
from robustkit.corm import figures, paper


def _results(correct: dict[str, list[int]]) -> pd.DataFrame:
    """Biased rows for 3 questions per type (one query each), one block per method."""
    types = ["false_premise"] * 3 + ["confirmation_bias"] * 3
    rows = []
    for method, marks in correct.items():
        rows += [{"method": method, "condition": "biased", "type": t, "question_id": f"q{i}",
                  "query_id": f"q{i}|{t}", "correct": bool(c)} for i, (t, c) in enumerate(zip(types, marks))]
    return pd.DataFrame(rows)


def test_ablation_changes_are_paired_per_type():
    results = _results({"corm": [1, 1, 0, 1, 0, 0], "no-false_premise": [0, 1, 0, 1, 1, 1]})
    table = ex.ablation_changes(results, ["no-false_premise"]).set_index("test type")
    # false premise: 2/3 → 1/3 (q0 lost); confirmation bias: 1/3 → 3/3 (q4, q5 won)
    assert table.loc["false_premise", ["reference accuracy", "accuracy", "change", "n"]].tolist() == \
        pytest.approx([66.7, 33.3, -33.3, 3])
    assert table.loc["confirmation_bias", "change"] == pytest.approx(66.7)
    for _, row in table.iterrows():
        assert row["change CI low"] <= row["change"] <= row["change CI high"]
    # the rows are shuffled: pairing goes by query, not by row order
    shuffled = results.sample(frac=1, random_state=0)
    pd.testing.assert_frame_equal(ex.ablation_changes(shuffled, ["no-false_premise"])
                                  .set_index("test type").loc[table.index], table)


def test_ablation_figure_csv_holds_the_bars_and_the_papers_drops(tmp_path, monkeypatch):
    monkeypatch.setenv("ROBUSTKIT_FIGURES", str(tmp_path))
    results = _results({"corm": [1, 1, 0, 1, 0, 0], "no-false_premise": [0, 1, 0, 1, 1, 1],
                        "no-confirmation_bias": [1, 1, 1, 0, 0, 0]})
    changes = ex.ablation_changes(results, ["no-false_premise", "no-confirmation_bias"])
    plt.close(figures.plot_ablation(changes, scale="tiny", name="fig5"))
    csv = pd.read_csv(tmp_path / "fig5.csv")
    assert (csv["source"] == "kit").sum() == len(changes) == 4
    drops = csv[csv["source"] == "paper"].set_index("critic")["change"]
    full, without = paper.ABLATION["false_premise"]
    assert drops["no-false_premise"] == pytest.approx(without - full)
    assert set(drops.index) == {"no-false_premise", "no-confirmation_bias"}


def test_latency_figure_leaves_out_methods_without_model_time(tmp_path, monkeypatch):
    monkeypatch.setenv("ROBUSTKIT_FIGURES", str(tmp_path))
    table = pd.DataFrame({"method": ["dense (MiniLM)", "random order", "CoRM critic"],
                          "key": ["dense", "random", "corm"], "biased accuracy": [40.0, 20.0, 50.0],
                          "biased CI low": [30.0, 10.0, 40.0], "biased CI high": [50.0, 30.0, 60.0],
                          "n biased": [42] * 3, "rerank ms/query": [0.0, 0.1, 250.0]})
    latency = pd.DataFrame({"method": ["dense", "random", "corm"], "rerank ms/query": [0.0, 0.1, 250.0],
                            "candidates": 10, "timed queries": 4, "hardware": "a CPU"})
    plt.close(figures.plot_pareto(table, latency, scale="tiny", name="fig7"))
    csv = pd.read_csv(tmp_path / "fig7.csv")
    assert csv.loc[csv["source"] == "kit", "key"].tolist() == ["corm"]
    assert csv.loc[csv["source"] == "paper", "rerank ms/query"].tolist() == \
        [paper.LATENCY_MS["corm"], paper.LATENCY_MS["llm-rerank"]]


def test_passage_kinds_on_data_mini():
    from robustkit.corm import kinds, settings
    from robustkit.data import mini_corpus, mini_questions, mini_rewrites

    cfg = settings("tiny")
    kind_of = kinds.passage_kinds(cfg)
    question = mini_questions("test")[0]
    rewrite = next(r for r in mini_rewrites() if r.question_id == question.id and r.premise_ids)
    other = next(p for p in mini_corpus() if p.kind == "distractor"
                 and not any(a.lower() in p.content.lower() for a in question.answers))
    assert kind_of(question.id, question.gold_ids[0]) == "gold"
    assert kind_of(question.id, rewrite.premise_ids[0]) == "premise-matching"
    assert kind_of(question.id, other.id) == "distractor"
    with pytest.raises(KeyError, match="not a tiny training or test question"):
        kind_of("no-such-question", question.gold_ids[0])
    labels = [{"question_id": question.id, "doc_id": question.gold_ids[0], "s": 1.0},
              {"question_id": question.id, "doc_id": rewrite.premise_ids[0], "s": 0.0},
              {"question_id": question.id, "doc_id": other.id, "s": 1 / 3}]
    table = kinds.labels_by_kind(cfg, labels)
    assert table.index.tolist() == ["gold", "premise-matching", "distractor"]
    assert table["share s > 0"].tolist() == [1.0, 0.0, 1.0]
    assert table["share s = 1"].tolist() == [1.0, 0.0, 0.0]
    ranked = pd.DataFrame({"method": ["dense", "dense", "corm", "corm"],
                           "question_id": [question.id] * 4,
                           "ranked_ids": [[rewrite.premise_ids[0]], [question.gold_ids[0]],
                                          [question.gold_ids[0]], [question.gold_ids[0]]]})
    top1 = kinds.top1_by_kind(kind_of, ranked)
    assert top1.index.tolist() == ["dense", "corm"]
    assert top1.loc["dense", ["gold at rank 1 (%)", "premise-matching at rank 1 (%)"]].tolist() == [50.0, 50.0]
    assert top1.loc["corm", "gold at rank 1 (%)"] == 100.0 and top1["n"].tolist() == [2, 2]
