import random
from collections import Counter
from dataclasses import replace

import pytest

from robustkit.data import Passage, Question, mini_corpus, mini_questions
from robustkit.data.answer_types import infer_answer_type
from robustkit.data.check import content_tokens
from robustkit.corm.perturb import (PERTURBATION_TYPES, adversary_checks, distraction_sentences, llm_share,
                                    plan_attempts, repeated_phrase, rotation, synthesize, typed_pool, _record,
                                    _template)
from mirror import needs_mirror

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
    assert infer_answer_type("206", "how many bones are in the adult human body") == "number"
    assert infer_answer_type("Toyota", "which company makes the prius") == "organisation"
    assert infer_answer_type("Geneva", "in which city did the league of nations meet") == "place"
    assert infer_answer_type("Leoš Janáček", "who composed the sinfonietta") == "person"
    assert infer_answer_type("The Scream", "what is the name of munch's painting of a figure") == "work"
    assert infer_answer_type("composer", "what is janacek's occupation") == "other"
    pool = typed_pool(mini_questions("train"))
    assert "Augustus" in pool["person"] and "Augustus" not in pool["place"]


def _untyped(questions):
    return [replace(q, answer_type="") for q in questions]


def test_the_question_s_form_gives_data_mini_s_hand_written_answer_types():
    questions = mini_questions("train") + mini_questions("test")
    agree = sum(infer_answer_type(q.answer, q.text) == q.answer_type for q in questions)
    assert agree >= 0.95 * len(questions), f"{agree} of {len(questions)}"


@needs_mirror("simpleqa")
def test_the_question_s_form_gives_simpleqa_s_answer_types_it_never_shaped():
    """SimpleQA's own metadata types (Person, Date, Number, Place; its "Other" is not ours)."""
    from robustkit.data.benchmarks import load

    typed = [q for q in load("simpleqa").records if q.answer_type in ("Person", "Date", "Number", "Place")]
    agree = sum(infer_answer_type(q.answer, q.text) == q.answer_type.lower() for q in typed)
    assert len(typed) == 3549 and agree >= 0.8 * len(typed), f"{agree} of {len(typed)}"


def test_template_wrong_answers_are_of_the_answer_s_kind_on_questions_without_a_type():
    """data/mini's questions with their types removed, as a researcher's questions come: every
    false premise's y′ is another gold answer of the hand-written type the question has."""
    typed = mini_questions("train") + mini_questions("test")
    kind_of = {q.answer: q.answer_type for q in typed}
    questions, pool = _untyped(typed), typed_pool(_untyped(typed))
    rng, sentences = random.Random(0), distraction_sentences(mini_corpus())
    same = 0
    for q, truth in zip(questions, typed):
        plan = plan_attempts(q, "false_premise", "wrong_belief", pool, rng, 1, sentences)[0]
        same += kind_of.get(plan["wrong_entity"], truth.answer_type) == truth.answer_type
        text = _template(q, plan)
        assert plan["wrong_entity"].lower() in text and all(adversary_checks(q, text, "false_premise",
                                                                             plan["wrong_entity"]).values())
    assert same >= 0.9 * len(questions), f"{same} of {len(questions)}"


def test_a_lone_year_or_count_gets_a_wrong_one_nearby():
    q = Question("y", "when did the berlin wall fall", ("1989",))
    plan = plan_attempts(q, "false_premise", "wrong_belief", typed_pool([q]), random.Random(0), 1, ["x"])[0]
    assert plan["wrong_entity"] in {"1949", "1964", "1977", "2001", "2014"}
    lone = plan_attempts(Q, "false_premise", "wrong_belief", typed_pool([Q, q]), random.Random(0), 1, ["x"])[0]
    assert (lone["wrong_entity"], lone["same_kind"]) == ("1989", False)  # no other person: any answer, marked
    with pytest.raises(ValueError, match="needs a wrong answer y′ from another question"):
        plan_attempts(Q, "false_premise", "wrong_belief", typed_pool([Q]), random.Random(0), 1, ["x"])


def test_confirmation_bias_records_the_belief_it_states():
    rng, sentences = random.Random(0), ["the tomatoes in our garden finally turned red this week"]
    for sub in ("historical_temporal_existential", "quantitative_relational_causal"):
        plan = plan_attempts(Q, "confirmation_bias", sub, typed_pool([Q]), rng, 1, sentences)[0]
        text = _template(Q, plan)
        record = _record((Q, 0, "confirmation_bias", sub), plan, text, "template", [])
        assert record["wrong_entity"] and record["wrong_entity"] in text
        assert record["premise"] == text.removeprefix(Q.text + ", ")
        llm = _record((Q, 0, "confirmation_bias", sub), plan, Q.text + ", the tale told at lake geneva", "llm", [])
        assert llm["wrong_entity"] is None and llm["premise"] == "the tale told at lake geneva"


def test_topical_distractions_retell_unrelated_sentences_of_the_corpus():
    corpus = mini_corpus()
    sentences = distraction_sentences(corpus)
    assert len(sentences) > 0.8 * len(corpus)  # most passages lend one sentence
    rng, pool = random.Random(0), typed_pool(mini_questions("train"))
    chosen = []
    for q in mini_questions("train")[:40]:
        plan = plan_attempts(q, "topical_distraction", "unrelated_sentence", pool, rng, 1, sentences)[0]
        assert not set(content_tokens(q.text)) & set(content_tokens(plan["distraction"]))
        assert all(adversary_checks(q, _template(q, plan), "topical_distraction", None).values())
        chosen.append(plan["distraction"])
    assert len(set(chosen)) >= 35  # not a few canned sentences
    lonely = [Passage("p", "t", "who wrote the novel frankenstein and when was the novel frankenstein written")]
    with pytest.raises(ValueError, match="pass a larger corpus"):
        plan_attempts(Q, "topical_distraction", "unrelated_sentence", pool, rng, 1, distraction_sentences(lonely))


def test_a_rewrite_that_says_a_phrase_twice_is_rejected():
    toyota = ("which car company was founded by kiichiro toyoda, the car company that was founded by the "
              "japanese car manufacturer kiichiro toyoda")
    assert repeated_phrase(toyota) == "was founded by"
    question = Question("t", "which car company was founded by kiichiro toyoda", ("Toyota",))
    assert adversary_checks(question, toyota, "confirmation_bias", None)["no_repeat"] is False
    assert repeated_phrase("who wrote the novel frankenstein, the story lord byron dreamed up in 1816") is None


def test_llm_share_counts_each_type():
    records = [{"type": "false_premise", "source": "template"}, {"type": "false_premise", "source": "llm"},
               {"type": "topical_distraction", "source": "llm"}]
    assert llm_share(records) == {"false_premise": (1, 2), "topical_distraction": (1, 1)}


@pytest.mark.parametrize("rewrite,wrong,kind,failing", [
    ("who wrote the novel frankenstein, the gothic tale percy bysshe composed in geneva", None,
     "confirmation_bias", set()),
    ("who wrote the novel frankenstein, a book", None, "confirmation_bias", {"new_content"}),
    ("who wrote the novel frankenstein, " + " ".join(f"verse{i}" for i in range(30)), None, "confirmation_bias",
     {"fluent"}),
    ("who wrote the novel frankenstein, the tale written in geneva, a tale written in geneva", None,
     "confirmation_bias", {"no_repeat"}),
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
    records = synthesize(questions, adversary, 3, corpus=mini_corpus(), pool_questions=mini_questions("train"),
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
        if r["type"] == "false_premise" or r["source"] == "template" and r["type"] == "confirmation_bias":
            assert r["wrong_entity"] and r["wrong_entity"].lower() in r["text"]
        if r["type"] != "topical_distraction":
            assert r["premise"] and r["text"].endswith(r["premise"])
    again = synthesize(questions, adversary, 3, corpus=mini_corpus(), pool_questions=mini_questions("train"),
                       progress=False)
    assert again == records  # deterministic: seeded choices, greedy decoding
