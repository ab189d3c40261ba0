"""Shared fixtures. Tests run offline at tiny scale with a private cache per session."""
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ROBUSTKIT_SCALE", "tiny")


@pytest.fixture(scope="session")
def generator():
    """The tiny generator (SmolLM2-135M) with the user's call cache."""
    from robustkit.llm import Generator

    return Generator("generator", "tiny")


@pytest.fixture(scope="session")
def embedder():
    from robustkit.retrieval import load_embedder

    return load_embedder("tiny")


class _CountingRetriever:
    """A real retriever, counting its calls and the queries each call carried."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def search(self, queries, k):
        self.calls.append((len(queries), k))
        return self.inner.search(queries, k)


@pytest.fixture
def counting():
    """Wrap a real retriever to count its calls: ``counting(retriever).calls``."""
    return _CountingRetriever


@pytest.fixture(scope="module")
def mini(embedder):
    """data/mini's corpus and a dense retriever over it."""
    from robustkit.data import mini_corpus
    from robustkit.retrieval import DenseRetriever

    corpus = mini_corpus()
    return corpus, DenseRetriever(corpus, embedder)
