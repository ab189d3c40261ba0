"""Shared fixtures. Tests run offline at tiny scale with a private cache per session.

Two tiers: ``pytest -m "not slow"`` loads no model (a test that tries fails, naming the marker
it needs) and takes about a minute; ``pytest`` runs everything, as CI does."""
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ROBUSTKIT_SCALE", "tiny")

MODEL_FIXTURES = {"generator", "embedder", "mini", "kit_model", "encoder"}  # fixtures that load a model


def pytest_configure(config):
    """The fast tier (``-m "not slow"``) refuses to load model weights anywhere in the session,
    fixtures included: a test that needs a model fails, naming the marker it lacks."""
    if config.option.markexpr.replace(" ", "") != "notslow":
        return
    from transformers import modeling_utils

    def refuse(cls, *args, **kwargs):
        raise RuntimeError(f"the fast tier loads no model, and this test loads {cls.__name__}: mark it "
                           "@pytest.mark.slow")

    modeling_utils.PreTrainedModel.from_pretrained = classmethod(refuse)


def pytest_collection_modifyitems(items):
    for item in items:  # a test that takes a model fixture is slow, whatever it does with it
        if MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


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
