"""Answer checks shared by the methods: is a predicted answer right?

Every judge is called on batches, ``judge(questions, predictions, gold answer lists)`` → one
verdict per prediction, and has a ``name`` that artifact manifests record.

- ``NormalisedMatch``: a gold alias occurs, as whole words, in the SQuAD-normalised prediction
  (the usual accuracy for chatty generators that wrap the answer in a sentence).
- ``LLMJudge``: a generator asked whether two answers mean the same (useful with a strong model
  only: SmolLM2-135M answers yes/no at chance).
- ``MatchThenJudge``: the normalised match, consulting a second judge only where the match
  rejects a non-empty, non-"unknown" answer.

FVA-RAG's NLI adjudicator will live beside them.
"""
from __future__ import annotations

from typing import Protocol, Sequence

from robustkit.metrics import substring_match


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


def _check_lengths(questions, predictions, answer_lists) -> None:
    if not len(questions) == len(predictions) == len(answer_lists):
        raise ValueError(f"{len(questions)} questions, {len(predictions)} predictions and "
                         f"{len(answer_lists)} answer lists: they must align one to one")
