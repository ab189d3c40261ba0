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
