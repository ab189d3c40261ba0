"""The one interface every method implements, and the tidy results table built from it.

A method answers a batch of queries the same way, whichever paper it comes from::

    answers = method.answer(queries)        # list[Query] -> list[Answer], in order

so baselines, CoRM-RAG, FVA-RAG, CounterRefine and AlignRAG line up on the same questions
(notebook 08). A ``Query`` carries only what a method may see — never the gold answer; scoring
happens afterwards, in ``run``, with one judge for every method.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Mapping, Protocol, Sequence

import pandas as pd

from robustkit.judges import Judge, NormalisedMatch


@dataclass(frozen=True)
class Query:
    """One question as a method sees it: a clean question or one biased rewrite of it."""

    id: str  # unique per query, e.g. "q-hist-003" or "q-hist-003|false_premise"
    question_id: str  # the underlying question (its gold answers live elsewhere)
    text: str


@dataclass
class Answer:
    """What a method returns for one query.

    ``latency_s`` is the method's wall time for the batch divided by the batch size (methods
    batch their model calls across queries). ``model_calls`` counts language-model calls,
    generation or scoring, cached or not; ``trace`` holds the method's own intermediate results
    (a ranking, a draft, kill queries, a critique ...).
    """

    query_id: str
    question_id: str
    method: str
    text: str
    abstained: bool = False
    confidence: float | None = None
    passage_ids: list[str] = field(default_factory=list)
    retrieval_calls: int = 0
    model_calls: int = 0
    latency_s: float = 0.0
    trace: dict = field(default_factory=dict)


class Method(Protocol):
    name: str

    def answer(self, queries: Sequence[Query]) -> list[Answer]: ...


def check_queries(queries: Sequence[Query]) -> list[Query]:
    """``queries`` as a list of ``Query``, or a TypeError naming what was passed instead: every
    ``Method.answer`` calls it first, so a bare string is refused before any retrieval."""
    if isinstance(queries, (str, Query)):
        raise TypeError(f"answer() takes a list of Query, got one {type(queries).__name__} ({queries!r:.60}); "
                        "wrap it: [Query(id, question_id, text)], or build them with queries_from(table)")
    queries = list(queries)
    for i, query in enumerate(queries):
        if not isinstance(query, Query):
            raise TypeError(f"query {i} is a {type(query).__name__} ({query!r:.60}), expected a Query")
    return queries


def spread_latency(answers: Sequence[Answer], start: float) -> None:
    """Give each answer of a batch its share of the batch's wall time since ``start``
    (``time.perf_counter()``): methods batch their model calls, so per-query time is an average."""
    per_query = (time.perf_counter() - start) / max(1, len(answers))
    for a in answers:
        a.latency_s = per_query


def queries_from(frame: pd.DataFrame) -> list[Query]:
    """The ``Query`` list of a queries table (columns ``query_id``, ``question_id``, ``query``)."""
    missing = [c for c in ("query_id", "question_id", "query") if c not in frame.columns]
    if missing:
        raise ValueError(f"queries table lacks column(s) {missing}")
    if frame["query_id"].duplicated().any():
        dup = frame.loc[frame["query_id"].duplicated(), "query_id"].iloc[0]
        raise ValueError(f"queries table has duplicate query_id {dup!r}")
    return [Query(i, q, t) for i, q, t in zip(frame["query_id"], frame["question_id"], frame["query"])]


def run(methods: Mapping[str, Method], queries: pd.DataFrame, judge: Judge | None = None) -> pd.DataFrame:
    """Every method on the same queries, scored by one judge.

    Args:
        methods: name → method.
        queries: one row per query with ``query_id``, ``question_id``, ``query`` and the gold
            ``answers``; any other columns (condition, type ...) are carried along.
        judge: decides ``correct`` (default: ``NormalisedMatch``).

    Returns one row per (method, query): the query's columns, the ``Answer``'s fields (its text
    as ``answer``; the trace's keys as their own columns) and ``correct`` (an abstention is
    never correct).
    """
    judge = judge or NormalisedMatch()
    if "answers" not in queries.columns:
        raise ValueError("queries table lacks the gold 'answers' column that scoring needs")
    batch = queries_from(queries)
    frames = []
    for name, method in methods.items():
        answers = method.answer(batch)
        if [a.query_id for a in answers] != [q.id for q in batch]:
            raise RuntimeError(f"method {name!r} returned answers out of order or incomplete")
        table = answers_table(answers).drop(columns=["question_id"]).assign(method=name)
        frame = queries.reset_index(drop=True).merge(table, on="query_id", how="left", validate="1:1")
        verdicts = judge(list(frame["query"]), list(frame["answer"]), list(frame["answers"]))
        frame["correct"] = [float(ok and not abstained) for ok, abstained in zip(verdicts, frame["abstained"])]
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def answers_table(answers: Sequence[Answer]) -> pd.DataFrame:
    """One row per ``Answer``: its fields, the text as ``answer``, the trace's keys as columns."""
    rows = []
    for a in answers:
        row = asdict(a)
        trace = row.pop("trace")
        row["answer"] = row.pop("text")
        rows.append({**row, **trace})
    return pd.DataFrame(rows)
