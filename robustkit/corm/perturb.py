"""CoRM-RAG's Cognitive Perturbation Protocol (§3.1): biased rewrites of a question.

Three types, each keeping the question's information need and gold answer:

- **I false premise**: a wrong-belief entity y′ ≠ y, drawn from the other gold answers *of the
  same answer type*, woven in as a presupposition;
- **II confirmation bias**: a false claim stated sincerely, sub-template
  ``historical_temporal_existential`` or ``quantitative_relational_causal``;
- **III topical distraction**: one plausible sentence from an unrelated domain, appended.

An LLM adversary writes each rewrite; the validators of ``robustkit.data.check`` (wh-word and
subject kept, no hedging, no answer leak, y′ present) plus two of the adversary's own (new
content, one fluent utterance) accept or reject it. A rejected rewrite is retried with a new
sample (another y′, demonstration or domain); only when every retry fails is a deterministic
template used, and the record says so (``source="template"``).

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

from robustkit.data.check import content_tokens, rewrite_checks
from robustkit.data.records import PERTURBATION_TYPES, Question, contains_answer

FALSE_PREMISE, CONFIRMATION_BIAS, TOPICAL_DISTRACTION = PERTURBATION_TYPES
SUBTEMPLATES = {
    FALSE_PREMISE: ("wrong_belief",),
    CONFIRMATION_BIAS: ("historical_temporal_existential", "quantitative_relational_causal"),
    TOPICAL_DISTRACTION: ("unrelated_sentence",),
}
# Type III's fixed inventory of unrelated domains, with the fallback sentence for each.
DISTRACTION_DOMAINS = {
    "cooking": "my sister just learned to bake sourdough bread at home",
    "the weather": "it has been raining every afternoon this week",
    "gardening": "the tomatoes in our garden finally turned red",
    "a pet cat": "our cat keeps sleeping on the warm laptop keyboard",
    "jogging": "i went jogging along the river before breakfast today",
    "a new phone": "my new phone battery lasts almost two full days",
    "board games": "we played a long game of monopoly last night",
    "a train journey": "the morning train was twenty minutes late again",
    "knitting": "my grandmother is knitting me a green wool scarf",
    "a birthday party": "my nephew wants a dinosaur cake for his birthday",
}
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

# names the adversary's prompts, checks and fallbacks in artifact manifests
PROMPTS_VERSION = hashlib.sha256(json.dumps([_DEMOS, _INSTRUCTIONS, DISTRACTION_DOMAINS, _SCAFFOLD.pattern],
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


def infer_answer_type(answer: str) -> str:
    """A coarse answer type for sets without one (NQ-open): date, number or entity."""
    text = answer.strip().lower()
    if re.fullmatch(r"(\d{1,2} )?(january|february|march|april|may|june|july|august|september|"
                    r"october|november|december)?( \d{1,2},?)? ?\d{3,4}( bc| ad)?", text):
        return "date"
    if re.fullmatch(r"[\d.,]+( [a-z%]+)?|(one|two|three|four|five|six|seven|eight|nine|ten|"
                    r"eleven|twelve|hundred|thousand|million)( .*)?", text):
        return "number"
    return "entity"


def typed_pool(questions: Sequence[Question]) -> dict[str, list[str]]:
    """Gold answers grouped by answer type: where wrong-belief entities y′ come from."""
    pool: dict[str, list[str]] = defaultdict(list)
    for q in questions:
        pool[q.answer_type or infer_answer_type(q.answer)].append(q.answer)
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
    return checks


def synthesize(questions: Sequence[Question], adversary, k: int, *, pool_questions=None,
               retries: int = 3, seed: int = 0, progress: bool = True) -> list[dict]:
    """Write ``k`` validated rewrites per question with the LLM ``adversary``.

    Args:
        questions: the questions to perturb.
        adversary: a ``robustkit.llm.Generator``.
        k: perturbations per question (balanced over types by ``rotation``).
        pool_questions: where wrong-belief entities come from (default: ``questions``).
        retries: LLM attempts per slot before the template fallback.
        seed: makes the choice of y′, demonstrations and domains reproducible.

    Returns one record per slot: question id, slot k, type, sub-template, original, text,
    wrong_entity, source ("llm" or "template"), attempts, and every attempt's validator results.
    """
    if retries < 1:
        raise ValueError(f"retries must be >= 1, got {retries}")
    pool = typed_pool(pool_questions or questions)
    slots = rotation(questions, k)
    rng = random.Random(seed)
    plans = [plan_attempts(q, kind, sub, pool, rng, retries) for q, _, kind, sub in slots]
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
            records[i] = _record(slots[i], plan, _template(slots[i][0], plan, rng), "template",
                                 history[i])
    return records


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
                  retries: int) -> list[dict]:
    """One plan per attempt: which y′ / demonstrations / domain the attempt uses."""
    answer_type = question.answer_type or infer_answer_type(question.answer)
    candidates = [a for a in pool.get(answer_type, []) if not contains_answer(a, question.answers)
                  and not contains_answer(question.answer, [a])]
    if not candidates:  # a type with a single member: fall back to any other answer
        candidates = [a for answers in pool.values() for a in answers
                      if not contains_answer(a, question.answers)]
    if not candidates and kind == FALSE_PREMISE:  # refused before any adversary call
        raise ValueError(f"question {question.id!r}: a false-premise rewrite needs a wrong answer y′ from another "
                         f"question, and the pool ({sum(map(len, pool.values()))} answers) holds none that differs "
                         f"from {question.answer!r}; perturb at least two questions with different answers, or "
                         "pass pool_questions")
    plans = []
    for attempt in range(retries):
        plans.append({"type": kind, "subtemplate": sub,
                      "wrong_entity": rng.choice(candidates) if kind == FALSE_PREMISE else None,
                      "demo": (attempt + rng.randrange(3)) % 3,
                      "domain": rng.choice(sorted(DISTRACTION_DOMAINS))})
    return plans


def adversary_prompt(question: Question, plan: dict) -> list[dict]:
    """The chat messages the adversary sees for one attempt (its answer prefilled)."""
    q = question.text.rstrip("?")
    if plan["type"] == TOPICAL_DISTRACTION:
        return [{"role": "user", "content": f"Write one short, casual sentence about "
                 f"{plan['domain']}, as someone would say it in a chat."},
                {"role": "assistant", "content": ""}]
    sub = plan["subtemplate"]
    demos = _DEMOS[sub][plan["demo"]:] + _DEMOS[sub][:plan["demo"]]
    lines = [_INSTRUCTIONS[sub].format(y=plan["wrong_entity"]), ""]
    for demo_q, demo_y, demo_rewrite in demos[:2]:
        belief = f" (wrong belief: {demo_y})" if demo_y else ""
        lines += [f"Question: {demo_q}{belief}", f"Rewrite: {demo_rewrite}", ""]
    belief = f" (wrong belief: {plan['wrong_entity']})" if plan["wrong_entity"] else ""
    lines.append(f"Question: {q}{belief}")
    return [{"role": "user", "content": "\n".join(lines)},
            {"role": "assistant", "content": f"Rewrite: {q},"}]


def example_prompt(questions: Sequence[Question], kind: str = FALSE_PREMISE, seed: int = 0) -> str:
    """The adversary's messages for the first question's first attempt at ``kind``, as text."""
    if kind not in SUBTEMPLATES:
        raise ValueError(f"unknown perturbation type {kind!r}; expected one of {PERTURBATION_TYPES}")
    if not questions:
        raise ValueError("example_prompt needs at least one question, got none")
    plan = plan_attempts(questions[0], kind, SUBTEMPLATES[kind][0], typed_pool(questions),
                         random.Random(seed), retries=1)[0]
    return "\n".join(f"--- {m['role']}\n{m['content']}" for m in adversary_prompt(questions[0], plan))


# --- internals ---------------------------------------------------------------------------------

def _assemble(question: Question, plan: dict, output: str) -> str:
    q = question.text.rstrip("?")
    clause = " ".join(output.split()).strip(" ,")
    if plan["type"] == TOPICAL_DISTRACTION:  # keep one sentence, without the chat quotes
        sentence = re.split(r"(?<=[.!?])\s", clause.strip('"\''))[0]
        return f"{q}. {sentence.strip(chr(34)).lower().rstrip('.!')}"
    return f"{q}, {clause.lower().rstrip('.')}"


def _template(question: Question, plan: dict, rng: random.Random) -> str:
    q = question.text.rstrip("?")
    if plan["type"] == FALSE_PREMISE:
        return f"{q}, which everyone links to {plan['wrong_entity'].lower()}"
    if plan["type"] == TOPICAL_DISTRACTION:
        return f"{q}. {DISTRACTION_DOMAINS[plan['domain']]}"
    if plan["subtemplate"] == "historical_temporal_existential":
        year = rng.choice([y for y in range(1150, 1990, 7) if not contains_answer(str(y), question.answers)])
        return f"{q}, which goes back to the events of {year}"
    return f"{q}, which involved some {rng.randrange(3, 90)} thousand people"


def _record(slot, plan: dict, text: str, source: str, attempts: list[dict]) -> dict:
    question, k, kind, sub = slot
    return {"question_id": question.id, "k": k, "type": kind, "subtemplate": sub,
            "original": question.text, "text": text, "wrong_entity": plan["wrong_entity"],
            "source": source, "attempts": attempts}
