"""AlignRAG's test-time loop, critique-driven alignment (CDA), and the prompts it shares with
training.

    y₀ = generator(q, D);   for t < T:  Δₜ = critic(q, D, yₜ),  yₜ₊₁ = generator(q, D, yₜ ⊕ Δₜ)

A rationale y is one reasoning sentence and a short answer. A 135M generator asked for both in
one reply rarely writes the answer line (5 of 12 in a probe on data/mini training questions,
repeating "Answer:" when it did), so the decoder writes the format and the model fills it: one
call continues "Reasoning:", a second reads the documents and that reasoning and continues
"Answer:" (7 of 16 training answers right, against 5 continuing the reasoning's own reply). A critique always
continues the target format's first head, so every critic — Self-Refine's generator, the frozen
critic and the trained ones — answers in the shape the trained critic learned.

``align`` runs several refiners together on the same questions and documents: one retrieval call,
one y₀ for all of them (vanilla reasoning RAG is y₀), then per round one critique call per critic
model and one generator call for every refiner's next rationale. The whole trajectory is kept in
each ``Answer``'s trace.
"""
from __future__ import annotations

import hashlib
import time
from typing import Sequence

from robustkit.alignrag.critique import CRITIQUE_HEAD, Rationale
from robustkit.data import Corpus, Passage
from robustkit.methods import Answer, Query, check_queries, derived_identity, spread_latency
from robustkit.reader import clip_words
from robustkit.retrieval import search_for

SELF = "self"  # the critic of Self-Refine: the generator, asked about its own reasoning

REASON = ("{documents}\n\nQuestion: {question}\nIn one sentence, say which document answers the question "
          "and what it says.")
REFINE = ("{documents}\n\nQuestion: {question}\nPrevious reasoning: {reasoning}\nPrevious answer: {answer}\n"
          "Feedback: {critique}\nUsing the documents and the feedback, reason again in one sentence.")
CRITIC = ("{documents}\n\nQuestion: {question}\nRationale: {reasoning}\nAnswer: {answer}\nCritique the "
          "rationale against the documents: say what is wrong, then write a better rationale.")
SELF_FEEDBACK = ("{documents}\n\nQuestion: {question}\nYour reasoning: {reasoning}\nYour answer: {answer}\n"
                 "Give feedback on your reasoning, then write a better one.")
STRONG = ("{documents}\n\nQuestion: {question}\nThe correct answer is {gold}. In one sentence, explain "
          "which document supports it and how.")
CLOSED_BOOK = "Question: {question}\nIn one sentence, recall what you know that answers the question."
ANSWER = ("{documents}Reasoning: {reasoning}\nUsing the {sources}, answer in at most 10 words, or say 'unknown': "
          "{question}?")
# names the prompts in artifact manifests: an edited prompt never reuses old answers
PROMPT_VERSION = hashlib.sha256("\x00".join(
    (REASON, REFINE, CRITIC, SELF_FEEDBACK, STRONG, CLOSED_BOOK, ANSWER, CRITIQUE_HEAD)).encode()).hexdigest()[:12]


def documents_block(docs: Sequence[Passage], max_words: int) -> str:
    """The documents as the prompts show them: numbered from 1, each clipped to ``max_words``."""
    return "\n".join(f"[{i}] {clip_words(d.content, max_words)}" for i, d in enumerate(docs, 1))


def critic_prompt(question: str, docs: Sequence[Passage], y: Rationale, max_words: int, *,
                  template: str = CRITIC) -> list[dict]:
    """The critic's user message (the same at training and test time); ``template`` = SELF_FEEDBACK
    for the generator's own feedback (Self-Refine, and the weak model's self-critique)."""
    return [{"role": "user", "content": template.format(documents=documents_block(docs, max_words),
                                                        question=question, reasoning=y.reasoning, answer=y.answer)}]


def reason(generator, messages: Sequence[list[dict]], questions: Sequence[str], blocks: Sequence[str] | None, *,
           rationale_tokens: int, answer_tokens: int, desc: str = "reasoning") -> list[Rationale]:
    """One rationale per user message: the reasoning sentence, then the answer the generator reads
    off the documents (``blocks``; None for closed book) and that reasoning — two batched calls."""
    reasonings = generator.generate([[*m, {"role": "assistant", "content": "Reasoning:"}] for m in messages],
                                    max_new_tokens=rationale_tokens, desc=desc)
    blocks = blocks if blocks is not None else [None] * len(messages)
    answers = generator.generate([[{"role": "user", "content": answer_prompt(b, q, r)},
                                   {"role": "assistant", "content": "Answer:"}]
                                  for b, q, r in zip(blocks, questions, reasonings)],
                                 max_new_tokens=answer_tokens, desc=f"{desc}: answers")
    return [Rationale(r, a) for r, a in zip(reasonings, answers)]


def answer_prompt(block: str | None, question: str, reasoning: str) -> str:
    """The answer step's message: the documents (if any), the reasoning, the short-answer ask."""
    return ANSWER.format(documents=f"{block}\n\n" if block else "", reasoning=reasoning, question=question.rstrip("?"),
                         sources="documents and the reasoning" if block else "reasoning")


def critique(critic, messages: Sequence[list[dict]], *, tokens: int, desc: str = "critiquing") -> list[str]:
    """One critique per user message, continuing the target format's first head."""
    replies = critic.generate([[*m, {"role": "assistant", "content": CRITIQUE_HEAD}] for m in messages],
                              max_new_tokens=tokens, desc=desc)
    return [f"{CRITIQUE_HEAD} {reply}" for reply in replies]


class AlignRAG:
    """Reasoning RAG refined by a critic for ``iterations`` rounds (a ``Method``).

    Args:
        retriever, corpus: the frozen search (``k`` documents per question, one call for all).
        generator: writes y₀ and every refinement.
        critic: a ``Generator`` (the critic LM, frozen or trained) that reads ``CRITIC`` prompts,
            or ``SELF`` — the generator reading ``SELF_FEEDBACK`` prompts (Self-Refine).
        iterations: T ≥ 0 rounds; 0 is vanilla reasoning RAG (y₀ alone).
    """

    def __init__(self, retriever, generator, corpus: Corpus, *, critic=SELF, iterations: int = 3, k: int = 3,
                 max_words: int = 40, rationale_tokens: int = 40, answer_tokens: int = 12,
                 critique_tokens: int = 64, name: str = "alignrag"):
        if iterations < 0:
            raise ValueError(f"iterations (T) must be >= 0, got {iterations}")
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.retriever, self.generator, self.corpus, self.critic = retriever, generator, corpus, critic
        self.iterations, self.k, self.max_words, self.name = iterations, k, max_words, name
        self.rationale_tokens, self.answer_tokens = rationale_tokens, answer_tokens
        self.critique_tokens = critique_tokens

    @property
    def budgets(self) -> dict:
        """The decoding budgets of a rationale and its answer line (``reason``'s keywords)."""
        return dict(rationale_tokens=self.rationale_tokens, answer_tokens=self.answer_tokens)

    def answer(self, queries: Sequence[Query]) -> list[Answer]:
        return align([self], queries)[self.name]

    def identity(self) -> dict:
        """What decides its answers: every constructor argument (``methods.derived_identity``) —
        the critic among them, Self-Refine's the generator itself (``SELF``) — and the prompts."""
        return derived_identity(self, prompts=PROMPT_VERSION)


def align(refiners: Sequence[AlignRAG], queries: Sequence[Query]) -> dict[str, list[Answer]]:
    """Run refiners that share a generator, retriever, corpus and k on the same queries together:
    one retrieval call, one shared y₀, then per round one critique call per distinct critic and
    one generator call for all refiners. Returns each refiner's answers by name."""
    if not refiners:
        return {}
    queries = check_queries(queries)
    first = refiners[0]
    shared = ("retriever", "generator", "corpus", "k", "max_words", "budgets")
    for other in refiners[1:]:
        if any(getattr(other, a) != getattr(first, a) for a in shared):
            raise ValueError(f"refiners {first.name!r} and {other.name!r} differ in {shared}: run them apart")
    if len({r.name for r in refiners}) < len(refiners):
        raise ValueError("refiners must have distinct names")
    start = time.perf_counter()
    hits = search_for(first.retriever, [q.question_id for q in queries], [q.text for q in queries], first.k)
    docs = [[first.corpus[h.doc_id] for h in row] for row in hits]
    block = [documents_block(d, first.max_words) for d in docs]
    y0 = reason(first.generator, [[{"role": "user", "content": REASON.format(documents=b, question=q.text)}]
                                  for b, q in zip(block, queries)], [q.text for q in queries], block,
               **first.budgets, desc="y0")
    steps = {r.name: [[{"iteration": 0, "reasoning": y.reasoning, "answer": y.answer, "critique": None}]
                      for y in y0] for r in refiners}
    current = {r.name: list(y0) for r in refiners}
    for t in range(1, max(r.iterations for r in refiners) + 1):
        active = [r for r in refiners if r.iterations >= t]
        critiques = _critiques(active, queries, docs, current)
        messages, owners = [], []
        for r in active:
            for i, (q, y) in enumerate(zip(queries, current[r.name])):
                messages.append([{"role": "user", "content": REFINE.format(
                    documents=block[i], question=q.text, reasoning=y.reasoning, answer=y.answer,
                    critique=critiques[r.name][i])}])
                owners.append((r.name, i))
        refined = reason(first.generator, messages, [queries[i].text for _, i in owners],
                         [block[i] for _, i in owners], **first.budgets, desc=f"refining, round {t}")
        for (name, i), y in zip(owners, refined):
            current[name][i] = y
            steps[name][i].append({"iteration": t, "reasoning": y.reasoning, "answer": y.answer,
                                   "critique": critiques[name][i]})
    out = {}
    for r in refiners:
        answers = [Answer(q.id, q.question_id, r.name, y.answer, passage_ids=[d.id for d in ds], retrieval_calls=1,
                          model_calls=2 + 3 * r.iterations,
                          trace={"trajectory": trajectory, "critic": _critic_name(r.critic)})
                   for q, y, ds, trajectory in zip(queries, current[r.name], docs, steps[r.name])]
        spread_latency(answers, start)  # the refiners share their calls, so each gets the batch's time
        out[r.name] = answers
    return out


def _critiques(active, queries, docs, current) -> dict[str, list[str]]:
    """This round's critiques for every active refiner: one batched call per distinct critic model
    (Self-Refine's generator and the frozen critic share weights, so they share a call)."""
    by_model: dict[str, list] = {}
    for r in active:
        model = r.generator if r.critic == SELF else r.critic
        template = SELF_FEEDBACK if r.critic == SELF else CRITIC
        prompts = [critic_prompt(q.text, d, y, r.max_words, template=template)
                   for q, d, y in zip(queries, docs, current[r.name])]
        by_model.setdefault(model.model_id, [model, []])[1].append((r, prompts))
    out = {}
    for model_id, (model, jobs) in by_model.items():
        flat = [p for _, prompts in jobs for p in prompts]
        replies = critique(model, flat, tokens=jobs[0][0].critique_tokens, desc=f"critiquing ({model_id})")
        for j, (r, prompts) in enumerate(jobs):
            out[r.name] = replies[j * len(queries):(j + 1) * len(queries)]
    return out


def _critic_name(critic) -> str:
    return "the generator itself" if critic == SELF else critic.model_id


class ChainOfThought:
    """Chain of thought without retrieval: recall, then answer (the closed-book baseline)."""

    def __init__(self, generator, *, rationale_tokens: int = 40, answer_tokens: int = 12,
                 name: str = "cot"):
        self.generator, self.name = generator, name
        self.rationale_tokens, self.answer_tokens = rationale_tokens, answer_tokens

    @property
    def budgets(self) -> dict:
        """The decoding budgets of the recall and its answer line (``reason``'s keywords)."""
        return dict(rationale_tokens=self.rationale_tokens, answer_tokens=self.answer_tokens)

    def answer(self, queries: Sequence[Query]) -> list[Answer]:
        queries = check_queries(queries)
        start = time.perf_counter()
        ys = reason(self.generator, [[{"role": "user", "content": CLOSED_BOOK.format(question=q.text)}]
                                     for q in queries], [q.text for q in queries], None, **self.budgets,
                    desc="closed book")
        answers = [Answer(q.id, q.question_id, self.name, y.answer, model_calls=2,
                          trace={"trajectory": [{"iteration": 0, "reasoning": y.reasoning, "answer": y.answer,
                                                 "critique": None}]})
                   for q, y in zip(queries, ys)]
        spread_latency(answers, start)
        return answers

    def identity(self) -> dict:
        return derived_identity(self, prompts=PROMPT_VERSION)
