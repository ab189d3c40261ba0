"""The short-answer evaluation sets that CounterRefine and AlignRAG share: which questions, over
which corpus, searched by which retriever — and the training questions beside them.

    sets = short_answer_sets(scale, n_multihop=8, n_factual=8, n_hotpotqa=0, n_nq=0, n_train=6)

``tiny``: data/mini's two-hop and factual test questions over the data/mini corpus, training
questions from its train splits. ``small`` and beyond: HotpotQA distractor dev, each question
searching only its own paragraphs (``ScopedRetriever``; HotpotQA ships no train split here, so its
training questions are held-out dev questions), and NQ-open over the oracle corpus with training
questions from its train split. Every sample is drawn with ``scale.seed``.
"""
from __future__ import annotations

from dataclasses import dataclass

from robustkit import memo, resources
from robustkit.config import Scale, get_scale
from robustkit.data import Corpus, Question, corpus, load, mini_corpus, mini_fingerprint, mini_multihop, mini_questions
from robustkit.retrieval import DenseRetriever, ScopedRetriever, load_embedder


@dataclass
class QASet:
    name: str
    questions: list[Question]  # evaluated
    train: list[Question]  # training (or calibration) questions: never among the evaluated
    corpus: Corpus
    retriever: object  # DenseRetriever, or ScopedRetriever (each question its own paragraphs)
    fingerprint: str
    multihop: bool  # two-hop questions (HotpotQA, data/mini's two-hop set)


def short_answer_sets(scale: Scale | str | None = None, *, n_multihop: int = 0, n_factual: int = 0,
                      n_hotpotqa: int = 0, n_nq: int = 0, n_train: int = 0) -> list[QASet]:
    """The two sets of the scale (two-hop first), ``n_*`` questions each (0 = all) and ``n_train``
    training questions each (0 = all)."""
    return list(_sets(get_scale(scale), n_multihop, n_factual, n_hotpotqa, n_nq, n_train))


@memo.cached(8)
def _sets(scale: Scale, n_multihop: int, n_factual: int, n_hotpotqa: int, n_nq: int, n_train: int) -> tuple:
    pick = resources.sample
    if scale.dataset == "mini":
        mini = mini_corpus()
        dense = _BuiltOnFirstUse("dense", lambda: DenseRetriever(mini, load_embedder(scale)))  # the two sets' one
        return tuple(QASet(name, pick(test, n, scale.seed), pick(train, n_train, scale.seed), mini, dense,
                           mini_fingerprint(), multihop)
                     for name, test, train, n, multihop in (
                         ("mini-multihop", mini_multihop("test"), mini_multihop("train"), n_multihop, True),
                         ("mini-factual", mini_questions("test"), mini_questions("train"), n_factual, False)))
    hotpot = load("hotpotqa")
    evaluated = pick(hotpot.records, n_hotpotqa, scale.seed)
    chosen = {q.id for q in evaluated}
    held_out = [q for q in hotpot.records if q.id not in chosen]
    paragraphs = Corpus([p for q in hotpot.records for p in q.extra["paragraphs"]], "hotpotqa-paragraphs")
    scopes = {q.id: [p.id for p in q.extra["paragraphs"]] for q in hotpot.records}
    scoped = _BuiltOnFirstUse(ScopedRetriever.name, lambda: ScopedRetriever(
        DenseRetriever(paragraphs, load_embedder(scale)), scopes))
    oracle, nq = corpus("nq_open_oracle"), load("nq_open_oracle", "test")
    return (QASet("hotpotqa", evaluated, pick(held_out, n_train, scale.seed) if held_out else [],
                  paragraphs, scoped, hotpot.fingerprint, True),
            QASet("nq_open", pick(nq.records, n_nq, scale.seed),
                  pick(load("nq_open_oracle", "train").records, n_train, scale.seed),
                  oracle, _BuiltOnFirstUse("dense", lambda: DenseRetriever(oracle, load_embedder(scale))),
                  nq.fingerprint, False))


class _BuiltOnFirstUse:
    """A retriever built when first searched (or asked for anything but its name): describing a
    set (``describe``, a run log) names its retriever without loading the embedder or embedding
    the corpus."""

    def __init__(self, name: str, build):
        self.name, self._build, self._built = name, build, None

    def __getattr__(self, attribute):
        if attribute.startswith("__"):  # copy and pickle probe for these before __init__ has run
            raise AttributeError(attribute)
        if self._built is None:
            self._built = self._build()
        return getattr(self._built, attribute)
