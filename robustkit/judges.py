"""Answer checks shared by the methods: is a predicted answer right?

Every judge is called on batches, ``judge(questions, predictions, gold answer lists)`` → one
verdict per prediction, and has a ``name`` that artifact manifests record.

- ``NormalisedMatch``: a gold alias occurs, as whole words, in the SQuAD-normalised prediction
  (the usual accuracy for chatty generators that wrap the answer in a sentence).
- ``LLMJudge``: a generator asked whether two answers mean the same (useful with a strong model
  only: SmolLM2-135M answers yes/no at chance).
- ``MatchThenJudge``: the normalised match, consulting a second judge only where the match
  rejects a non-empty, non-"unknown" answer.

Adjudicators answer a different question — does a passage *contradict* an answer? — and score
each (question, answer, passages) triple with one number per passage in [0, 1] (FVA-RAG takes the
max over its anti-context):

- ``NLIAdjudicator``: P(contradiction | premise = passage, hypothesis = question + answer) from an
  NLI cross-encoder (``robustkit.nli``: the hub's DeBERTa on Colab, the kit's own offline).
- ``AnswerConflict``: a deterministic second opinion for short answers — a passage sentence that
  repeats most of the answer's content words *and* negates or debunks them.
"""
from __future__ import annotations

import re
from typing import Protocol, Sequence

import numpy as np

from robustkit.data.records import normalize_answer
from robustkit.metrics import substring_match
from robustkit.retrieval import split_per_query


class Judge(Protocol):
    name: str

    def __call__(self, questions: Sequence[str], predictions: Sequence[str],
                 answer_lists: Sequence[Sequence[str]]) -> list[bool]: ...


class NormalisedMatch:
    """A gold alias occurs as whole words in the normalised prediction."""

    name = "normalised-match"

    def __call__(self, questions, predictions, answer_lists) -> list[bool]:
        _check_lengths(questions, predictions, answer_lists)
        return [bool(substring_match(p, answers)) for p, answers in zip(predictions, answer_lists)]


class LLMJudge:
    """A batched LLM judge: does the proposed answer mean the same as the gold answer?"""

    def __init__(self, generator):
        self.generator = generator
        self.name = f"llm-judge:{generator.model_id}"

    def __call__(self, questions, predictions, answer_lists) -> list[bool]:
        _check_lengths(questions, predictions, answer_lists)
        prompts = [f"Question: {q}\nGold answer: {answers[0]}\nProposed answer: {p}\n"
                   "Does the proposed answer mean the same as the gold answer? Reply yes or no."
                   for q, p, answers in zip(questions, predictions, answer_lists)]
        replies = self.generator.generate(prompts, max_new_tokens=3, progress=False, desc="judging")
        return [r.strip().lower().startswith("yes") for r in replies]


class MatchThenJudge:
    """The normalised match first; ``second`` only decides what the match rejected."""

    def __init__(self, second: Judge):
        self.second, self.match = second, NormalisedMatch()
        self.name = f"normalised-match+{second.name}"

    def __call__(self, questions, predictions, answer_lists) -> list[bool]:
        verdicts = self.match(questions, predictions, answer_lists)
        undecided = [i for i, (ok, p) in enumerate(zip(verdicts, predictions))
                     if not ok and p and "unknown" not in p.lower()]
        if undecided:
            second = self.second([questions[i] for i in undecided], [predictions[i] for i in undecided],
                                 [answer_lists[i] for i in undecided])
            for i, verdict in zip(undecided, second):
                verdicts[i] = bool(verdict)
        return verdicts


class Adjudicator(Protocol):
    name: str

    def contradiction(self, questions: Sequence[str], answers: Sequence[str],
                      passages: Sequence[Sequence[str]]) -> list[np.ndarray]: ...

    def identity(self) -> dict:
        """What decides its scores, for the manifests of staged results."""
        ...


class NLIAdjudicator:
    """An NLI model's P(contradiction) that each passage refutes "question + answer".

    The answer is read in the context of its question (a bare "No" or "arthritis" is no claim):
    the hypothesis is ``hypothesis.format(question=..., answer=...)``. Passages are clipped to
    ``max_words`` so the pair fits the model's window.
    """

    def __init__(self, classifier, *, hypothesis: str = "{question} {answer}", max_words: int = 60):
        from robustkit.config import check_knob

        check_knob("max_words", max_words, integer=True, low=1)
        if "{answer}" not in hypothesis:
            raise ValueError(f"the hypothesis template {hypothesis!r} must contain '{{answer}}'")
        self.classifier, self.hypothesis, self.max_words = classifier, hypothesis, max_words
        self.name = f"nli:{classifier.name}"

    def identity(self) -> dict:
        return {"adjudicator": "nli", "model": self.classifier.identity(), "hypothesis": self.hypothesis,
                "max_words": self.max_words}

    def contradiction(self, questions, answers, passages):
        _check_triples(questions, answers, passages)
        premises, hypotheses = [], []
        for q, a, docs in zip(questions, answers, passages):
            claim = self.hypothesis.format(question=q.strip(), answer=a.strip())
            for d in docs:
                premises.append(" ".join(d.split()[:self.max_words]))
                hypotheses.append(claim)
        probs = self.classifier.probabilities(premises, hypotheses) if premises else np.zeros((0, 3))
        flat = probs[:, 2].astype(np.float32)  # columns: entailment, neutral, contradiction
        return split_per_query(flat, passages)


NEGATION_CUES = frozenset({"not", "no", "never", "myth", "false", "untrue", "misconception", "wrong",
                           "doesnt", "dont", "isnt", "arent", "wasnt", "cannot", "cant", "nothing",
                           "neither", "nor", "debunked", "incorrect"})
STOPWORDS = frozenset("a an the of in on at to for by with from and or is are was were be been "
                      "it its this that these those you your they their he she his her as do does "
                      "did will would can could should may might what which who whom whose when "
                      "where why how if then than there here".split())


class AnswerConflict:
    """A deterministic check: some passage sentence holds at least ``overlap`` of the answer's
    content words and a negation or debunking cue (1.0), else 0.0.

    Meant for short answers, as a second opinion beside the NLI model: it has no notion of
    meaning, so it misses paraphrased refutations and flags a sentence that negates something
    else. An answer with no content word ("unknown") conflicts with nothing.
    """

    name = "answer-conflict"

    def __init__(self, overlap: float = 0.5):
        from robustkit.config import check_knob

        check_knob("overlap", overlap, low=0, high=1, low_open=True)
        self.overlap = overlap

    def identity(self) -> dict:
        return {"adjudicator": self.name, "overlap": self.overlap}

    def contradiction(self, questions, answers, passages):
        _check_triples(questions, answers, passages)
        return [np.array([self._conflicts(a, d) for d in docs], dtype=np.float32)
                for a, docs in zip(answers, passages)]

    def _conflicts(self, answer: str, passage: str) -> float:
        claim = _content_words(answer)
        if not claim:
            return 0.0
        for sentence in re.split(r"(?<=[.!?])\s+", passage):
            words = set(normalize_answer(sentence.replace("'", "")).split())
            if words & NEGATION_CUES and len(claim & words) >= self.overlap * len(claim):
                return 1.0
        return 0.0


def _content_words(text: str) -> set[str]:
    words = set(normalize_answer(text.replace("'", "")).split())
    return words - STOPWORDS - NEGATION_CUES - {"unknown"}


def _check_triples(questions, answers, passages) -> None:
    for name, value in (("questions", questions), ("answers", answers), ("passages", passages)):
        if isinstance(value, str):
            raise TypeError(f"{name} must be a list, not one string")
    if not len(questions) == len(answers) == len(passages):
        raise ValueError(f"{len(questions)} questions, {len(answers)} answers and {len(passages)} "
                         "passage lists: they must align one to one")
    for i, docs in enumerate(passages):
        if isinstance(docs, str):
            raise TypeError(f"passages[{i}] is one string; each entry must be a list of passage texts")


def _check_lengths(questions, predictions, answer_lists) -> None:
    if not len(questions) == len(predictions) == len(answer_lists):
        raise ValueError(f"{len(questions)} questions, {len(predictions)} predictions and "
                         f"{len(answer_lists)} answer lists: they must align one to one")
