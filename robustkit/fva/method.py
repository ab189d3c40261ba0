"""FVA-RAG: treat the first answer as a hypothesis and try to falsify it.

    draft       retrieve k passages for q (retrieval call 1) and read them → A_draft
    falsify     the generator writes m kill queries from (q, A_draft) aimed at negations,
                retractions, failure cases and refutations; the m queries share retrieval call 2:
                each retrieves k, their rankings are fused by reciprocal rank and the top k form
                the anti-context D_neg (so the budget is 2 calls × k passages, as for every method)
    adjudicate  s = max over d in D_neg of the adjudicator's contradiction score of
                (d, q + A_draft); the draft is falsified iff s >= τ
    revise      a falsified draft is rewritten from q, D_pos and D_neg under the paper's three
                instructions (acknowledge, ground in the counter-evidence, stay conservative)

Every model call is batched across the queries and cached by the generator. The ``Answer`` trace
keeps each step, so notebook 05's explorer can replay a question.
"""
from __future__ import annotations

import hashlib
import re
import time
from typing import Sequence

import numpy as np

from robustkit.config import check_knob
from robustkit.data.records import Corpus, Passage
from robustkit.methods import Answer, Query, check_queries, derived_identity, spread_latency
from robustkit.reader import READER_VERSION, answer_with_context
from robustkit.retrieval import top_passages

KILL_PROMPT = ("Question: {question}\nProposed answer: {answer}\n\nWrite {m} short search queries "
               "that would find evidence that the proposed answer is wrong: negations, "
               "retractions, failure cases, refutations. One query per line.")
# when the generator writes fewer than m usable kill queries, these fill the gap (counted)
KILL_TEMPLATES = ("{answer} is false", "{question} myth misconception", "evidence against {answer}")
REVISION_PROMPT = ("Evidence for the draft:\n{positive}\n\nCounter-evidence:\n{negative}\n\n"
                   "Question: {question}\nDraft answer: {answer}\n\nThe counter-evidence "
                   "contradicts the draft answer. Acknowledge that the draft is invalidated, "
                   "ground your corrected answer in the counter-evidence, and if the evidence is "
                   "not enough to be sure, answer conservatively. Answer in at most 15 words.")
REVISION_PREFILL = "The draft answer was invalidated. Corrected answer:"
# names the prompts in run logs and manifests: an edited prompt never reuses old results
PROMPT_VERSION = hashlib.sha256("\n".join(
    (KILL_PROMPT, *KILL_TEMPLATES, REVISION_PROMPT, REVISION_PREFILL)).encode()).hexdigest()[:12]
RRF_K = 60  # reciprocal-rank fusion constant (Cormack et al., 2009)


def is_falsified(max_contradiction, has_anti_context, tau: float) -> np.ndarray:
    """FVA-RAG's verdict rule, elementwise: falsified iff there is an anti-context and its max
    contradiction is >= τ (a draft with nothing to contradict it stands)."""
    return np.asarray(has_anti_context, dtype=bool) & (np.asarray(max_contradiction, dtype=float) >= tau)


class FVARAG:
    """FVA-RAG over a frozen retriever and corpus — a ``Method``.

    Args:
        retriever: ``search(queries, k)``; the same frozen one for the draft and the kill queries.
        generator: a ``robustkit.llm.Generator`` (drafts, kill queries, revisions).
        corpus: passage lookup.
        adjudicator: a ``robustkit.judges.Adjudicator`` (``contradiction(questions, answers,
            passage lists)`` → one score per passage).
        k: passages per retrieval call; m: kill queries per draft; tau: falsification threshold.
        max_words: passages are clipped to this many words in prompts (default: the scale's).
    """

    name = "fva-rag"

    def __init__(self, retriever, generator, corpus: Corpus, adjudicator, *, k: int = 3, m: int = 3,
                 tau: float = 0.5, max_words: int | None = None, draft_tokens: int = 24,
                 kill_tokens: int = 40, revision_tokens: int = 32):
        check_knob("k", k, integer=True, low=1)
        check_knob("m (kill queries)", m, integer=True, low=1)
        check_knob("tau", tau, low=0, high=1)
        for name, value in (("draft_tokens", draft_tokens), ("kill_tokens", kill_tokens),
                            ("revision_tokens", revision_tokens)):
            check_knob(name, value, integer=True, low=1)
        self.retriever, self.generator, self.corpus, self.adjudicator = retriever, generator, corpus, adjudicator
        self.k, self.m, self.tau = k, m, tau
        self.max_words = max_words or generator.scale.max_passage_words
        check_knob("max_words", self.max_words, integer=True, low=1)
        self.draft_tokens, self.kill_tokens, self.revision_tokens = draft_tokens, kill_tokens, revision_tokens

    def answer(self, queries: Sequence[Query]) -> list[Answer]:
        queries = check_queries(queries)
        start = time.perf_counter()
        texts = [q.text for q in queries]
        positive = top_passages(self.retriever, self.corpus, texts, self.k)  # call 1
        drafts = answer_with_context(self.generator, texts, positive, max_words=self.max_words,
                                     max_new_tokens=self.draft_tokens, desc="drafting")
        kill, templated = self.kill_queries(texts, drafts)
        negative = self.anti_context(kill)  # call 2, shared by the m kill queries
        scores = self.adjudicator.contradiction(texts, drafts, [[p.content for p in docs] for docs in negative])
        worst = [float(s.max()) if len(s) else 0.0 for s in scores]
        falsified = is_falsified(worst, [bool(docs) for docs in negative], self.tau).tolist()
        todo = [i for i, f in enumerate(falsified) if f]
        revised = dict(zip(todo, self.revise([texts[i] for i in todo], [drafts[i] for i in todo],
                                             [positive[i] for i in todo], [negative[i] for i in todo])))
        answers = []
        for i, query in enumerate(queries):
            verdict = "falsified" if falsified[i] else ("robust" if negative[i] else "no anti-context")
            answers.append(Answer(
                query.id, query.question_id, self.name, revised.get(i, drafts[i]),
                passage_ids=[p.id for p in positive[i]], retrieval_calls=2,
                model_calls=2 + falsified[i],
                trace={"draft": drafts[i], "kill_queries": kill[i], "kill_query_templates": templated[i],
                       "anti_context_ids": [p.id for p in negative[i]],
                       "contradiction": [float(x) for x in scores[i]], "max_contradiction": worst[i],
                       "verdict": verdict, "revision": revised.get(i), "adjudicator": self.adjudicator.name,
                       "adjudicator_calls": len(negative[i]), "tau": self.tau}))
        spread_latency(answers, start)
        return answers

    def identity(self) -> dict:
        """What decides its answers (``methods.evaluate`` stages results under it): every
        constructor argument (``methods.derived_identity``) and its prompts."""
        return derived_identity(self, prompts={"reader": READER_VERSION, "fva": PROMPT_VERSION})

    def kill_queries(self, questions: Sequence[str], drafts: Sequence[str]) -> tuple[list[list[str]], list[int]]:
        """m kill queries per draft, and how many of them came from ``KILL_TEMPLATES`` because the
        generator wrote fewer than m usable lines (a repeat of the question, an empty or a
        very long line is unusable)."""
        prompts = [[{"role": "user", "content": KILL_PROMPT.format(question=q, answer=a, m=self.m)},
                    {"role": "assistant", "content": "1."}] for q, a in zip(questions, drafts)]
        replies = self.generator.generate(prompts, max_new_tokens=self.kill_tokens, stop=(),
                                          desc="kill queries")
        kill, templated = [], []
        for q, a, reply in zip(questions, drafts, replies):
            found = parse_queries("1." + reply, exclude=q)[:self.m]
            fill = [t.format(question=q.rstrip("?"), answer=a) for t in KILL_TEMPLATES]
            fill = [t for t in fill if t not in found][:self.m - len(found)]
            kill.append(found + fill)
            templated.append(len(fill))
        return kill, templated

    def anti_context(self, kill: Sequence[Sequence[str]]) -> list[list[Passage]]:
        """D_neg per question: each kill query's top k, fused by reciprocal rank, top k kept."""
        flat = [query for queries in kill for query in queries]
        runs = iter(self.retriever.search(flat, self.k) if flat else [])
        negative = []
        for queries in kill:
            fused: dict[str, float] = {}
            for hits in (next(runs) for _ in queries):
                for hit in hits:
                    fused[hit.doc_id] = fused.get(hit.doc_id, 0.0) + 1.0 / (RRF_K + hit.rank + 1)
            best = sorted(fused, key=lambda d: -fused[d])[:self.k]
            negative.append([self.corpus[d] for d in best])
        return negative

    def revise(self, questions, drafts, positive, negative) -> list[str]:
        """One revision per falsified draft, from both contexts."""
        prompts = [[{"role": "user", "content": REVISION_PROMPT.format(
                        positive=self._block(pos), negative=self._block(neg), question=q, answer=a)},
                    {"role": "assistant", "content": REVISION_PREFILL}]
                   for q, a, pos, neg in zip(questions, drafts, positive, negative)]
        return self.generator.generate(prompts, max_new_tokens=self.revision_tokens, desc="revising")

    def _block(self, passages: Sequence[Passage]) -> str:
        return "\n".join(f"- {' '.join(p.content.split()[:self.max_words])}" for p in passages) or "- (none)"


_NUMBERING = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s*")
_LABEL = re.compile(r"^(?:search )?query\s*\d*\s*:\s*", re.IGNORECASE)
_ECHO = re.compile(r"^(?:question|proposed answer|answer)\s*:", re.IGNORECASE)  # the prompt repeated


def parse_queries(text: str, exclude: str = "", max_words: int = 30) -> list[str]:
    """Distinct query lines of a numbered or bulleted list, without their markers or a "Query:"
    label; a line that echoes the prompt ("Question: …", "Proposed answer: …"), equals
    ``exclude`` (the question itself), is empty or is longer than ``max_words`` is dropped."""
    seen, queries = {exclude.strip().lower().rstrip("?")}, []
    for line in text.splitlines():
        query = _NUMBERING.sub("", line).strip()
        if _ECHO.match(query):
            continue
        query = _LABEL.sub("", query).strip().strip('"').strip()
        key = query.lower().rstrip("?")
        if query and key not in seen and len(query.split()) <= max_words:
            seen.add(key)
            queries.append(query)
    return queries
