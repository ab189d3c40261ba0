"""AlignRAG's analysis layer on a hand-built run whose answers we know: accuracies, drops,
per-round accuracy, transitions, McNemar counts, critique examples, figure CSVs, and the
ValueErrors that bad input gets. Pure pandas/matplotlib: no model is loaded."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import PathCollection  # noqa: E402

from robustkit.alignrag import experiments as ex, figures, readings  # noqa: E402

# correctness per question (q1..q4) and iteration; baselines answer once, refiners at t = 0, 1, 2
# (their t = 0 is vanilla RAG's answer). Final accuracies, factual / multihop:
#   cot 25 / 0, vanilla 50 / 25, self-refine 25 / 25, frozen 50 / 25, w/o ccs 75 / 25,
#   cft 100 / 50, cpo 75 / 25.
Y0 = {"mini-factual": [1, 1, 0, 0], "mini-multihop": [1, 0, 0, 0]}
RUNS = {
    "mini-factual": {
        "cot": [[1], [0], [0], [0]],
        "self-refine": [[1, 1, 1], [1, 0, 0], [0, 0, 0], [0, 0, 0]],
        "frozen-critic": [[1, 1, 1], [1, 1, 1], [0, 0, 0], [0, 1, 0]],
        "critic-no-ccs": [[1, 1, 1], [1, 1, 1], [0, 0, 1], [0, 0, 0]],
        "alignrag": [[1, 1, 1], [1, 1, 1], [0, 1, 1], [0, 0, 1]],
        "alignrag-cpo": [[1, 1, 1], [1, 1, 1], [0, 1, 1], [0, 0, 0]]},
    "mini-multihop": {
        "cot": [[0], [0], [0], [0]],
        "self-refine": [[1, 1, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]],
        "frozen-critic": [[1, 1, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]],
        "critic-no-ccs": [[1, 1, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]],
        "alignrag": [[1, 1, 1], [0, 1, 1], [0, 0, 0], [0, 0, 0]],
        "alignrag-cpo": [[1, 1, 0], [0, 1, 1], [0, 0, 0], [0, 0, 0]]}}
DOMAIN = {"mini-factual": "in-domain", "mini-multihop": "out-of-domain"}
INFORMATIVE = {"mini-factual": [True, True, True, False], "mini-multihop": [True, False, False, False]}


def make_results(runs=RUNS, y0=Y0) -> pd.DataFrame:
    rows = []
    for dataset, methods in runs.items():
        trajectories = {"dense": [[c] for c in y0[dataset]], **methods}
        for method, per_question in trajectories.items():
            for i, trajectory in enumerate(per_question):
                qid = f"q{i + 1}"
                for t, correct in enumerate(trajectory):
                    rows.append({"dataset": dataset, "domain": DOMAIN[dataset], "method": method, "question_id": qid,
                                 "question": f"question {qid}?", "gold": [f"gold {qid}"], "iteration": t,
                                 "answer": f"{qid} draft" if t == 0 else f"{qid} {method} y{t}",
                                 "rationale": "because", "critique": None if t == 0 else f"{method} on y{t - 1}",
                                 "correct": float(correct), "f1": float(correct),
                                 "informative": INFORMATIVE[dataset][i % 4], "model_calls": 1 + 3 * t, "latency_s": 0.1})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def results():
    return make_results()


def by(table, *keys):
    return table.set_index(list(keys))


def test_final_takes_each_questions_last_iteration(results):
    last = ex.final(results)
    assert len(last) == 2 * 7 * 4
    assert list(dict.fromkeys(last["method"])) == list(ex.METHODS)
    assert set(last.loc[last["method"].isin(ex.REFINERS), "iteration"]) == {2}
    assert set(last.loc[last["method"].isin(ex.BASELINES), "iteration"]) == {0}


def test_table1_accuracy_ci_and_paper_rows(results):
    table = ex.table1(results)
    kit = by(table[table["source"] == "kit"], "dataset", "method")
    want = {"mini-factual": [25, 50, 25, 50, 75, 100, 75], "mini-multihop": [0, 25, 25, 25, 25, 50, 25]}
    for dataset, accuracies in want.items():
        assert [kit.loc[(dataset, m), "accuracy"] for m in ex.METHODS] == pytest.approx(accuracies)
        assert (kit.loc[dataset, "n"] == 4).all()
    assert kit.loc[(ex.POOLED, "alignrag"), "accuracy"] == pytest.approx(75.0)
    assert kit.loc[(ex.POOLED, "alignrag"), "n"] == 8
    assert kit.loc[("mini-factual", "alignrag"), "f1"] == pytest.approx(100.0)
    assert ((kit["CI low"] <= kit["accuracy"] + 1e-9) & (kit["accuracy"] <= kit["CI high"] + 1e-9)).all()
    published = by(table[table["source"] == "paper"], "method")["accuracy"]
    assert published.to_dict() == {"dense": 56.9, "self-refine": 58.3, "alignrag": 62.1}


def test_significance_counts_discordant_questions(results):
    sig = by(ex.significance(results), "dataset", "method")
    assert sig["comparisons"].iloc[0] == 12 and len(sig) == 12
    assert sig["family"].iloc[0] == "12 tests: 6 methods vs alignrag, in each of 2 datasets"
    vanilla = sig.loc[("mini-factual", "dense")]  # read from the method's side: AlignRAG alone right on 2
    assert (vanilla["n"], vanilla["only method right"], vanilla["only reference right"]) == (4, 0, 2)
    assert vanilla["p"] == pytest.approx(0.5)
    self_refine = sig.loc[("mini-factual", "self-refine")]
    assert (self_refine["only method right"], self_refine["only reference right"], self_refine["p"]) == \
        (0, 3, pytest.approx(0.25))
    cpo = sig.loc[("mini-multihop", "alignrag-cpo")]
    assert (cpo["only method right"], cpo["only reference right"]) == (0, 1)


def test_table5_cft_vs_cpo(results):
    t5 = by(ex.table5(results), "dataset")
    row = t5.loc["mini-factual"]
    assert (row["CFT accuracy"], row["CPO accuracy"], row["CPO − CFT"]) == pytest.approx((100, 75, -25))
    assert (row["n"], row["CPO only"], row["CFT only"], row["p"]) == (4, 0, 1, pytest.approx(1.0))
    assert t5.loc["mini-multihop", "CFT only"] == 1
    with pytest.raises(ValueError, match="table5 needs"):
        ex.table5(results[results["method"] != "alignrag-cpo"])


def test_ood_drop_pools_each_domain(results):
    table = ex.ood_drop(results)
    kit = by(table[table["source"] == "kit"], "method")
    assert kit["drop"].to_dict() == pytest.approx({"cot": 25, "dense": 25, "self-refine": 0,
                                                    "frozen-critic": 25, "critic-no-ccs": 50,
                                                    "alignrag": 50, "alignrag-cpo": 50})
    assert kit.loc["alignrag", ["in-domain", "out-of-domain", "n_in", "n_out"]].tolist() == [100, 50, 4, 4]
    assert ((kit["CI low"] <= kit["drop"]) & (kit["drop"] <= kit["CI high"])).all()
    assert kit.loc["alignrag", "CI high"] > kit.loc["alignrag", "CI low"]
    assert by(table[table["source"] == "paper"], "method")["drop"].to_dict() == {
        "dense": 43.1, "self-refine": 40.3, "alignrag": 32.2}
    with pytest.raises(ValueError, match="no 'out-of-domain' questions"):
        ex.ood_drop(results[results["domain"] == "in-domain"])


def test_iterations_every_round_and_carries_a_stopped_trajectory(results):
    table = ex.iterations(results)
    assert list(table.columns[:5]) == ["method", "dataset", "iteration", "accuracy", "n"]
    cft = by(table[table["method"] == "alignrag"], "dataset", "iteration")["accuracy"]
    assert cft.loc["mini-factual"].tolist() == pytest.approx([50, 75, 100])
    assert cft.loc["mini-multihop"].tolist() == pytest.approx([25, 50, 50])
    stopped = results.drop(results.index[(results["method"] == "alignrag") & (results["question_id"] == "q1")
                                         & (results["iteration"] == 2)])
    again = ex.iterations(stopped, ("alignrag",))
    assert again.query("dataset == 'mini-factual'")["accuracy"].tolist() == pytest.approx([50, 75, 100])
    with pytest.raises(ValueError, match="takes refiners"):
        ex.iterations(results, ("dense",))


def test_informative_vs_noisy_split(results):
    table = by(ex.informative_vs_noisy(results), "dataset", "method", "retrieval")
    assert table.loc[(ex.POOLED, "alignrag", "informative"), ["accuracy", "n"]].tolist() == [100, 4]
    assert table.loc[(ex.POOLED, "alignrag", "noisy"), ["accuracy", "n"]].tolist() == [50, 4]
    assert table.loc[(ex.POOLED, "dense", "informative"), "accuracy"] == pytest.approx(75)
    assert table.loc[("mini-factual", "dense", "noisy"), ["accuracy", "n"]].tolist() == [0, 1]


def test_ablation_methods_and_tests(results):
    table = ex.ablation(results)
    assert list(dict.fromkeys(table["method"])) == list(ex.ABLATION)
    rows = by(table, "dataset", "method")
    assert rows.loc[("mini-factual", "critic-no-ccs"), "accuracy"] == pytest.approx(75)
    assert rows.loc[("mini-factual", "frozen-critic"), "p vs alignrag"] == "0.5"
    assert rows.loc[("mini-factual", "alignrag"), "p vs alignrag"] == ""


def test_transitions_from_y0_to_final(results):
    table = by(ex.transitions(results), "method", "dataset", "outcome")
    counts = lambda m, d: [table.loc[(m, d, o), "count"] for o in ex.OUTCOMES]  # noqa: E731
    assert counts("alignrag", "mini-factual") == [2, 0, 2, 0]
    assert counts("self-refine", "mini-factual") == [1, 2, 0, 1]
    assert counts("alignrag-cpo", "mini-multihop") == [0, 2, 1, 1]
    assert table.loc[("alignrag", "mini-factual", "fixed"), "share"] == pytest.approx(50)
    assert set(table.index.get_level_values("method")) == set(ex.REFINERS)


def test_critique_examples_prefer_differing_outcomes(results):
    table = ex.critique_examples(results, n=3)
    assert list(zip(table["dataset"], table["question_id"], table["right after one critique"])) == [
        ("mini-factual", "q3", "trained only"), ("mini-multihop", "q2", "trained only"),
        ("mini-factual", "q4", "frozen only")]
    first = table.iloc[0]
    assert (first["y0"], first["gold"], first["y0 correct"]) == ("q3 draft", "gold q3", False)
    assert first["frozen critique"] == "frozen-critic on y0" and first["trained y1"] == "q3 alignrag y1"


def test_findings_follow_the_numbers(results):
    text = readings.findings(results)
    assert "alignrag 75.0% vs dense 37.5% (+37.5 points" in text
    assert "3 vs 0 discordant questions, exact McNemar p = 0.25" in text
    assert "at the 0.05 level" not in text  # n = 8 cannot show it
    assert "The paper's Fig. 2" in text and "t=0 37.5% → t=1 62.5% → t=2 75.0%" in text
    # the same effect on 40 questions per dataset is called an effect
    big = {d: {m: v * 10 for m, v in methods.items()} for d, methods in RUNS.items()}
    text = readings.findings(make_results(big, {d: v * 10 for d, v in Y0.items()}))
    assert "alignrag is better at the 0.05 level (uncorrected)" in text


def test_bad_input_is_named(results):
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['correct'\]"):
        ex.table1(results.drop(columns="correct"))
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['informative'\]"):
        ex.informative_vs_noisy(results.drop(columns="informative"))
    with pytest.raises(ValueError, match=r"unknown method.*'alignrag \(cft\)'"):
        ex.table1(results.replace({"method": {"alignrag": "alignrag (cft)"}}))
    with pytest.raises(ValueError, match="correct must be 0/1, got 0.5"):
        ex.final(results.assign(correct=results["correct"].where(results.index != 3, 0.5)))
    with pytest.raises(ValueError, match="answers once"):
        ex.final(pd.concat([results, results[results["method"] == "dense"].head(1).assign(iteration=1)]))
    with pytest.raises(ValueError, match="two rows"):
        ex.final(pd.concat([results, results.head(1)]))
    with pytest.raises(ValueError, match="domain must be one of"):
        ex.ood_drop(results.replace({"domain": {"in-domain": "id"}}))
    with pytest.raises(ValueError, match="reference 'alignrag-cpo' is not in results"):
        ex.significance(results[results["method"] != "alignrag-cpo"], reference="alignrag-cpo")


def test_figures_save_exactly_what_they_plot(results, tmp_path, monkeypatch):
    monkeypatch.setenv("ROBUSTKIT_FIGURES", str(tmp_path))
    bars = ["accuracy", "CI low", "CI high", "n"]
    curves = pd.DataFrame({"critic": ["cft"] * 3 + ["w/o ccs"] * 3 + ["cpo"] * 3, "step": [1, 2, 3] * 3,
                           "loss": [2.0, 1.5, 1.2, 2.1, 1.7, 1.4, 0.69, 0.6, 0.5]})
    drawn = {"alignrag_table1": (figures.plot_table1(ex.table1(results), "tiny"), ["dataset", "method", *bars, "source"]),
             "alignrag_fig2_ood": (figures.plot_ood_drop(ex.ood_drop(results), "tiny"),
                                   ["method", "drop", "CI low", "CI high", "n_in", "n_out", "source"]),
             "alignrag_fig3_iterations": (figures.plot_iterations(ex.iterations(results), "tiny"),
                                          ["method", "dataset", "iteration", "accuracy", "n", "CI low", "CI high"]),
             "alignrag_fig4_informative": (figures.plot_informative(ex.informative_vs_noisy(results), "tiny"),
                                           ["method", "retrieval", *bars]),
             "alignrag_fig6_ablation": (figures.plot_ablation(ex.ablation(results), "tiny"), ["dataset", "method", *bars]),
             "alignrag_training": (figures.plot_training_curves(curves, "tiny"), ["critic", "step", "loss"])}
    for name, (fig, columns) in drawn.items():
        assert (tmp_path / f"{name}.png").exists()
        assert list(pd.read_csv(tmp_path / f"{name}.csv").columns) == columns
        assert "scale tiny" in (fig._suptitle.get_text() if fig._suptitle else fig.axes[0].get_title())
        plt.close(fig)
    assert len(pd.read_csv(tmp_path / "alignrag_fig3_iterations.csv")) == 2 * 2 * 3
    assert set(pd.read_csv(tmp_path / "alignrag_fig2_ood.csv")["source"]) == {"kit", "paper"}
    assert set(pd.read_csv(tmp_path / "alignrag_table1.csv")["source"]) == {"kit", "paper"}
    plt.close(figures.plot_ablation(ex.ablation(results), "tiny", name=None))
    assert len(list(tmp_path.iterdir())) == 2 * len(drawn)
    with pytest.raises(ValueError, match=r"needs column\(s\) \['CI low', 'CI high'\]"):
        figures.plot_iterations(ex.iterations(results).drop(columns=["CI low", "CI high"]), "tiny", name=None)
    with pytest.raises(ValueError, match="unknown critic"):
        figures.plot_training_curves(curves.replace({"critic": {"cpo": "dpo"}}), "tiny", name=None)


def test_figures_without_paper_values_say_so_and_draw_no_diamond(results):
    """The kit records no paper numbers for Figs. 3, 4 and 6: each legend says so, and no ◆ is drawn;
    Table 1 and Fig. 2, which have them, carry no such note."""
    for figure, fig in (("Fig. 3", figures.plot_iterations(ex.iterations(results), "tiny", name=None)),
                        ("Fig. 4", figures.plot_informative(ex.informative_vs_noisy(results), "tiny", name=None)),
                        ("Fig. 6", figures.plot_ablation(ex.ablation(results), "tiny", name=None))):
        legend = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
        assert legend[-1] == figures.NO_PAPER_VALUES.format(figure) == \
            f"paper: no numbers printed\nfor {figure} — none drawn"
        assert not [c for ax in fig.axes for c in ax.collections if isinstance(c, PathCollection)]  # no ◆
        assert not [t for ax in fig.axes for t in ax.texts]  # no paper number printed either
        plt.close(fig)
    for fig in (figures.plot_table1(ex.table1(results), "tiny", name=None),
                figures.plot_ood_drop(ex.ood_drop(results), "tiny", name=None)):
        legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        assert not [t for t in legend if "no numbers printed" in t] and any(t.startswith("paper") for t in legend)
        assert [c for ax in fig.axes for c in ax.collections if isinstance(c, PathCollection)]
        plt.close(fig)


def test_fig2_draws_the_papers_values_on_an_axis_of_their_own(results):
    """The paper's OOD values are read off its figure in that figure's units: they get the
    right-hand axis, never the kit's accuracy-points axis."""
    fig = figures.plot_ood_drop(ex.ood_drop(results), "tiny", name=None)
    kit_axis, paper_axis = fig.axes
    assert not [c for c in kit_axis.collections if isinstance(c, PathCollection)]
    assert [c for c in paper_axis.collections if isinstance(c, PathCollection)]
    assert "its units" in paper_axis.get_ylabel() and "points" in kit_axis.get_ylabel()
    plt.close(fig)
