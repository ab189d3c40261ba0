"""The scale's shared objects: its corpus, retrievers, generators and seeded question samples.

Each is built once per process for exactly what decides it — the corpus for its dataset, the
dense retriever for (dataset, embedder), a generator for (model, dtype, system prompt, batch
size) — so ``with_overrides(scale, dataset=...)`` gets its own corpus, and the reader, teacher
and adversary roles share one loaded model when they name the same one (``robustkit.llm``).
"""
from __future__ import annotations

import random

from robustkit import memo
from robustkit.config import Scale, get_scale
from robustkit.data import Corpus, Question, corpus, load, mini_questions
from robustkit.data.own import read_corpus
from robustkit.llm import DEFAULT_SYSTEM, Generator
from robustkit.models import resolve_model
from robustkit.retrieval import BM25Retriever, DenseRetriever, load_embedder
from robustkit.llm_client import ServedGenerator, make_generator


def corpus_for(scale: Scale | str | None = None) -> Corpus:
    """The scale's retrieval corpus: data/mini at tiny, the NQ-open oracle passages beyond."""
    return _corpus(get_scale(scale).dataset)


def retriever_for(scale: Scale | str | None = None) -> DenseRetriever:
    """Dense retrieval (the paper's candidate generator) over the scale's corpus."""
    scale = get_scale(scale)
    return _dense(scale.dataset, resolve_model("embedder", scale, verbose=False))


def searched(scale: Scale | str | None, corpus: Corpus | None = None, retriever=None) -> tuple:
    """(corpus, retriever) a method reads: the scale's corpus and dense retriever, or a corpus of
    the caller's with the retriever that searches it — both or neither."""
    if (corpus is None) != (retriever is None):
        raise ValueError("pass corpus= and the retriever= that searches it together, or neither (the scale's)")
    return (corpus, retriever) if corpus is not None else (corpus_for(scale), retriever_for(scale))


def own_corpus(source: str, scale: Scale | str | None = None) -> tuple[Corpus, DenseRetriever]:
    """(corpus, dense retriever) for a command line's ``--corpus``: ``"mini"`` (the teaching set's
    passages) or a passages file (``data.own.read_corpus``), embedded by the scale's embedder."""
    if source == "mini":
        return _corpus("mini"), _dense("mini", resolve_model("embedder", get_scale(scale), verbose=False))
    own = read_corpus(source)
    return own, DenseRetriever(own, load_embedder(scale))


def bm25_for(scale: Scale | str | None = None) -> BM25Retriever:
    """BM25 over the scale's corpus."""
    return _bm25(get_scale(scale).dataset)


def generator_for(scale: Scale | str | None = None, role: str = "generator", *,
                  system_prompt: str | None = DEFAULT_SYSTEM) -> Generator | ServedGenerator:
    """The scale's model for ``role`` (reader, teacher, adversary), in process or served, with the
    user's call cache."""
    return _generator(get_scale(scale), role, system_prompt)


def train_split(scale: Scale | str | None = None) -> list[Question]:
    """The scale's whole training split (never a test question)."""
    scale = get_scale(scale)
    return mini_questions("train") if scale.dataset == "mini" else load(scale.dataset, "train").records


def train_questions(scale: Scale | str | None = None) -> list[Question]:
    """The training questions: a sample of the scale's training split seeded by ``scale.seed``."""
    scale = get_scale(scale)
    return sample(train_split(scale), scale.n_train_questions, scale.seed)


def test_questions(scale: Scale | str | None = None) -> list[Question]:
    """The evaluated questions: a sample of the scale's test split seeded by ``scale.seed``."""
    scale = get_scale(scale)
    pool = mini_questions("test") if scale.dataset == "mini" else load(scale.dataset, "test").records
    return sample(pool, scale.n_test_questions, scale.seed)


def sample(pool: list, n: int, seed: int) -> list:
    """``n`` items of ``pool`` (questions or ids) drawn with ``seed``, in id order (all of them
    when n is 0 or more than there are)."""
    if not pool:
        raise ValueError("no questions in the chosen split")
    if not n or n >= len(pool):
        return list(pool)
    return sorted(random.Random(seed).sample(pool, n), key=lambda item: getattr(item, "id", item))


@memo.cached(4)
def _corpus(dataset: str) -> Corpus:
    return corpus(dataset)


@memo.cached(4)
def _dense(dataset: str, embedder_spec) -> DenseRetriever:
    return DenseRetriever(_corpus(dataset), load_embedder(embedder_spec))


@memo.cached(4)
def _bm25(dataset: str) -> BM25Retriever:
    return BM25Retriever(_corpus(dataset))


@memo.cached(16)
def _generator(scale: Scale, role: str, system_prompt: str | None) -> Generator | ServedGenerator:
    return make_generator(role, scale, system_prompt=system_prompt)
