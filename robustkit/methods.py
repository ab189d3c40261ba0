"""The one interface every method implements, and the tidy results table built from it.

A method answers a batch of queries the same way, whichever paper it comes from::

    answers = method.answer(queries)        # list[Query] -> list[Answer], in order

so baselines, CoRM-RAG, FVA-RAG, CounterRefine and AlignRAG line up on the same questions
(notebook 08). A ``Query`` carries only what a method may see — never the gold answer; scoring
happens afterwards, in ``run``, with one judge for every method, into one tidy table (one row
per method and query, the method's trace a dict in one column). ``evaluate`` is ``run`` staged:
each method's rows an artifact with a manifest of what decided them (``Method.identity()``).
Every method of the four papers scores through it (FVA-RAG with TruthfulQA's rule as its judge;
AlignRAG's per-round rows are read from its traces).
"""
from __future__ import annotations

import inspect
import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Mapping, Protocol, Sequence

import numpy as np
import pandas as pd

from robustkit.artifacts import atomic_write_text, digest, is_current, json_ready, stage
from robustkit.data.records import read_jsonl
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

    def identity(self) -> dict:
        """What decides its answers — models, checkpoints, prompts, corpus, knobs — for the
        manifests of staged results (``evaluate``)."""
        ...


def derived_identity(method, **extra) -> dict:
    """What decides a method's answers, derived from its constructor rather than kept by hand: its
    class and every argument its ``__init__`` takes (those passed on to a parent's ``__init__``
    through ``**kwargs`` too), read back from the attribute of the same name — a component
    (retriever, reranker, generator, adjudicator, critic, corpus …) as its own ``identity()``, a
    knob as its value — then ``extra`` (its prompts' versions). A knob is part of the identity the
    moment the constructor takes it, so ``evaluate`` never reuses results it did not decide; an
    argument the method does not keep under its own name is refused, named."""
    identity = {"method": type(method).__name__}
    for name in _constructor_arguments(type(method)):
        if not hasattr(method, name):
            raise TypeError(f"{type(method).__name__} does not keep its constructor argument {name!r} as "
                            f"self.{name}: keep it under that name, so that its identity records it")
        identity[name] = _identity_of(getattr(method, name), f"{type(method).__name__}.{name}")
    return identity | extra


def _constructor_arguments(cls) -> list[str]:
    names: list[str] = []
    for klass in cls.__mro__[:-1]:  # object's __init__ takes nothing
        if "__init__" not in vars(klass):
            continue
        parameters = inspect.signature(vars(klass)["__init__"]).parameters.values()
        names += [p.name for p in parameters if p.name != "self" and p.name not in names
                  and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if not any(p.kind is p.VAR_KEYWORD for p in parameters):
            break
    return names


def _identity_of(value, where: str):
    if callable(getattr(value, "identity", None)):
        return value.identity()
    if isinstance(value, np.generic):  # a threshold calibrated with numpy
        return value.item()
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)):
        return [_identity_of(v, where) for v in value]
    raise TypeError(f"{where} ({type(value).__name__}) has no identity(): give it one, so that staged "
                    "results can say what decided them")


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
    as ``answer``, its ``trace`` a dict) and ``correct`` (an abstention is never correct).
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


def evaluate(methods: Mapping[str, Method], queries: pd.DataFrame, folder: str | Path,
             judge: Judge | None = None) -> pd.DataFrame:
    """``run``, staged: each method's scored rows are one artifact under ``folder``, with a
    manifest recording what decided them — the method's ``identity()``, the queries table (gold
    answers and every carried column), the judge — and named by a digest of that, so that the same method over other
    queries or with other knobs (another M, a subset) is another artifact, not an overwrite.
    A finished method is reused; an interrupted run resumes at the first unfinished method.
    Rows as ``run`` returns them, after a round trip through JSON (lists, not tuples or arrays),
    on the first run as on every reuse."""
    judge = judge or NormalisedMatch()
    frames = []
    for name, method in methods.items():
        path, inputs = _artifact(name, method, queries, folder, judge)

        def build(out: Path, scratch: Path, name=name, method=method) -> dict:
            rows = run({name: method}, queries, judge).to_dict("records")
            atomic_write_text(out, "".join(json.dumps(json_ready(r), ensure_ascii=False) + "\n" for r in rows))
            return {"rows": len(rows), "correct": sum(r["correct"] for r in rows)}

        frames.append(pd.DataFrame(stage(path, inputs, build, read_jsonl, trains=False)))
    return pd.concat(frames, ignore_index=True)


def pending(methods: Mapping[str, Method], queries: pd.DataFrame, folder: str | Path,
            judge: Judge | None = None) -> list[str]:
    """The names of ``methods`` whose results ``evaluate`` would compute (none staged under
    ``folder`` for these queries and this judge, or a stale one). A caller that can batch several
    methods' model calls in one pass (AlignRAG's refiners share theirs) runs that pass for these
    first; ``evaluate`` then replays it from the call cache."""
    judge = judge or NormalisedMatch()
    return [name for name, method in methods.items() if not is_current(*_artifact(name, method, queries, folder, judge))]


def _artifact(name: str, method: Method, queries: pd.DataFrame, folder: str | Path, judge: Judge) -> tuple[Path, dict]:
    """Where ``evaluate`` stages a method's rows, and the inputs its manifest records."""
    if not callable(getattr(method, "identity", None)):
        raise TypeError(f"method {name!r} ({type(method).__name__}) has no identity(): results that "
                        "cannot say what decided them are not staged; score it with methods.run")
    asked = json_ready(queries.to_dict("list"))  # every column: the rows carry them all
    inputs = {"method": name, "identity": method.identity(), "queries": digest(asked), "judge": judge.name}
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return Path(folder) / f"{slug}-{digest(inputs)[:10]}.jsonl", inputs


def answers_table(answers: Sequence[Answer]) -> pd.DataFrame:
    """One row per ``Answer``: its fields, the text as ``answer``, the trace as one ``trace``
    column of dicts (every method's intermediate results stored the same way)."""
    rows = []
    for a in answers:
        row = asdict(a)
        row["answer"] = row.pop("text")
        rows.append(row)
    return pd.DataFrame(rows)


def first_answer(trace: dict) -> str | None:
    """The answer a method gave before it intervened: FVA-RAG's and CounterRefine's draft,
    AlignRAG's and Self-Refine's round-0 answer; None for a method with a single answer."""
    if "draft" in trace:
        return trace["draft"]
    if trace.get("trajectory"):
        return trace["trajectory"][0]["answer"]
    return None


def trace_table(answer: Answer, steps: Sequence[str]) -> pd.DataFrame:
    """``steps`` of an answer's trace as a two-column table to read top to bottom: one row per
    step, a list step one row per item (``kill_queries [1]``, ``[2]`` …), scores rounded."""
    if missing := [s for s in steps if s not in answer.trace]:
        raise KeyError(f"{answer.method}'s trace has no step {missing}; its steps are {list(answer.trace)}")
    rows = []
    for step in steps:
        value = answer.trace[step]
        listed = isinstance(value, (list, tuple)) and len(value) > 0
        for i, item in enumerate(value if listed else [value], 1):
            label = f"{step} [{i}]" if listed else step
            rows.append({"step": label, "value": round(item, 3) if isinstance(item, float) else item})
    return pd.DataFrame(rows).set_index("step")
