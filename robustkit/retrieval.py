"""Retrieval: BM25 (``bm25s``), dense (sentence-transformers + FAISS) and their hybrid.

All retrievers share one batched interface, ``search(queries, k) -> list[list[Hit]]``, ranked
best first. Indexes and passage embeddings are built once and cached by corpus checksum.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from robustkit import memo
from robustkit.config import Scale, check_knob, get_scale, quiet_model_loading
from robustkit.paths import cache_dir
from robustkit.data.records import Corpus, DataError, Passage
from robustkit.device import pick_device
from robustkit.locks import exclusive
from robustkit.models import ModelSpec, resolve_model


@dataclass(frozen=True)
class Hit:
    doc_id: str
    score: float
    rank: int  # 0-based


class Retriever(Protocol):
    corpus: Corpus

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]: ...


class BM25Retriever:
    """Okapi BM25 (k1 = 1.5, b = 0.75) over title + text, English stop words removed."""

    name = "bm25"

    def __init__(self, corpus: Corpus):
        import bm25s

        self.corpus = corpus
        self._bm25s = bm25s
        tokens = bm25s.tokenize([p.content for p in corpus], stopwords="en", show_progress=False)
        if not tokens.vocab:  # bm25s would fail on an empty vocabulary with a bare max() error
            raise DataError(f"corpus {corpus.name!r}: none of its {len(corpus)} passages has a word BM25 can index "
                            "(each is empty, punctuation or English stop words); check the passages' text")
        self.index = bm25s.BM25()
        self.index.index(tokens, show_progress=False)

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        k = _check_search(queries, k, self.corpus)
        if not queries:  # as generate([]): nothing asked, nothing found
            return []
        tokens = self._bm25s.tokenize(list(queries), stopwords="en", show_progress=False)
        docs, scores = self.index.retrieve(tokens, k=k, show_progress=False, n_threads=1)
        return [[Hit(self.corpus.passages[d].id, float(s), r)
                 for r, (d, s) in enumerate(zip(row_d, row_s))] for row_d, row_s in zip(docs, scores)]

    def identity(self) -> dict:
        return {"retriever": self.name, "corpus": self.corpus.checksum}


class Embedder:
    """A sentence embedder with the identity its cached corpus embeddings are keyed by."""

    def __init__(self, spec: ModelSpec, device: str | None = None):
        from sentence_transformers import SentenceTransformer

        quiet_model_loading()
        self.id = spec.name
        self.model = SentenceTransformer(spec.path, device=pick_device(device))

    def encode(self, texts: Sequence[str], batch_size: int = 64, progress: bool = False) -> np.ndarray:
        """Unit-length float32 embeddings, one row per text."""
        return self.model.encode(list(texts), batch_size=batch_size, convert_to_numpy=True,
                                 normalize_embeddings=True, show_progress_bar=progress
                                 ).astype(np.float32)


class DenseRetriever:
    """Cosine similarity of sentence embeddings: a FAISS inner-product index over unit vectors.

    Passage embeddings are cached on disk under the embedder's id and the corpus checksum.
    """

    name = "dense"

    def __init__(self, corpus: Corpus, embedder: Embedder, *, batch_size: int = 64,
                 embeddings: np.ndarray | None = None):
        import faiss

        self.corpus, self.embedder, self.batch_size = corpus, embedder, batch_size
        embeddings = self._corpus_embeddings() if embeddings is None else embeddings
        self.embeddings = embeddings
        self.index = faiss.IndexFlatIP(embeddings.shape[1])
        self.index.add(embeddings)

    def restricted_to(self, corpus: Corpus) -> "DenseRetriever":
        """A retriever over ``corpus``, a subset of this one's passages, reusing their embeddings
        (a base corpus inside its enriched version costs no encoding)."""
        for p in corpus:
            if p.id not in self.corpus or self.corpus[p.id] != p:
                raise ValueError(f"passage {p.id!r} of corpus {corpus.name!r} is not in {self.corpus.name!r}")
        rows = [self.corpus.position(p.id) for p in corpus]
        return DenseRetriever(corpus, self.embedder, batch_size=self.batch_size, embeddings=self.embeddings[rows])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.embedder.encode(texts, self.batch_size)

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        k = _check_search(queries, k, self.corpus)
        if not queries:  # as generate([]): nothing asked, nothing found
            return []
        scores, docs = self.index.search(self.embed(queries), k)
        return [[Hit(self.corpus.passages[d].id, float(s), r)
                 for r, (d, s) in enumerate(zip(row_d, row_s))] for row_d, row_s in zip(docs, scores)]

    def identity(self) -> dict:
        """What decides this retriever's rankings, for artifact manifests."""
        return {"retriever": self.name, "embedder": self.embedder.id, "corpus": self.corpus.checksum}

    def _corpus_embeddings(self) -> np.ndarray:
        name = f"{self.embedder.id.replace('/', '--')}-{self.corpus.checksum[:16]}.npy"
        path = cache_dir() / "embeddings" / name
        if path.exists():
            return np.load(path)
        with exclusive(path, f"embedding {len(self.corpus)} passages of {self.corpus.name!r}"):
            if path.exists():  # the process we waited for embedded them
                return np.load(path)
            vectors = self.embed([p.content for p in self.corpus])
            tmp = path.with_name(path.stem + ".tmp.npy")  # ours alone: we hold the lock
            np.save(tmp, vectors)
            tmp.replace(path)
        return vectors


class ScopedRetriever:
    """Each question searches only its own passages: HotpotQA's distractor setting, where a
    question's ten paragraphs are its whole corpus. All passages are embedded once (by the base
    retriever); a search ranks a question's scope by cosine, exactly as a retriever over that
    scope alone would. Use ``search_for`` (below) so methods serve shared and scoped corpora alike.
    """

    name = "dense-scoped"

    def __init__(self, base: DenseRetriever, scopes: dict[str, Sequence[str]]):
        self.base, self.corpus = base, base.corpus
        self._rows = {}
        for question_id, ids in scopes.items():
            missing = [d for d in ids if d not in base.corpus]
            if missing or not ids:
                raise ValueError(f"scope of question {question_id!r} " + (
                    f"names passages not in corpus {base.corpus.name!r}: {missing[:3]}" if missing else "is empty"))
            self._rows[question_id] = np.array([base.corpus.position(d) for d in ids])

    def search_for(self, question_ids: Sequence[str], queries: Sequence[str], k: int) -> list[list[Hit]]:
        _check_search(queries, k, self.corpus)
        if len(question_ids) != len(queries):
            raise ValueError(f"{len(question_ids)} question ids but {len(queries)} queries")
        if not queries:
            return []
        unknown = sorted({q for q in question_ids if q not in self._rows})
        if unknown:
            raise KeyError(f"no passage scope for question(s) {unknown[:3]}")
        vectors, results = self.base.embed(queries), []
        for question_id, vector in zip(question_ids, vectors):
            rows = self._rows[question_id]
            scores = self.base.embeddings[rows] @ vector
            order = np.argsort(-scores, kind="stable")[:k]
            results.append([Hit(self.corpus.passages[rows[i]].id, float(scores[i]), r) for r, i in enumerate(order)])
        return results

    def identity(self) -> dict:
        return {**self.base.identity(), "retriever": self.name, "scopes": len(self._rows)}


def search_for(retriever, question_ids: Sequence[str], queries: Sequence[str], k: int) -> list[list[Hit]]:
    """Search on behalf of questions: a ``ScopedRetriever`` ranks each question's own passages, any
    other retriever its whole corpus (the question ids are then not needed)."""
    if hasattr(retriever, "search_for"):
        return retriever.search_for(list(question_ids), list(queries), k)
    return retriever.search(list(queries), k)


class HybridRetriever:
    """Reciprocal-rank fusion of BM25 and dense: score(d) = Σ_r 1 / (60 + rank_r(d))."""

    name = "hybrid"

    def __init__(self, corpus: Corpus, bm25: BM25Retriever | None = None,
                 dense: DenseRetriever | None = None, depth: int = 100):
        self.corpus = corpus
        self.retrievers = [bm25 or BM25Retriever(corpus), dense or DenseRetriever(corpus, load_embedder())]
        self.depth = depth

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        k = _check_search(queries, k, self.corpus)
        if not queries:  # as generate([]): nothing asked, nothing found
            return []
        depth = min(max(k, self.depth), len(self.corpus))
        runs = [r.search(queries, depth) for r in self.retrievers]
        fused = []
        for per_query in zip(*runs):
            scores: dict[str, float] = {}
            for hits in per_query:
                for hit in hits:
                    scores[hit.doc_id] = scores.get(hit.doc_id, 0.0) + 1.0 / (60 + hit.rank + 1)
            best = sorted(scores.items(), key=lambda kv: -kv[1])[:k]
            fused.append([Hit(doc, score, r) for r, (doc, score) in enumerate(best)])
        return fused

    def identity(self) -> dict:
        return {"retriever": self.name, "depth": self.depth,
                "parts": [r.identity() for r in self.retrievers]}


def load_embedder(scale: Scale | str | ModelSpec | None = None) -> Embedder:
    """The scale's sentence embedder (all-MiniLM-L6-v2 from its PyPI package at tiny/small), or
    the one a ``ModelSpec`` names; loaded once per process."""
    spec = scale if isinstance(scale, ModelSpec) else resolve_model("embedder", get_scale(scale))
    return _embedder(spec)


@memo.cached(4)
def _embedder(spec: ModelSpec) -> Embedder:
    return Embedder(spec)


def build_retriever(kind: str, corpus: Corpus, scale: Scale | str | None = None) -> Retriever:
    """``kind`` is ``bm25``, ``dense`` or ``hybrid``."""
    if kind == "bm25":
        return BM25Retriever(corpus)
    if kind == "dense":
        return DenseRetriever(corpus, load_embedder(scale))
    if kind == "hybrid":
        return HybridRetriever(corpus, dense=DenseRetriever(corpus, load_embedder(scale)))
    raise ValueError(f"unknown retriever {kind!r}; expected 'bm25', 'dense' or 'hybrid'")


def _check_search(queries: Sequence[str], k: int, corpus: Corpus) -> int:
    if isinstance(queries, str):
        raise TypeError("queries must be a list of strings, not one string; wrap it in a list")
    for i, query in enumerate(queries):
        if not isinstance(query, str):
            raise TypeError(f"query {i} is a {type(query).__name__}, expected str")
    check_knob("k", k, integer=True, low=1)
    return min(k, len(corpus))


def split_per_query(flat: np.ndarray, groups: Sequence[Sequence]) -> list[np.ndarray]:
    """Split scores of flattened (query, candidate) pairs back into one array per query
    (``groups[i]`` holds query i's candidates); no groups, no arrays."""
    if not len(groups):
        return []
    return np.split(np.asarray(flat), np.cumsum([len(g) for g in groups])[:-1])


def top_passages(retriever: Retriever, corpus: Corpus, queries: Sequence[str], k: int) -> list[list[Passage]]:
    """One retrieval call: the top-k passages (not just their ids) for each query."""
    return [[corpus[h.doc_id] for h in row] for row in retriever.search(list(queries), k)]
