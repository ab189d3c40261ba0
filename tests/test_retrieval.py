import pytest

from robustkit.data import Corpus, Passage
from robustkit.retrieval import BM25Retriever, DenseRetriever, HybridRetriever

CORPUS = Corpus([
    Passage("paris", "Paris", "Paris is the capital and largest city of France."),
    Passage("canberra", "Canberra", "Canberra is the capital city of Australia."),
    Passage("spider", "Spider", "Spiders are arachnids with eight legs and fangs."),
    Passage("everest", "Mount Everest", "Mount Everest is the highest mountain above sea level."),
], "toy")


def test_bm25_ranks_lexical_match_first():
    hits = BM25Retriever(CORPUS).search(["capital of australia", "how many legs spiders"], k=2)
    assert hits[0][0].doc_id == "canberra" and hits[1][0].doc_id == "spider"
    assert hits[0][0].score >= hits[0][1].score and hits[0][1].rank == 1


def test_dense_finds_paraphrase(embedder):
    dense = DenseRetriever(CORPUS, embedder)
    hits = dense.search(["what is the tallest peak on earth"], k=4)
    assert hits[0][0].doc_id == "everest"
    assert len(hits[0]) == 4 and hits[0][0].score <= 1.0 + 1e-5


def test_hybrid_fuses_both(embedder):
    hybrid = HybridRetriever(CORPUS, dense=DenseRetriever(CORPUS, embedder))
    assert hybrid.search(["largest french city"], k=1)[0][0].doc_id == "paris"


@pytest.mark.parametrize("k", [0, -1])
def test_bad_k_rejected(k):
    with pytest.raises(ValueError, match="k must be >= 1"):
        BM25Retriever(CORPUS).search(["x"], k=k)


def test_embedding_cache_is_keyed_by_the_embedder(embedder, monkeypatch, tmp_path):
    """Two embedders over one corpus must not share a cached embeddings file."""
    from robustkit import retrieval

    monkeypatch.setenv("ROBUSTKIT_CACHE", str(tmp_path))
    DenseRetriever(CORPUS, embedder)
    other = retrieval.Embedder.__new__(retrieval.Embedder)
    other.id, other.model = "another/embedder", embedder.model
    DenseRetriever(CORPUS, other)
    names = sorted(p.name for p in (tmp_path / "embeddings").glob("*.npy"))
    assert len(names) == 2 and names[0].startswith("another--embedder")


def test_non_string_query_rejected():
    with pytest.raises(TypeError, match="query 1 is a int"):
        BM25Retriever(CORPUS).search(["x", 3], k=1)


# the relevance–robustness gap (gap.py) and its figure (plots.plot_gap): no model is loaded

def test_gap_table_records_the_retriever_it_measured():
    from robustkit.data import Question, Rewrite
    from robustkit.gap import relevance_robustness_gap

    question = Question("q-au", "capital of australia", ("Canberra",), gold_ids=("canberra",))
    rewrite = Rewrite("q-au", "false_premise", "capital of australia, largest city of france",
                      premise_ids=("paris",))
    table = relevance_robustness_gap(CORPUS, [question], [rewrite], BM25Retriever(CORPUS), k=2)
    assert table["condition"].tolist() == ["clean", "biased"] and set(table["retriever"]) == {"bm25"}
    assert table.loc[0, "gold@1"] == 1.0 and "correct" not in table.columns  # no generator, no accuracy


def _gap_table(retriever="dense", n=12, seed=3):
    """A gap table as relevance_robustness_gap returns it, with known random outcomes; type II has
    two rows per question and condition, so a row-level bootstrap would be wrong there."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    rows = [{"question_id": f"q{i}", "type": kind, "condition": condition, "retriever": retriever,
             "premise@1": float(rng.random() < (0.6 if condition == "biased" else 0.1)),
             "gold@1": float(rng.random() < 0.7), "correct": float(rng.random() < 0.5)}
            for i in range(n) for kind, copies in (("false_premise", 1), ("confirmation_bias", 2))
            for condition in ("clean", "biased") for _ in range(copies)]
    return pd.DataFrame(rows)


def test_gap_figure_draws_and_saves_question_level_cis_and_the_papers_value(tmp_path, monkeypatch):
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    import pandas as pd

    from robustkit.corm.paper import TABLE1
    from robustkit.gap import RATES, gap_rates
    from robustkit.metrics import cluster_bootstrap_ci
    from robustkit.plots import plot_gap

    monkeypatch.setenv("ROBUSTKIT_FIGURES", str(tmp_path))
    table = _gap_table()
    fig = plot_gap(table, scale="tiny", paper=TABLE1, name="gap")
    saved = pd.read_csv(tmp_path / "gap.csv")
    pd.testing.assert_frame_equal(saved, pd.read_csv(io.StringIO(gap_rates(table, paper=TABLE1).to_csv(index=False))))
    kit, published = saved[saved["source"] == "kit"], saved[saved["source"] == "paper"]
    assert len(kit) == 2 * 2 * len(RATES) and (kit["n"] == 12).all()
    assert ((kit["CI low"] <= kit["rate"]) & (kit["rate"] <= kit["CI high"])).all()
    for _, row in kit.iterrows():  # each rate and CI is the questions' own, resampling questions
        part = table[(table["type"] == row["type"]) & (table["condition"] == row["condition"])]
        assert row["rate"] == pytest.approx(part[row["metric"]].mean())
        assert (row["CI low"], row["CI high"]) == pytest.approx(cluster_bootstrap_ci(part[row["metric"]],
                                                                                     part["question_id"]))
    # the paper's value is CoRM-RAG Table 1's for the same retriever, and nothing else
    dense = TABLE1.set_index("key").loc["dense"]
    assert len(published) == 1 and published.iloc[0][["type", "condition", "metric", "paper method"]].tolist() == \
        ["all (Biased-NQ)", "biased", "correct", dense["method"]]
    assert published.iloc[0]["rate"] == pytest.approx(dense["biased accuracy"] / 100)
    # what is drawn is the CSV: bar heights, error-bar ends, the paper's line and its label
    types = sorted(table["type"].unique())
    for ax, metric in zip(fig.axes, RATES):
        bars = [c for c in ax.containers if isinstance(c, matplotlib.container.BarContainer)]
        errors = [c for c in ax.containers if isinstance(c, matplotlib.container.ErrorbarContainer)]
        for condition, drawn, error in zip(("clean", "biased"), bars, errors):
            want = kit[(kit["metric"] == metric) & (kit["condition"] == condition)].set_index("type").loc[types]
            assert [p.get_height() for p in drawn] == pytest.approx(want["rate"].tolist())
            ends = np.array([seg[:, 1] for seg in error.lines[2][0].get_segments()])
            assert ends[:, 0] == pytest.approx(want["CI low"].tolist())
            assert ends[:, 1] == pytest.approx(want["CI high"].tolist())
    lines = [line for line in fig.axes[-1].get_lines() if line.get_linestyle() == "--"]
    assert len(lines) == 1 and lines[0].get_ydata()[0] == pytest.approx(dense["biased accuracy"] / 100)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["clean", "biased", f"paper: {dense['method']}, biased, Biased-NQ "
                                         f"{dense['biased accuracy']:.1f}% (all types pooled)"]
    assert "scale tiny" in fig._suptitle.get_text() and "n = 12 questions" in fig._suptitle.get_text()
    plt.close(fig)


def test_gap_figure_has_no_paper_value_where_the_paper_has_none(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from robustkit.corm.paper import TABLE1
    from robustkit.gap import gap_rates
    from robustkit.plots import plot_gap

    monkeypatch.setenv("ROBUSTKIT_FIGURES", str(tmp_path))
    bm25 = gap_rates(_gap_table("bm25"), paper=TABLE1).query("source == 'paper'")
    assert bm25["rate"].tolist() == [TABLE1.set_index("key").loc["bm25", "biased accuracy"] / 100]
    fig = plot_gap(_gap_table("hybrid"), scale="tiny", paper=TABLE1, name=None)  # a retriever the paper does not run
    assert "paper: no value for the hybrid retriever" in [t.get_text() for t in fig.axes[-1].texts]
    assert not [line for line in fig.axes[-1].get_lines() if line.get_linestyle() == "--"]
    plt.close(fig)
    assert set(gap_rates(_gap_table("hybrid"), paper=TABLE1)["source"]) == {"kit"}
    assert set(gap_rates(_gap_table())["source"]) == {"kit"}  # no paper given, none drawn
    without_reader = gap_rates(_gap_table().drop(columns=["correct"]), paper=TABLE1)  # no generator: no accuracy, no paper
    assert set(without_reader["metric"]) == {"premise@1", "gold@1"} and set(without_reader["source"]) == {"kit"}
    with pytest.raises(ValueError, match="several retrievers"):
        gap_rates(_gap_table().assign(retriever=["bm25", "dense"] * (len(_gap_table()) // 2)))
    assert not list(tmp_path.iterdir())
