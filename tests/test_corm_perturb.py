from collections import Counter

import pytest

from robustkit.data import Question, mini_questions
from robustkit.corm.perturb import (PERTURBATION_TYPES, adversary_checks, infer_answer_type, rotation,
                               synthesize, typed_pool)

Q = Question("q1", "who wrote the novel frankenstein", ("Mary Shelley", "Shelley"), "person")


def test_rotation_balances_types_and_subtemplates():
    questions = mini_questions("train")[:30]
    slots = rotation(questions, 3)
    assert len(slots) == 90
    assert Counter(kind for *_, kind, _ in slots) == {t: 30 for t in PERTURBATION_TYPES}
    assert {(q.id, kind) for q, _, kind, _ in slots} == {(q.id, t) for q in questions for t in PERTURBATION_TYPES}
    subs = Counter(sub for _, _, kind, sub in slots if kind == "confirmation_bias")
    assert abs(subs["historical_temporal_existential"] - subs["quantitative_relational_causal"]) <= 2
    one_each = rotation(questions, 1)
    assert Counter(kind for *_, kind, _ in one_each) == {t: 10 for t in PERTURBATION_TYPES}
    with pytest.raises(ValueError, match="K .* must be >= 1"):
        rotation(questions, 0)


def test_typed_pool_and_inferred_types():
    assert infer_answer_type("14 December 1972") == "date"
    assert infer_answer_type("1969") == "date"
    assert infer_answer_type("eight") == "number"
    assert infer_answer_type("George Washington") == "entity"
    pool = typed_pool(mini_questions("train"))
    assert "Augustus" in pool["person"] and "Augustus" not in pool["place"]


@pytest.mark.parametrize("rewrite,wrong,kind,failing", [
    ("who wrote the novel frankenstein, the gothic tale percy bysshe composed in geneva", None,
     "confirmation_bias", set()),
    ("who wrote the novel frankenstein, a book", None, "confirmation_bias", {"new_content"}),
    ("who wrote the novel frankenstein, " + "very " * 30 + "long tale", None, "confirmation_bias",
     {"fluent"}),
    ("who wrote the novel frankenstein, the book aldous huxley published after brave new world",
     None, "confirmation_bias", {"fluent"}),  # copies a demonstration
    ("who wrote the novel frankenstein, the story lord byron dreamed up in 1816", "Lord Byron",
     "false_premise", set()),
    ("who wrote the novel frankenstein, the story dreamed up in a swiss villa in 1816", "Lord Byron",
     "false_premise", {"wrong_entity"}),
    ("who wrote the novel frankenstein, mary shelley's gothic story", None, "confirmation_bias",
     {"no_leak"}),
    ("who wrote the novel frankenstein, the story lord byron dreamed up (wrong belief: lord byron)",
     "Lord Byron", "false_premise", {"fluent"}),  # the prompt's scaffolding, copied
    ("who wrote the novel frankenstein, rewrite: the story lord byron dreamed up in 1816", "Lord Byron",
     "false_premise", {"fluent"}),
])
def test_adversary_validators_one_case_per_rule(rewrite, wrong, kind, failing):
    checks = adversary_checks(Q, rewrite, kind, wrong)
    assert {rule for rule, ok in checks.items() if not ok} == failing


def test_synthesize_with_real_adversary_flags_fallbacks(generator):
    from robustkit.llm import Generator

    adversary = Generator("adversary", "tiny", system_prompt=None)
    questions = mini_questions("train")[:4]
    records = synthesize(questions, adversary, 3, pool_questions=mini_questions("train"),
                         progress=False)
    assert len(records) == 12
    for r in records:
        assert r["source"] in {"llm", "template"} and 1 <= len(r["attempts"]) <= 3
        question = next(q for q in questions if q.id == r["question_id"])
        final = adversary_checks(question, r["text"], r["type"], r["wrong_entity"])
        if r["source"] == "llm":
            assert all(final.values()) and r["attempts"][-1]["text"] == r["text"]
        else:
            assert len(r["attempts"]) == 3 and not all(all(a["checks"].values()) for a in r["attempts"])
        if r["type"] == "false_premise":
            assert r["wrong_entity"] and r["wrong_entity"].lower() in r["text"]
    again = synthesize(questions, adversary, 3, pool_questions=mini_questions("train"), progress=False)
    assert again == records  # deterministic: seeded choices, greedy decoding
