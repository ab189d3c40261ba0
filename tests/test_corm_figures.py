"""CoRM-RAG's tables and figures (teacher labels, critic training, Fig. 3, 5-7): the ablation's
paired changes, the risk-coverage CIs by question, and CSVs that hold exactly what is drawn."""
import json

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PolyCollection

from robustkit.corm import experiments as ex
from robustkit.corm import figures, paper, train
from robustkit.metrics import cluster_bootstrap_ci


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


def _latency_inputs(keys: list[str], ms: list[float]) -> tuple[pd.DataFrame, pd.DataFrame]:
    n = len(keys)
    acc = np.linspace(40, 60, n)
    table = pd.DataFrame({"method": [ex.METHOD_LABELS.get(k, k) for k in keys], "key": keys,
                          "clean accuracy": 70.0, "biased accuracy": acc, "biased CI low": acc - 10,
                          "biased CI high": acc + 10, "n biased": [8 if k == "llm-rerank" else 42 for k in keys],
                          "rerank ms/query": ms})
    latency = pd.DataFrame({"method": keys, "rerank ms/query": ms, "candidates": 10, "timed queries": 4,
                            "hardware": "a CPU"})
    return table, latency


def test_latency_figure_leaves_out_methods_without_model_time(tmp_path, monkeypatch):
    monkeypatch.setenv("ROBUSTKIT_FIGURES", str(tmp_path))
    table, latency = _latency_inputs(["dense", "random", "corm"], [0.0, 0.1, 250.0])
    plt.close(figures.plot_pareto(table, latency, scale="tiny", name="fig7"))
    csv = pd.read_csv(tmp_path / "fig7.csv")
    assert csv.loc[csv["source"] == "kit", "key"].tolist() == ["corm"]
    assert csv.loc[csv["source"] == "paper", "rerank ms/query"].tolist() == \
        [paper.LATENCY_MS["corm"], paper.LATENCY_MS["llm-rerank"]]
    assert "clean accuracy" not in csv.columns  # not drawn, so not in the CSV


def test_latency_figure_gives_each_method_a_row_and_labels_the_papers_stars(tmp_path, monkeypatch):
    """Seven cross-encoders within 200-300 ms and LLM-rerank at 4 s: one row each, fastest
    first, every number drawn is in the CSV, and no label covers another label or a point."""
    monkeypatch.setenv("ROBUSTKIT_FIGURES", str(tmp_path))
    keys = ["warm-start", "relevance-ce", "pa-ce", "llm-rerank", "corm", "corm-soft", "corm-prior", "rank-only"]
    ms = [281.0, 220.2, 298.1, 4126.5, 239.4, 256.0, 242.1, 241.0]
    table, latency = _latency_inputs(keys, ms)
    fig = figures.plot_pareto(table, latency, scale="tiny", name="fig7")
    left, right = fig.axes[:2]
    csv = pd.read_csv(tmp_path / "fig7.csv")
    kit = csv[csv["source"] == "kit"]
    assert kit["rerank ms/query"].tolist() == sorted(ms)  # rows fastest first
    assert list(kit.columns[:7]) == ["method", "key", "biased accuracy", "biased CI low", "biased CI high",
                                     "n biased", "rerank ms/query"]
    # the drawn kit points are the CSV's: accuracy on the left, latency on the right, one row each
    np.testing.assert_allclose(np.asarray(left.lines[0].get_xdata(), float), kit["biased accuracy"])
    np.testing.assert_allclose(np.asarray(left.lines[0].get_ydata(), float), np.arange(len(kit)))
    np.testing.assert_allclose(right.collections[0].get_offsets()[:, 0], kit["rerank ms/query"])
    ticks = [t.get_text() for t in left.get_yticklabels()]
    assert ticks[kit["key"].tolist().index("llm-rerank")] == "LLM-rerank (n = 8)"
    theirs = csv[csv["source"] == "paper"].set_index("key")
    published = paper.TABLE1.set_index("key")["biased accuracy"]
    assert theirs.loc["corm", "biased accuracy"] == published["corm"]
    for ax, column in ((left, "biased accuracy"), (right, "rerank ms/query")):
        stars = next(c for c in ax.collections if c.get_offsets().shape[0] == 2 and c.get_paths()
                     and len(c.get_paths()[0].vertices) > 4)  # the star marker
        np.testing.assert_allclose(stars.get_offsets()[:, 0], theirs.loc[["corm", "llm-rerank"], column])
    texts = [t.get_text() for t in left.texts + right.texts]
    assert "paper: CoRM-RAG 52.6" in texts and "paper: CoRM-RAG 215 ms" in texts
    assert "paper: LLM-rerank 20 s" in texts
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in (left, right):
        boxes = [t.get_window_extent(renderer) for t in ax.texts]
        for i, a in enumerate(boxes):
            assert not any(a.overlaps(b) for b in boxes[i + 1:]), f"labels overlap in {ax.get_title()}"
        points = ax.transData.transform(np.column_stack(
            [kit["biased accuracy" if ax is left else "rerank ms/query"], np.arange(len(kit))]))
        assert not any(box.contains(*p) for box in boxes for p in points), "a label covers a kit point"
    plt.close(fig)
    # a paper method the kit did not run gets its own row
    fig = figures.plot_pareto(*_latency_inputs(["corm"], [250.0]), scale="tiny", name=None)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["CoRM critic",
                                                                     "paper: LLM-rerank (not run here)"]
    plt.close(fig)


def _selective(n_questions: int = 24, seed: int = 1) -> pd.DataFrame:
    """Biased queries of two methods; every third question has two rewrites (clusters of 2)."""
    rng = np.random.default_rng(seed)
    rows = []
    for method in ("corm", "relevance-ce"):
        for i in range(n_questions):
            for k in range(2 if i % 3 == 0 else 1):
                rows.append({"method": method, "condition": "biased", "question_id": f"q{i}",
                             "confidence": round(float(rng.random()), 2), "correct": int(rng.random() < 0.6)})
    return pd.DataFrame(rows)


def test_risk_coverage_ci_is_a_bootstrap_by_question_over_the_answered_queries():
    results = _selective()
    curves, summary = ex.risk_coverage_table(results, min_answered=10)
    for method, curve in curves.groupby("method"):
        frame = results[results["method"] == method]
        assert curve["answered"].iloc[-1] == len(frame) == summary.set_index("method").loc[method, "n"]
        np.testing.assert_allclose(curve["coverage"], curve["answered"] / len(frame))
        band = curve.dropna(subset=["CI low", "CI high"])
        assert band["answered"].min() >= 10 and curve.loc[curve["answered"] < 10, "CI low"].isna().all()
        assert (band["CI low"] <= band["accuracy"] + 1e-12).all()
        assert (band["accuracy"] <= band["CI high"] + 1e-12).all()
        assert (band["CI high"] > band["CI low"]).any()
        # one point by hand: the queries answered at that threshold, resampled by question
        point = band.iloc[len(band) // 2]
        answered = frame[frame["confidence"] >= point["threshold"]].sort_values("question_id")
        assert len(answered) == point["answered"]
        assert answered["correct"].mean() == pytest.approx(point["accuracy"])
        assert (point["CI low"], point["CI high"]) == pytest.approx(cluster_bootstrap_ci(
            answered["correct"].to_numpy(float), answered["question_id"].to_numpy()))
    again, _ = ex.risk_coverage_table(results.sample(frac=1, random_state=3), min_answered=10)
    pd.testing.assert_frame_equal(again.sort_values(["method", "threshold"]).reset_index(drop=True),
                                  curves.sort_values(["method", "threshold"]).reset_index(drop=True))
    capped, _ = ex.risk_coverage_table(results, min_answered=10, band_points=3)
    assert capped.groupby("method")["CI low"].count().tolist() == [3, 3]


def test_risk_coverage_figure_draws_bands_and_saves_what_it_draws(tmp_path, monkeypatch):
    monkeypatch.setenv("ROBUSTKIT_FIGURES", str(tmp_path))
    curves, summary = ex.risk_coverage_table(_selective(), min_answered=10)
    fig = figures.plot_risk_coverage(curves, summary, scale="tiny", name="fig3")
    ax = fig.axes[0]
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(bands) == 2  # one CI band per method
    for band, (method, curve) in zip(bands, curves.groupby("method", sort=False)):
        drawn = curve.dropna(subset=["CI low"])
        vertices = band.get_paths()[0].vertices
        assert vertices[:, 1].min() == pytest.approx(drawn["CI low"].min())
        assert vertices[:, 1].max() == pytest.approx(drawn["CI high"].max())
        assert vertices[:, 0].min() == pytest.approx(drawn["coverage"].min())
    csv = pd.read_csv(tmp_path / "fig3.csv")
    kit = csv[csv["source"] == "kit"]
    assert {"coverage", "accuracy", "answered", "CI low", "CI high", "random-confidence accuracy", "source"} \
        <= set(csv.columns)
    np.testing.assert_allclose(kit["accuracy"], curves["accuracy"])
    np.testing.assert_allclose(kit["CI low"].fillna(-1), curves["CI low"].fillna(-1))
    stars = csv[csv["source"] == "paper"]
    assert list(zip(stars["coverage"], stars["accuracy"])) == [(1.0, paper.FULL_COVERAGE), *paper.RISK_COVERAGE]
    texts = [t.get_text() for t in ax.texts]
    assert "paper 62.0%\nat 80%" in texts and "paper 52.6%\nat 100%" in texts
    plt.close(fig)
    with pytest.raises(ValueError, match="CI low"):
        figures.plot_risk_coverage(curves.drop(columns=["CI low"]), summary, scale="tiny", name=None)


def test_labels_figure_csv_holds_the_drawn_shares(tmp_path, monkeypatch):
    monkeypatch.setenv("ROBUSTKIT_FIGURES", str(tmp_path))
    s = [0, 0, 1 / 3, 1, 1, 2 / 3, 0, 0, 0, 1 / 3]
    labels = [{"question_id": f"q{i % 3}", "in_clean_pool": i < 6, "has_gold": i in (3, 4, 5), "s": v}
              for i, v in enumerate(s)]
    fig = figures.plot_labels(labels, scale="tiny", name="labels")
    csv = pd.read_csv(tmp_path / "labels.csv")
    assert list(csv.columns) == ["panel", "group", "s", "count", "n", "share"]
    for _, part in csv.groupby(["panel", "group"]):
        assert part["count"].sum() == part["n"].iloc[0] and part["share"].sum() == pytest.approx(1.0)
    clean = csv[(csv["panel"] == "pool") & (csv["group"] == "clean pool")].set_index("s")
    assert clean["count"].tolist() == [2, 1, 1, 2] and clean["n"].iloc[0] == 6  # s = 0, 1/3, 2/3, 1
    for ax, panel in zip(fig.axes, ["pool", "evidence"]):
        heights = [p.get_height() for p in ax.patches]
        np.testing.assert_allclose(heights, csv.loc[csv["panel"] == panel, "share"])
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        part = csv[csv["panel"] == panel].drop_duplicates("group")
        assert legend == [f"{g} (n = {n})" for g, n in zip(part["group"], part["n"])]
    plt.close(fig)


def _history(start: bool = True) -> pd.DataFrame:
    rows = []
    for critic, base in (("corm", 0.5), ("relevance-ce", 0.8)):
        if start:
            rows.append({"epoch": 0, "split": "start", "loss": 1.0, "ndcg@3": base - 0.2, "mrr": base - 0.1,
                         "critic": critic, "step": 0})
        for step in range(1, 7):
            rows.append({"epoch": (step - 1) / 3, "split": "train", "loss": 1 / step, "critic": critic,
                         "step": step})
            if step % 3 == 0:
                rows.append({"epoch": step // 3, "split": "val", "loss": 0.5, "ndcg@3": base, "mrr": base + 0.1,
                             "critic": critic, "step": step})
    return pd.DataFrame(rows).assign(**{"val groups": 6})


def test_training_figure_starts_validation_at_step_0_and_says_its_groups_are_critics_own(tmp_path, monkeypatch):
    monkeypatch.setenv("ROBUSTKIT_FIGURES", str(tmp_path))
    history = _history()
    fig = figures.plot_training(history, scale="tiny", name="training")
    ndcg, mrr = fig.axes[-2:]
    for ax, metric in ((ndcg, "ndcg@3"), (mrr, "mrr")):
        assert "not comparable across critics" in ax.get_title()
        for line, critic in zip(ax.lines, ["corm", "relevance-ce"]):
            points = history[(history["critic"] == critic) & history["split"].isin(["start", "val"])]
            np.testing.assert_allclose(line.get_xdata(), [0, 3, 6])
            np.testing.assert_allclose(line.get_ydata(), points[metric])
    assert [t.get_text() for t in mrr.get_legend().get_texts()] == ["corm, 6 groups", "relevance-ce, 6 groups"]
    assert any("before the first step" in t.get_text() for t in fig.texts)
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "training.csv"), history, check_dtype=False)
    plt.close(fig)
    fig = figures.plot_training(_history(start=False).drop(columns=["val groups"]), scale="tiny", name=None)
    assert any("no validation before the first step" in t.get_text() for t in fig.texts)
    plt.close(fig)


def test_training_history_validates_the_start_model_on_each_critics_own_groups(tmp_path, monkeypatch):
    """The step-0 row: the start model (loaded once) on each critic's own validation groups, with
    its own loss; the logged rows and their steps are left as they were."""
    from robustkit.corm import settings

    logged = [{"id": "train-0-0", "epoch": 0.0, "split": "train", "loss": 1.2},
              {"id": "train-0-1", "epoch": 0.5, "split": "train", "loss": 0.9},
              {"id": "val-0", "epoch": 1, "split": "val", "loss": 0.8, "ndcg@3": 0.6, "mrr": 0.7}]
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in logged))
    calls, loaded = [], []
    monkeypatch.setattr(train, "train_critic", lambda cfg, variant: tmp_path)
    monkeypatch.setattr(train, "training_groups", lambda cfg, **spec: (
        [], [{"query": "q", "spec": sorted(spec)}] * (2 if spec.get("relevance") else 3), {}))
    monkeypatch.setattr(train, "_start_model", lambda cfg: loaded.append(cfg) or "start model")
    monkeypatch.setattr(train, "_validate", lambda model, groups, loss, tau, batch_groups: calls.append(
        (model, len(groups), loss, tau)) or {"loss": 2.0, "ndcg@3": 0.5, "mrr": 0.55})
    history = train.training_history(settings("tiny"), ["corm", "relevance-ce", "tau-3"])
    assert len(loaded) == 1
    assert calls == [("start model", 3, "hybrid", 1.0), ("start model", 2, "pointwise", 1.0),
                     ("start model", 3, "hybrid", 3.0)]
    corm = history[history["critic"] == "corm"]
    assert corm["split"].tolist() == ["start", "train", "train", "val"]
    assert corm["step"].tolist() == [0, 1, 2, 2]
    assert corm.iloc[0][["epoch", "loss", "ndcg@3", "mrr"]].tolist() == [0, 2.0, 0.5, 0.55]
    assert history.groupby("critic")["val groups"].first().to_dict() == {"corm": 3, "relevance-ce": 2, "tau-3": 3}
    assert "id" not in history.columns
    without = train.training_history(settings("tiny"), ["corm"], start=False)
    assert without["split"].tolist() == ["train", "train", "val"] and len(calls) == 3


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
