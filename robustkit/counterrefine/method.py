"""CounterRefine: answer-conditioned counter-evidence, then a validated KEEP / REVISE step.

    draft     one retrieval call, k snippets for q, one reader call → a short draft answer
    retrieve  a second pass for {q, q ‖ draft} ∪ {draft alone, when the question asks who /
              where / when / how many}: k snippets each, merged in query order and de-duplicated
              (at most ``max_snippets``), remembering which query found each snippet
    refine    one call that must reply ``DECISION: KEEP|REVISE`` / ``ANSWER: …`` /
              ``EVIDENCE: <snippet ids or a quoted span>``, parsed strictly (a malformed reply is
              a KEEP, counted)
    validate  a REVISE is accepted only when its canonical answer occurs in the evidence it cites,
              differs from the draft and has the question's answer type (``validate.py``);
              otherwise the draft stands and the reason is recorded

The Table 4 ablations are this class with one part removed: ``second_pass="question"`` (the
second pass searches q alone, as deep as the full method's queries together, so it gets as many
snippets but none conditioned on the answer), ``second_pass="none"`` (reconsider over the draft's
own snippets: no new evidence), ``validator=False`` and ``canonicalise=False``. Every model call is
batched across questions and cached, so variants that share a prompt share its reply.
"""
from __future__ import annotations

import hashlib
import time
from typing import Sequence

import numpy as np

from robustkit.config import check_knob
from robustkit.counterrefine.config import CITABLE, DECODINGS
from robustkit.counterrefine.validate import (Refinement, canonical, parse_refinement, question_type,
                                              validate)
from robustkit.data.records import Corpus, Passage
from robustkit.methods import Answer, Query, check_queries, derived_identity, spread_latency
from robustkit.reader import READER_VERSION, answer_with_context
from robustkit.retrieval import search_for

REFINE_PROMPT = ("{snippets}\n\nQuestion: {question}\nDraft answer: {draft}\n\n"
                 "Check the draft answer against the numbered snippets. Reply with DECISION (KEEP "
                 "or REVISE), then ANSWER (a short name, date or number taken from a snippet), "
                 "then EVIDENCE (the snippet number in brackets).")
REFINE_PREFILL = "DECISION:"  # the reply starts in the format; the model writes the rest
# names the prompts in run manifests: an edited prompt never reuses old results
PROMPT_VERSION = hashlib.sha256(f"{REFINE_PROMPT}\n{REFINE_PREFILL}".encode()).hexdigest()[:12]
SECOND_PASSES = ("answer", "question", "none")


class CounterRefine:
    """CounterRefine over a frozen retriever — a ``Method``.

    Args:
        retriever: ``search(queries, k)``, or a ``ScopedRetriever`` (each question its own passages).
        generator: a ``robustkit.llm.Generator`` (the draft reader and the refiner).
        corpus: passage lookup.
        k: snippets per query; max_snippets: cap on the merged second-pass snippets.
        second_pass: "answer" (the method), "question" or "none" (ablations; see the module).
        decoding: "free" (one generation, the paper's) or "constrained" (the format is written
            by the decoder, the model fills the decision, answer and evidence; see ``refine``).
        revise_above: constrained decoding decides REVISE when P(REVISE) exceeds this (the
            pipeline sets it from training questions: ``calibrate_revise_threshold``).
        validator: validate a REVISE before accepting it; canonicalise: compare canonical forms
            (case, articles, punctuation, number and date forms) when validating.
        max_words: snippets are clipped to this many words in prompts (default: the scale's).
    """

    def __init__(self, retriever, generator, corpus: Corpus, *, k: int = 5, max_snippets: int = 15,
                 second_pass: str = "answer", validator: bool = True, canonicalise: bool = True,
                 decoding: str = "free", revise_above: float = 0.5, max_words: int | None = None,
                 draft_tokens: int = 24, refine_tokens: int = 40, name: str = "counterrefine"):
        check_knob("k", k, integer=True, low=1)
        check_knob("revise_above", revise_above, low=0, high=1)
        check_knob("max_snippets", max_snippets, integer=True, low=k)
        for knob, value in (("draft_tokens", draft_tokens), ("refine_tokens", refine_tokens)):
            check_knob(knob, value, integer=True, low=1)
        if second_pass not in SECOND_PASSES:
            raise ValueError(f"unknown second_pass {second_pass!r}; expected one of {list(SECOND_PASSES)}")
        if decoding not in DECODINGS:
            raise ValueError(f"unknown decoding {decoding!r}; expected one of {list(DECODINGS)}")
        if decoding == "constrained" and max_snippets > CITABLE:
            raise ValueError(f"constrained decoding cites one of at most {CITABLE} snippets; "
                             f"max_snippets is {max_snippets}")
        self.retriever, self.generator, self.corpus, self.decoding = retriever, generator, corpus, decoding
        self.k, self.max_snippets, self.second_pass = k, max_snippets, second_pass
        self.validator, self.canonicalise, self.name = validator, canonicalise, name
        self.revise_above = revise_above
        self.max_words = max_words or generator.scale.max_passage_words
        check_knob("max_words", self.max_words, integer=True, low=1)
        self.draft_tokens, self.refine_tokens = draft_tokens, refine_tokens

    def answer(self, queries: Sequence[Query]) -> list[Answer]:
        queries = check_queries(queries)
        start = time.perf_counter()
        texts, ids = [q.text for q in queries], [q.question_id for q in queries]
        drafted = self._retrieve(ids, texts, self.k)  # retrieval call 1
        drafts = answer_with_context(self.generator, texts, drafted, max_words=self.max_words,
                                     max_new_tokens=self.draft_tokens, desc="drafting")
        draft_s = (time.perf_counter() - start) / max(1, len(queries))  # Baseline-RAG's own cost
        second = [self.second_queries(q, d) for q, d in zip(texts, drafts)]
        snippets, found_by = self.second_pass_snippets(ids, texts, drafts, second, drafted)  # retrieval call 2
        replies, p_revise, refine_calls = self.refine(texts, drafts, snippets)
        empty = [not s for s in snippets]  # a plugged-in search backend may find nothing
        if any(empty):
            print(f"[robustkit] CounterRefine: {sum(empty)} of {len(queries)} questions got no snippets; "
                  "their drafts stand (validation 'no snippets')")
        answers = []
        for i, query in enumerate(queries):
            proposal = parse_refinement(replies[i])
            outcome = "no snippets" if empty[i] else self._outcome(texts[i], drafts[i], proposal, snippets[i])
            final = proposal.answer if outcome == "accepted" else drafts[i]
            answers.append(Answer(
                query.id, query.question_id, self.name, final, passage_ids=[p.id for p in snippets[i]],
                retrieval_calls=1 + (self.second_pass != "none"), model_calls=1 + refine_calls[i],
                trace={"draft": drafts[i], "draft_s": draft_s, "draft_ids": [p.id for p in drafted[i]],
                       "question_type": question_type(texts[i]), "queries": second[i],
                       "found_by": found_by[i], "reply": replies[i], "p_revise": p_revise[i],
                       "decision": proposal.decision, "malformed": proposal.error or None,
                       "proposed": proposal.answer or None, "evidence": proposal.evidence or None,
                       "validation": outcome, "changed": outcome == "accepted",
                       "second_pass": self.second_pass, "validator": self.validator,
                       "canonicalise": self.canonicalise}))
        spread_latency(answers, start)
        return answers

    def identity(self) -> dict:
        """What decides its answers (``methods.evaluate`` stages results under it): every
        constructor argument (``methods.derived_identity``) and its prompts."""
        return derived_identity(self, prompts={"reader": READER_VERSION, "refine": PROMPT_VERSION})

    def second_queries(self, question: str, draft: str) -> list[str]:
        """The second pass's queries: ``answer_conditioned_queries``, q alone for the "question"
        ablation, none for "none"."""
        if self.second_pass == "none":
            return []
        return [question] if self.second_pass == "question" else answer_conditioned_queries(question, draft)

    def second_pass_snippets(self, question_ids, questions, drafts, second, drafted):
        """The merged snippets per question and, per snippet, the indices of the queries that found
        it. One search call serves every query of every question. The "question" ablation
        searches q as deep as the full method's queries reach together (the same budget)."""
        if self.second_pass == "none":
            return [list(d) for d in drafted], [[[] for _ in d] for d in drafted]
        depth = [self.k * (len(answer_conditioned_queries(q, d)) if self.second_pass == "question" else 1)
                 for q, d in zip(questions, drafts)]
        flat_ids = [qid for qid, qs in zip(question_ids, second) for _ in qs]
        flat_depth = [n for n, qs in zip(depth, second) for _ in qs]
        flat = [q for qs in second for q in qs]
        runs = iter(zip(self._retrieve(flat_ids, flat, max(flat_depth, default=1)), flat_depth))
        snippets, found_by = [], []
        for queries in second:
            merged: dict[str, list[int]] = {}
            for j in range(len(queries)):
                passages, reach = next(runs)
                for passage in passages[:reach]:
                    merged.setdefault(passage.id, []).append(j)
            kept = list(merged)[:self.max_snippets]
            snippets.append([self.corpus[d] for d in kept])
            found_by.append([merged[d] for d in kept])
        return snippets, found_by

    def refine(self, questions, drafts, snippets) -> tuple[list[str], list[float | None], list[int]]:
        """One DECISION / ANSWER / EVIDENCE reply per question, P(REVISE) where the decoder knows
        it, and the model calls each reply cost.

        "free" decoding is the paper's: one generation, prefilled with "DECISION:", parsed later.
        "constrained" decoding writes the format itself and lets the model fill its slots: the
        decision is the generator's P(" REVISE") against P(" KEEP") after "DECISION:" (REVISE
        when above ``revise_above``), then — for a REVISE only — the answer line, then the cited
        snippet: the most probable of the shown snippets' ids after "EVIDENCE: [" (so at most
        ``CITABLE`` snippets). A KEEP's answer is the draft. A 135M model asked for the format in free
        decoding almost never writes it (notebook 06 measures how often), so ``tiny`` and
        ``small`` constrain it, as structured-output decoders do for larger models.
        """
        prompts = [[{"role": "user", "content": REFINE_PROMPT.format(
                        snippets=self._numbered(s), question=q, draft=d)}]
                   for q, d, s in zip(questions, drafts, snippets)]
        if self.decoding == "free":
            replies = self.generator.generate([p + [_reply(REFINE_PREFILL)] for p in prompts],
                                              max_new_tokens=self.refine_tokens, stop=(), desc="refining")
            return [REFINE_PREFILL + r for r in replies], [None] * len(prompts), [1] * len(prompts)
        decided = self.generator.option_probabilities([p + [_reply(REFINE_PREFILL)] for p in prompts],
                                                      options=(" KEEP", " REVISE"), desc="deciding")
        p_revise = [float(revise) for _, revise in decided]
        todo = [i for i, p in enumerate(p_revise) if p > self.revise_above and snippets[i]]
        head = f"{REFINE_PREFILL} REVISE\nANSWER:"
        answers = self.generator.generate([prompts[i] + [_reply(head)] for i in todo],
                                          max_new_tokens=self.refine_tokens, desc="revising")
        ids = [str(i) for i in range(1, CITABLE + 1)]  # one digit each: a single forward pass
        cited = self.generator.option_probabilities([prompts[i] + [_reply(f"{head} {a}\nEVIDENCE: [")]
                                                     for i, a in zip(todo, answers)], options=ids, desc="citing")
        cited = [1 + int(np.argmax(p[:len(snippets[i])])) for i, p in zip(todo, cited)]
        replies = [f"{REFINE_PREFILL} KEEP\nANSWER: {d}\nEVIDENCE: -" for d in drafts]
        calls = [1] * len(prompts)
        for i, a, e in zip(todo, answers, cited):
            replies[i], calls[i] = f"{head} {a}\nEVIDENCE: [{e}]", 3
        return replies, p_revise, calls

    def _outcome(self, question: str, draft: str, proposal: Refinement, snippets: Sequence[Passage]) -> str:
        """"accepted", "keep", "malformed: …" or the validator's reason for rejecting a REVISE."""
        if not self.validator:
            if proposal.error:
                return f"malformed: {proposal.error}"
            return "accepted" if proposal.decision == "REVISE" else "keep"
        verdict = validate(question, draft, proposal, [p.content for p in snippets],
                           canonicalise=self.canonicalise)
        return "accepted" if verdict.accepted else verdict.reason

    def _retrieve(self, question_ids, texts, k) -> list[list[Passage]]:
        hits = search_for(self.retriever, question_ids, texts, k) if texts else []
        return [[self.corpus[h.doc_id] for h in row] for row in hits]

    def _numbered(self, passages: Sequence[Passage]) -> str:
        return "\n".join(f"[{i}] {' '.join(p.content.split()[:self.max_words])}"
                         for i, p in enumerate(passages, 1)) or "(no snippets)"


def answer_conditioned_queries(question: str, draft: str) -> list[str]:
    """q and q ‖ draft, plus the draft alone when the question asks who / where / when / how many
    (its answer is then a name, a date or a number worth searching on its own). An empty or
    "unknown" draft conditions nothing: q alone."""
    if canonical(draft) in ("", "unknown"):
        return [question]
    queries = [question, f"{question} {draft}"]
    return queries + [draft] if question_type(question) != "other" else queries


def _reply(text: str) -> dict:
    return {"role": "assistant", "content": text}


def calibrate_revise_threshold(p_revise: Sequence[float], draft_correct: Sequence[float]) -> float:
    """The P(REVISE) above which a draft is revised, from *training* questions: revise as often
    as drafts are wrong there, the drafts the refiner doubts most first (their training
    share). A 135M refiner puts P(REVISE) far below 1/2 on every draft (2–13% on data/mini), so a
    fixed 1/2 would never revise; its ranking is what it knows, the rate is set from data."""
    p, correct = np.asarray(p_revise, dtype=float), np.asarray(draft_correct, dtype=float)
    if len(p) == 0 or len(p) != len(correct):
        raise ValueError(f"need one P(REVISE) per draft correctness, got {len(p)} and {len(correct)}")
    n_revise = int(round((1.0 - correct.mean()) * len(p)))
    if n_revise == 0:
        return 1.0
    return float(np.sort(p)[::-1][n_revise - 1]) - 1e-9  # the n_revise most doubted drafts pass
