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
