"""CoRM-RAG's Cognitive Perturbation Protocol (§3.1): biased rewrites of a question.

Three types, each keeping the question's information need and gold answer:

- **I false premise**: a wrong-belief entity y′ ≠ y, drawn from the other gold answers *of the
  same answer type* (a person for a person, a year for a year; for a question without a type, the
  type its form asks for: ``infer_answer_type``), woven in as a presupposition;
- **II confirmation bias**: a false claim stated sincerely, sub-template
  ``historical_temporal_existential`` or ``quantitative_relational_causal``;
- **III topical distraction**: one plausible sentence from an unrelated domain, appended — retold
  from a passage of the corpus that shares nothing with the question.

An LLM adversary writes each rewrite; the validators of ``robustkit.data.check`` (wh-word and
subject kept, no hedging, no answer leak, y′ present) plus three of the adversary's own (new
content, one fluent utterance, no phrase said twice) accept or reject it. A rejected rewrite is
retried with a new sample (another y′, demonstration or unrelated sentence); only when every retry
fails is a deterministic template used, and the record says so (``source="template"``). Every record of types I and II
keeps the belief it carries (``premise``: the clause added to the question; ``wrong_entity``: y′,
or a template's false year or count).

The adversary's answer is *prefilled* with the question itself, so even a small model only has
to write the added clause.
"""
from __future__ import annotations

import hashlib
import json
import random
import re
from collections import defaultdict
from typing import Sequence

from robustkit import memo
from robustkit.data.answer_types import KIND_NOUNS, infer_answer_type
from robustkit.data.check import content_tokens, hedge_words, rewrite_checks
from robustkit.data.records import PERTURBATION_TYPES, Passage, Question, contains_answer

FALSE_PREMISE, CONFIRMATION_BIAS, TOPICAL_DISTRACTION = PERTURBATION_TYPES
SUBTEMPLATES = {
    FALSE_PREMISE: ("wrong_belief",),
    CONFIRMATION_BIAS: ("historical_temporal_existential", "quantitative_relational_causal"),
    TOPICAL_DISTRACTION: ("unrelated_sentence",),
}
# Type III retells one sentence of an unrelated passage; a sentence it can use is short and plain
DISTRACTION_WORDS = (6, 22)
DISTRACTION_INSTRUCTION = "Say this in one short, casual sentence, as someone would in a chat: {sentence}"
_DEMOS = {
    "wrong_belief": [
        ("who wrote the novel 1984", "Aldous Huxley",
         "who wrote the novel 1984, the book aldous huxley published after brave new world"),
        ("what is the capital of australia", "Sydney",
         "what is the capital of australia, where sydney hosts the federal parliament"),
        ("when did world war i end", "1945",
         "when did world war i end, the war that closed with the treaties of 1945"),
    ],
    "historical_temporal_existential": [
        ("who wrote the novel 1984", None,
         "who wrote the novel 1984, first published in 1962 after the moon landing"),
        ("what is the capital of australia", None,
         "what is the capital of australia, the capital chosen at independence in 1788"),
        ("who painted the mona lisa", None,
         "who painted the mona lisa, the portrait finished during the french revolution"),
    ],
    "quantitative_relational_causal": [
        ("who wrote the novel 1984", None,
         "who wrote the novel 1984, the book that sold a billion copies in its first year"),
        ("what is the capital of australia", None,
         "what is the capital of australia, the largest city in the southern hemisphere"),
        ("who painted the mona lisa", None,
         "who painted the mona lisa, the portrait painted by three artists working together"),
    ],
}
_DEMO_TOKENS = frozenset(content_tokens(" ".join(d[2] for demos in _DEMOS.values() for d in demos)))
_INSTRUCTIONS = {
    "wrong_belief": "Add a short clause to the question that takes for granted that {y} is the "
                    "answer. Do not answer the question.",
    "historical_temporal_existential": "Add a short clause to the question with a false date, "
                                       "era or historical event, stated as fact. Do not answer it.",
    "quantitative_relational_causal": "Add a short clause to the question with a false number, "
                                      "relation or cause, stated as fact. Do not answer it.",
}

# the prompt's own labels: a rewrite that repeats one copied the prompt, not a user's question
# (a 135M adversary once ended a rewrite with "(wrong belief: kate warne)")
_SCAFFOLD = re.compile(r"wrong belief|\b(?:question|rewrite)\s*:", re.IGNORECASE)

_PRONOUNS = frozenset("he she it they his her its their this these those".split())  # a sentence opening with one needs its passage

# the fallbacks: {q} the question, {y} the belief (y′, a false year or count), {sentence} a corpus sentence
_TEMPLATES = {"wrong_belief": "{q}, which everyone links to {y}",
              "historical_temporal_existential": "{q}, which everyone knows goes back to {y}",
              "quantitative_relational_causal": "{q}, which everyone knows involved some {y} people",
              "unrelated_sentence": "{q}. {sentence}"}
ADVERSARY_CHECKS = ("new_content", "fluent", "no_repeat")  # the adversary's own, after the protocol's

# names the adversary's prompts, checks and fallbacks in artifact manifests
PROMPTS_VERSION = hashlib.sha256(json.dumps([_DEMOS, _INSTRUCTIONS, DISTRACTION_INSTRUCTION, DISTRACTION_WORDS,
                                             _SCAFFOLD.pattern, _TEMPLATES, KIND_NOUNS, ADVERSARY_CHECKS],
                                            sort_keys=True).encode()).hexdigest()[:12]


def rotation(questions: Sequence[Question], k: int) -> list[tuple[Question, int, str, str]]:
    """K perturbation slots per question, balanced over types by rotation.

    Slot (i, j) gets type ``TYPES[(i + j) % 3]``; type II alternates its two sub-templates, so
    every type and sub-template appears equally often across the set. ``k = 1`` gives the
    one-per-question rotation used for test sets.
    """
    if k < 1:
        raise ValueError(f"K (perturbations per question) must be >= 1, got {k}")
    slots = []
    for i, question in enumerate(questions):
        for j in range(k):
            kind = PERTURBATION_TYPES[(i + j) % 3]
            options = SUBTEMPLATES[kind]
            slots.append((question, j, kind, options[((i + j) // 3) % len(options)]))
    return slots


def typed_pool(questions: Sequence[Question]) -> dict[str, list[str]]:
    """Gold answers grouped by answer type: where wrong-belief entities y′ come from."""
    pool: dict[str, list[str]] = defaultdict(list)
    for q in questions:
        pool[q.answer_type or infer_answer_type(q.answer, q.text)].append(q.answer)
    return {kind: sorted(set(answers)) for kind, answers in pool.items()}


def adversary_checks(question: Question, rewrite: str, kind: str,
                     wrong_entity: str | None) -> dict[str, bool]:
    """The protocol's constraints plus the adversary's own: new content, and one fluent line that
    copies neither a demonstration nor the prompt's scaffolding."""
    checks = rewrite_checks(question.text, question.answers, rewrite, wrong_entity, kind)
    new = set(content_tokens(rewrite)) - set(content_tokens(question.text))
    copied = len(new) >= 2 and len(new & _DEMO_TOKENS) > len(new) / 2
    words = rewrite.split()
    checks["new_content"] = len(new) >= 2
    checks["fluent"] = (len(words) <= len(question.text.split()) + 25 and not copied
                        and "?" not in rewrite.rstrip("?") and rewrite.count(",") <= 3
                        and not _SCAFFOLD.search(rewrite))
    checks["no_repeat"] = not repeated_phrase(rewrite)
    return checks


def repeated_phrase(text: str) -> str | None:
    """A three-word phrase the text says twice ("… was founded by …, the company that was founded
    by …"), or None: a user states a belief once."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    seen = set()
    for phrase in zip(words, words[1:], words[2:]):
        if phrase in seen:
            return " ".join(phrase)
        seen.add(phrase)
    return None


def synthesize(questions: Sequence[Question], adversary, k: int, *, corpus: Sequence[Passage],
               pool_questions=None, retries: int = 3, seed: int = 0, progress: bool = True) -> list[dict]:
    """Write ``k`` validated rewrites per question with the LLM ``adversary``.

    Args:
        questions: the questions to perturb.
        adversary: a ``robustkit.llm.Generator``.
        k: perturbations per question (balanced over types by ``rotation``).
        corpus: passages whose sentences type III retells (those sharing no content word with the
            question).
        pool_questions: where wrong-belief entities come from (default: ``questions``).
        retries: LLM attempts per slot before the template fallback.
        seed: makes the choice of y′, demonstrations and passages reproducible.

    Returns one record per slot: question id, slot k, type, sub-template, original, text,
    wrong_entity, premise, source ("llm" or "template"), attempts, and every attempt's validator
    results. Prints how many rewrites of each type the LLM wrote.
    """
    if retries < 1:
        raise ValueError(f"retries must be >= 1, got {retries}")
    pool = typed_pool(pool_questions or questions)
    slots = rotation(questions, k)
    sentences = distraction_sentences(corpus)
    rng = random.Random(seed)
    plans = [plan_attempts(q, kind, sub, pool, rng, retries, sentences) for q, _, kind, sub in slots]
    records: list[dict | None] = [None] * len(slots)
    history: list[list[dict]] = [[] for _ in slots]
    for attempt in range(retries):
        todo = [i for i, r in enumerate(records) if r is None]
        if not todo:
            break
        prompts = [adversary_prompt(slots[i][0], plans[i][attempt]) for i in todo]
        outputs = adversary.generate(prompts, max_new_tokens=32, stop=("\n",),
                                     progress=progress, desc=f"adversary attempt {attempt + 1}")
        for i, output in zip(todo, outputs):
            question, _, kind, _ = slots[i]
            text = _assemble(question, plans[i][attempt], output)
            checks = adversary_checks(question, text, kind, plans[i][attempt]["wrong_entity"])
            history[i].append({"text": text, "checks": checks})
            if all(checks.values()):
                records[i] = _record(slots[i], plans[i][attempt], text, "llm", history[i])
    for i, record in enumerate(records):
        if record is None:
            plan = plans[i][-1]
            records[i] = _record(slots[i], plan, _template(slots[i][0], plan), "template", history[i])
    other_kind = sum(r["wrong_entity_same_kind"] is False for r in records)
    print("adversary:", "; ".join(f"{kind} {n}/{total} written by the LLM" for kind, (n, total) in llm_share(records).items())
          + (f"; {other_kind} false premise(s) took y′ of another answer kind (no other answer of theirs in the pool)"
             if other_kind else ""))
    return records


def llm_share(records: Sequence[dict]) -> dict[str, tuple[int, int]]:
    """Per type, (rewrites the LLM wrote, rewrites): the rest are templates."""
    share = {}
    for kind in PERTURBATION_TYPES:
        sources = [r["source"] for r in records if r["type"] == kind]
        if sources:
            share[kind] = (sources.count("llm"), len(sources))
    return share


def rejection_table(records: Sequence[dict]):
    """Per validator and type: the share of LLM attempts it rejected; plus the LLM share."""
    import pandas as pd

    rows = [{"type": r["type"], "rule": rule, "rejected": not ok}
            for r in records for attempt in r["attempts"] for rule, ok in attempt["checks"].items()]
    table = pd.DataFrame(rows).groupby(["type", "rule"])["rejected"].mean().unstack("rule")
    table["llm share"] = pd.DataFrame(records).groupby("type")["source"].apply(
        lambda s: (s == "llm").mean())
    return table.round(3)


def plan_attempts(question: Question, kind: str, sub: str, pool: dict, rng: random.Random,
                  retries: int, sentences: Sequence[str]) -> list[dict]:
    """One plan per attempt: which y′, false year or count, demonstrations and unrelated sentence
    the attempt (and, for the last one, the template) uses."""
    answer_type = question.answer_type or infer_answer_type(question.answer, question.text)
    candidates = [a for a in pool.get(answer_type, []) if not contains_answer(a, question.answers)
                  and not contains_answer(question.answer, [a])]
    if not candidates and answer_type in ("date", "number"):  # a year for a year, a count for a count
        candidates = _nearby_values(question, answer_type)
    same_kind = bool(candidates)
    if not candidates:  # no other answer of its kind (a small pool): any other answer, marked in the record
        candidates = [a for answers in pool.values() for a in answers if not contains_answer(a, question.answers)]
    if not candidates and kind == FALSE_PREMISE:  # refused before any adversary call
        raise ValueError(f"question {question.id!r}: a false-premise rewrite needs a wrong answer y′ from another "
                         f"question, and the pool ({sum(map(len, pool.values()))} answers) holds none that differs "
                         f"from {question.answer!r}; perturb at least two questions with different answers, or pass "
                         "pool_questions")
    unrelated = []
    if kind == TOPICAL_DISTRACTION:  # every sentence is tokenised once per run (_words), not once per slot
        asked = _words(question.text)
        unrelated = [s for s in sentences if not _words(s) & asked and not contains_answer(s, question.answers)]
    if kind == TOPICAL_DISTRACTION and not unrelated:
        raise ValueError(f"question {question.id!r}: a topical distraction retells a sentence of the corpus "
                         f"that shares no content word with the question, and none of its {len(sentences)} "
                         f"usable sentences ({DISTRACTION_WORDS[0]}-{DISTRACTION_WORDS[1]} words) does; "
                         "pass a larger corpus")
    plans = []
    for attempt in range(retries):
        plan = {"type": kind, "subtemplate": sub, "wrong_entity": None, "demo": (attempt + rng.randrange(3)) % 3,
                "distraction": None, "same_kind": same_kind}
        if kind == FALSE_PREMISE:
            plan["wrong_entity"] = rng.choice(candidates)
        elif kind == CONFIRMATION_BIAS:  # the template's false claim (an LLM rewrite writes its own)
            plan["wrong_entity"] = (str(rng.choice(_years_not(question))) if sub == "historical_temporal_existential"
                                    else f"{rng.randrange(3, 90)} thousand")
        else:
            plan["distraction"] = rng.choice(unrelated)
        plans.append(plan)
    return plans


def distraction_sentences(corpus: Sequence[Passage]) -> list[str]:
    """Each passage's first plain sentence of 6–22 words that stands alone (no opening pronoun, no
    question mark, hedging word or repeated phrase, at most two commas): what a topical distraction
    retells."""
    sentences = []
    for passage in corpus:
        for sentence in re.split(r"(?<=[.!])\s+", " ".join(passage.text.split())):
            words = sentence.rstrip(".").split()
            cut_short = len(words[-1]) <= 3 and words[-1][0].isupper()  # split after "St." or "U.S."
            if (DISTRACTION_WORDS[0] <= len(words) <= DISTRACTION_WORDS[1] and "?" not in sentence
                    and sentence.count(",") <= 2 and not cut_short and words[0].lower() not in _PRONOUNS
                    and not hedge_words(sentence) and not repeated_phrase(sentence)
                    and not _SCAFFOLD.search(sentence)):
                sentences.append(sentence.rstrip("."))
                break
    return sorted(set(sentences))


def adversary_prompt(question: Question, plan: dict) -> list[dict]:
    """The chat messages the adversary sees for one attempt (its answer prefilled)."""
    q = question.text.rstrip("?")
    if plan["type"] == TOPICAL_DISTRACTION:
        return [{"role": "user", "content": DISTRACTION_INSTRUCTION.format(sentence=plan["distraction"])},
                {"role": "assistant", "content": ""}]
    sub = plan["subtemplate"]
    demos = _DEMOS[sub][plan["demo"]:] + _DEMOS[sub][:plan["demo"]]
    belief = plan["wrong_entity"] if plan["type"] == FALSE_PREMISE else None
    lines = [_INSTRUCTIONS[sub].format(y=belief), ""]
    for demo_q, demo_y, demo_rewrite in demos[:2]:
        shown = f" (wrong belief: {demo_y})" if demo_y else ""
        lines += [f"Question: {demo_q}{shown}", f"Rewrite: {demo_rewrite}", ""]
    lines.append(f"Question: {q}" + (f" (wrong belief: {belief})" if belief else ""))
    return [{"role": "user", "content": "\n".join(lines)},
            {"role": "assistant", "content": f"Rewrite: {q},"}]


def example_prompt(questions: Sequence[Question], corpus: Sequence[Passage], kind: str = FALSE_PREMISE,
                   seed: int = 0) -> str:
    """The adversary's messages for the first question's first attempt at ``kind``, as text."""
    if kind not in SUBTEMPLATES:
        raise ValueError(f"unknown perturbation type {kind!r}; expected one of {PERTURBATION_TYPES}")
    if not questions:
        raise ValueError("example_prompt needs at least one question, got none")
    plan = plan_attempts(questions[0], kind, SUBTEMPLATES[kind][0], typed_pool(questions),
                         random.Random(seed), retries=1, sentences=distraction_sentences(corpus))[0]
    return "\n".join(f"--- {m['role']}\n{m['content']}" for m in adversary_prompt(questions[0], plan))


# --- internals ---------------------------------------------------------------------------------

def _assemble(question: Question, plan: dict, output: str) -> str:
    q = question.text.rstrip("?")
    clause = " ".join(output.split()).strip(" ,")
    if plan["type"] == TOPICAL_DISTRACTION:  # keep one sentence, without the chat quotes
        sentence = re.split(r"(?<=[.!?])\s", clause.strip('"\''))[0]
        return f"{q}. {sentence.strip(chr(34)).lower().rstrip('.!')}"
    return f"{q}, {clause.lower().rstrip('.')}"


def _template(question: Question, plan: dict) -> str:
    return _TEMPLATES[plan["subtemplate"]].format(q=question.text.rstrip("?"), y=(plan["wrong_entity"] or "").lower(),
                                                  sentence=(plan["distraction"] or "").lower())


@memo.cached(65_536)
def _words(text: str) -> frozenset[str]:
    return frozenset(content_tokens(text))


def _years_not(question: Question) -> list[int]:
    return [y for y in range(1150, 1990, 7) if not contains_answer(str(y), question.answers)]


def _nearby_values(question: Question, answer_type: str) -> list[str]:
    """Wrong answers of the gold's own kind when no other question has one: years a few decades
    away from a gold year, counts a few times a gold count."""
    found = re.search(r"\d+", question.answer.replace(",", ""))
    if not found:
        return []
    value = int(found.group())
    if answer_type == "date" and 100 <= value <= 2100:
        wrong = [value + d for d in (-40, -25, -12, 12, 25) if value + d <= 2030]
    else:
        wrong = [max(2, round(value * f)) for f in (0.25, 0.5, 2, 3, 10)]
    return [str(w) for w in sorted(set(wrong)) if not contains_answer(str(w), question.answers)]


def _record(slot, plan: dict, text: str, source: str, attempts: list[dict]) -> dict:
    question, k, kind, sub = slot
    added = text[len(question.text.rstrip("?")):].lstrip(",. ")
    # what the user believes: y′ (type I), a template's own false year or count (type II)
    wrong = plan["wrong_entity"] if kind == FALSE_PREMISE or source == "template" else None
    return {"question_id": question.id, "k": k, "type": kind, "subtemplate": sub,
            "original": question.text, "text": text, "wrong_entity": wrong,
            "wrong_entity_same_kind": plan["same_kind"] if kind == FALSE_PREMISE else None,
            "premise": added if kind != TOPICAL_DISTRACTION else None,
            "source": source, "attempts": attempts}
