"""AlignRAG's critique format and the kit's deterministic contrastive critique: split and check,
answer and evidence spans, unsupported claims, every critique case, granularity and augmentation."""
import random

import pytest

from robustkit.alignrag.critique import (BETTER_HEAD, CRITIQUE_HEAD, Granularity, Rationale, answer_in, augment,
                                         check_target, contrastive_critique, evidence_span, granularity,
                                         split_critique, unsupported_claims)
from robustkit.data.records import Passage, Question

EIFFEL = Passage("eiffel", "Eiffel Tower",
                 "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. It was "
                 "designed by the company of Gustave Eiffel and completed in 1889 as the entrance arch to the "
                 "World's Fair.")
LIBERTY = Passage("liberty", "Statue of Liberty",
                  "The Statue of Liberty was a gift from the people of France, dedicated in New York Harbor on "
                  "October 28, 1886.")
GUSTAVE = Passage("gustave", "Gustave Eiffel", "Gustave Eiffel was a French civil engineer, born in Dijon in 1832.")
MONA = Passage("mona", "Mona Lisa", "The Mona Lisa is a half-length portrait painted by the Italian artist "
                                    "Leonardo da Vinci between 1503 and 1519.")
APOLLO = Passage("apollo", "Apollo 11", "Apollo 11 was the first crewed Moon landing. The mission was run by "
                                        "NASA for the U.S. Government. Dr. Thomas Paine led NASA at the time.")
WHEN_EIFFEL = Question("q-eiffel", "When was the Eiffel Tower completed?", ("1889",), gold_ids=("eiffel",))
WHO_MONA = Question("q-mona", "Who painted the Mona Lisa?", ("Leonardo da Vinci", "Leonardo"), gold_ids=("mona",))
GOOD = f"{CRITIQUE_HEAD} The answer is wrong. {BETTER_HEAD} Document [1] says 1889."


# ------------------------------------------------------------------------------- the format

def test_rationale_text():
    assert Rationale("Document [2] says 1889.", "1889").text == "Reasoning: Document [2] says 1889.\nAnswer: 1889"
    with pytest.raises(TypeError, match="Rationale.answer"):
        Rationale("x", None)


def test_split_critique():
    assert split_critique(GOOD) == ("The answer is wrong.", "Document [1] says 1889.")
    lower = GOOD.replace(CRITIQUE_HEAD, CRITIQUE_HEAD.lower()).replace(BETTER_HEAD, BETTER_HEAD.upper())
    assert split_critique(lower) == ("The answer is wrong.", "Document [1] says 1889.")
    assert split_critique(f"{CRITIQUE_HEAD} only a critique") == ("only a critique", "")
    assert split_critique(f"{BETTER_HEAD} only a rationale") == ("", "only a rationale")
    assert split_critique("no heads at all") == ("", "")
    # reversed: each part runs to the next head, not into the other part
    assert split_critique(f"{BETTER_HEAD} b {CRITIQUE_HEAD} c") == ("c", "b")


def test_check_target_accepts_a_good_target_unchanged():
    assert check_target(GOOD) is GOOD


@pytest.mark.parametrize("text, message", [
    ("The answer is wrong. " + BETTER_HEAD + " x", "lacks 'The critique for the rationale is:'"),
    (CRITIQUE_HEAD + " The answer is wrong.", "lacks 'The better rationale should be:'"),
    ("nothing", "lacks 'The critique for the rationale is:' and 'The better rationale should be:'"),
    (f"{BETTER_HEAD} x {CRITIQUE_HEAD} y", "before"),
    (f"{CRITIQUE_HEAD} a {BETTER_HEAD} b {BETTER_HEAD} c", "repeats 'The better rationale should be:' \\(2 times"),
    (f"{CRITIQUE_HEAD}   {BETTER_HEAD} b", "nothing after 'The critique for the rationale is:'"),
    (f"{CRITIQUE_HEAD} a {BETTER_HEAD}  ", "nothing after 'The better rationale should be:'"),
    (f"Sure! {GOOD}", "text before .*'Sure!'"),
])
def test_check_target_names_what_is_wrong(text, message):
    with pytest.raises(ValueError, match=message):
        check_target(text)
    with pytest.raises(ValueError, match="must be a str"):
        check_target(None)


# ------------------------------------------------------------------------------- the evidence

def test_answer_in_uses_the_kits_normalisation():
    assert answer_in("It was completed in 1889.", ["1889"])
    assert answer_in("painted by LEONARDO DA VINCI!", ["the Leonardo da Vinci"])
    assert answer_in("Leonardo's portrait", ["Raphael", "Leonardo"])  # an alias, possessive dropped
    assert not answer_in("in 18890", ["1889"])  # whole words only
    with pytest.raises(TypeError, match="list or tuple"):
        answer_in("1889", "1889")
    with pytest.raises(ValueError, match="non-empty gold answer"):
        answer_in("1889", [])
    with pytest.raises(ValueError, match="non-empty gold answer"):
        answer_in("1889", ["", "  "])


def test_evidence_span_finds_the_first_document_and_windows_its_sentence():
    # the sentence has 21 words; 1889 is word 12, so 5 words before and 6 after it
    assert evidence_span([LIBERTY, EIFFEL, APOLLO], ["1889"]) == (
        1, "Gustave Eiffel and completed in 1889 as the entrance arch to the")
    assert evidence_span([EIFFEL], ["1889"], max_words=5) == (0, "completed in 1889 as the")
    # at the sentence's end the window shifts left; the final full stop is dropped
    assert evidence_span([EIFFEL], ["World's Fair"], max_words=6) == (0, "entrance arch to the World's Fair")
    # at its start the window extends right
    text_only = Passage("g2", "", "Gustave Eiffel's company built the tower in Paris for the World's Fair of 1889.")
    assert evidence_span([text_only], ["Gustave Eiffel"], max_words=6) == (0, "Gustave Eiffel's company built the tower")
    # a short sentence comes whole: the title is a sentence of its own
    assert evidence_span([MONA, EIFFEL], ["Eiffel Tower"]) == (1, "Eiffel Tower")
    assert evidence_span([LIBERTY], ["France"]) == (
        0, "gift from the people of France, dedicated in New York Harbor on")
    assert evidence_span([GUSTAVE, MONA], ["Raphael", "Leonardo"]) == (
        1, "painted by the Italian artist Leonardo da Vinci between 1503 and 1519")
    # an alias longer than max_words is quoted whole, never cut
    assert evidence_span([MONA], ["Leonardo da Vinci"], max_words=2) == (0, "Leonardo da Vinci")
    assert evidence_span([LIBERTY, GUSTAVE], ["1889"]) is None
    assert evidence_span([], ["1889"]) is None


def test_evidence_span_keeps_abbreviations_inside_their_sentence():
    assert evidence_span([APOLLO], ["NASA"], max_words=30) == (0, "The mission was run by NASA for the U.S. Government")
    assert evidence_span([APOLLO], ["Thomas Paine"], max_words=30) == (0, "Dr. Thomas Paine led NASA at the time")


def test_evidence_span_rejects_bad_arguments():
    with pytest.raises(ValueError, match="max_words must be a positive int, got 0"):
        evidence_span([EIFFEL], ["1889"], max_words=0)
    with pytest.raises(TypeError, match="list of Passages"):
        evidence_span(EIFFEL, ["1889"])
    with pytest.raises(TypeError, match="list of Passages"):
        evidence_span(["The tower was completed in 1889."], ["1889"])


def test_unsupported_claims_checks_numbers_and_names_against_the_documents():
    reasoning = ("According to Document [2], the Eiffel Tower was completed in 1887 by Alexandre Dumas in "
                 "Paris, as document 1 says.")
    assert unsupported_claims(reasoning, [LIBERTY, EIFFEL]) == ["1887", "Alexandre Dumas"]
    # without documents every claim is unsupported; ids and the opening "According" are not claims
    assert unsupported_claims(reasoning, []) == ["Eiffel Tower", "1887", "Alexandre Dumas", "Paris"]
    assert unsupported_claims("Dumas wrote it in 1887; later Dumas said 1887 again.", [EIFFEL]) == ["Dumas", "1887"]
    assert unsupported_claims("However, the CHAMP DE MARS in paris is where I saw it.", [EIFFEL]) == []
    assert unsupported_claims("The tower stands on the Bank of England.", [EIFFEL]) == ["Bank of England"]
    assert unsupported_claims("It was run for the U.S. Government by NASA.", [APOLLO]) == []
    assert unsupported_claims("It was the 12th landing, not the 11th.", [APOLLO]) == ["12"]


def test_unsupported_claims_compares_numbers_as_numbers():
    heights = [Passage("h", "Heights", "The tower is 1,083 ft tall and was built in 1887–1889; it weighs 7.3 kt.")]
    assert unsupported_claims("It is 1083 feet tall and was begun in 1887.", heights) == []
    assert unsupported_claims("It is 1,084 feet tall and weighs 73 kt.", heights) == ["1,084", "73"]


# ------------------------------------------------------------------------------- the critique

def test_critique_when_the_weak_answer_is_right():
    weak = Rationale("Document [2] says the tower was completed in 1889.", "1889")
    critique = contrastive_critique(WHEN_EIFFEL, [LIBERTY, EIFFEL], weak, weak)
    assert critique == (f"{CRITIQUE_HEAD} The answer '1889' is right, as document [2] says. {BETTER_HEAD} "
                        'Document [2] says "Gustave Eiffel and completed in 1889 as the entrance arch to the", '
                        "so the answer is 1889.")
    # an unsupported claim is named even when the answer is right
    lucky = contrastive_critique(WHEN_EIFFEL, [EIFFEL], Rationale("Napoleon III finished it in 1889.", "1889"), weak)
    assert split_critique(lucky)[0] == ("The answer '1889' is right, as document [1] says. The rationale claims "
                                        "'Napoleon III', which no document supports.")


def test_critique_when_the_weak_answer_is_wrong():
    weak = Rationale("Napoleon III opened the tower in 1887.", "1887")
    strong = Rationale("Document [2] says it was completed in 1889.", "It was completed in 1889")
    critique = contrastive_critique(WHEN_EIFFEL, [LIBERTY, EIFFEL], weak, strong, max_words=8)
    assert critique == (f"{CRITIQUE_HEAD} The answer '1887' is not what document [2] says: "
                        '"and completed in 1889 as the entrance arch". The rationale claims \'Napoleon III\', '
                        f"which no document supports. {BETTER_HEAD} As document [2] says, the answer is 1889.")


def test_critique_concludes_the_gold_alias_the_strong_rationale_names():
    weak = Rationale("Michelangelo painted it.", "Michelangelo")
    names_alias = contrastive_critique(WHO_MONA, [MONA], weak, Rationale("It was Leonardo.", "Leonardo"))
    assert names_alias.endswith(f"{BETTER_HEAD} As document [1] says, the answer is Leonardo.")
    wrong_strong = contrastive_critique(WHO_MONA, [MONA], weak, Rationale("It was Raphael.", "Raphael"))
    assert wrong_strong.endswith(f"{BETTER_HEAD} As document [1] says, the answer is Leonardo da Vinci.")
    assert "The answer 'Michelangelo' is not what document [1] says" in wrong_strong
    no_answer = contrastive_critique(WHO_MONA, [MONA], Rationale("", ""), weak)
    assert split_critique(no_answer)[0].startswith("The rationale gives no answer, but document [1] says \"")


def test_critique_when_no_document_holds_the_answer():
    weak = Rationale("Michelangelo painted it in Florence.", "Michelangelo")
    critique = contrastive_critique(WHO_MONA, [LIBERTY, EIFFEL], weak, weak)
    assert critique == (f"{CRITIQUE_HEAD} None of the documents contains the answer, so the rationale should not "
                        "guess 'Michelangelo'. The rationale claims 'Michelangelo', which no document supports. "
                        f"{BETTER_HEAD} The documents do not answer the question, so the answer is unknown.")
    # a right answer the documents do not hold is still a guess
    lucky = contrastive_critique(WHO_MONA, [EIFFEL], Rationale("I recall it.", "Leonardo da Vinci"), weak)
    assert "should not guess 'Leonardo da Vinci'" in lucky and lucky.endswith("so the answer is unknown.")
    abstains = contrastive_critique(WHO_MONA, [EIFFEL], Rationale("No document says.", "unknown"), weak)
    assert split_critique(abstains)[0] == ("None of the documents contains the answer, and the rationale "
                                           "rightly does not guess.")


def test_critique_is_one_short_well_formed_line():
    messy = Passage("messy", "Eiffel Tower", "The Eiffel Tower\nwas completed\nin 1889.")
    cases = [(WHEN_EIFFEL, [messy], Rationale("It opened\nin 1887.", "1887\nAnswer: 1887")),
             (WHEN_EIFFEL, [EIFFEL], Rationale("Napoleon III opened it.", f"{BETTER_HEAD} 1887")),
             (WHEN_EIFFEL, [LIBERTY, EIFFEL], Rationale("Napoleon Bonaparte opened it in 1887.", "in the year 1887")),
             (WHO_MONA, [MONA], Rationale("Michelangelo Buonarroti did.", "Michelangelo Buonarroti")),
             (WHO_MONA, [EIFFEL, LIBERTY], Rationale("Michelangelo Buonarroti did.", "Michelangelo Buonarroti"))]
    for question, docs, weak in cases:
        critique = contrastive_critique(question, docs, weak, weak)
        assert check_target(critique) == critique and "\n" not in critique
        assert len(critique.split()) <= 60, critique
        assert critique.lower().count(BETTER_HEAD.lower()) == 1


def test_critique_rejects_bad_inputs():
    weak = Rationale("x", "1887")
    with pytest.raises(ValueError, match="docs is empty"):
        contrastive_critique(WHEN_EIFFEL, [], weak, weak)
    with pytest.raises(TypeError, match="weak must be a Rationale"):
        contrastive_critique(WHEN_EIFFEL, [EIFFEL], "Reasoning: x\nAnswer: 1887", weak)
    with pytest.raises(TypeError, match="question must be a Question"):
        contrastive_critique("When was the Eiffel Tower completed?", [EIFFEL], weak, weak)


# ------------------------------------------------------------------------------- granularity

def test_granularity_single_hop():
    assert granularity(WHEN_EIFFEL, [EIFFEL, LIBERTY], False) == Granularity("relevant", "helpful", "complete")
    assert granularity(WHEN_EIFFEL, [LIBERTY, MONA], True) == Granularity("noisy", "unhelpful", "incomplete")
    # one gold id: complete exactly when helpful, whichever document holds the answer
    other = Passage("other", "World's Fair of 1889", "The Exposition Universelle of 1889 opened in Paris.")
    assert granularity(WHEN_EIFFEL, [other], False) == Granularity("relevant", "helpful", "complete")


def test_granularity_two_hop_needs_every_gold_document():
    born = Question("q-born", "Where was the engineer whose company designed the Eiffel Tower born?", ("Dijon",),
                    gold_ids=("eiffel", "gustave"))
    assert granularity(born, [EIFFEL, GUSTAVE], False) == Granularity("relevant", "helpful", "complete")
    # the answer without its bridge document: helpful, yet incomplete
    assert granularity(born, [GUSTAVE, LIBERTY], True) == Granularity("noisy", "helpful", "incomplete")
    assert granularity(born, [EIFFEL, LIBERTY], False) == Granularity("relevant", "unhelpful", "incomplete")
    region = Question("q-region", born.text, ("Burgundy",), gold_ids=("eiffel", "gustave"))
    assert granularity(region, [GUSTAVE, EIFFEL], False) == Granularity("relevant", "unhelpful", "complete")


def test_granularity_rejects_bad_inputs():
    with pytest.raises(TypeError, match="augmented must be a bool"):
        granularity(WHEN_EIFFEL, [EIFFEL], "no")
    with pytest.raises(ValueError, match="docs is empty"):
        granularity(WHEN_EIFFEL, [], False)
    with pytest.raises(ValueError, match="relevance must be one of"):
        Granularity("irrelevant", "helpful", "complete")


# ------------------------------------------------------------------------------- augmentation

def test_augment_replaces_the_last_documents_deterministically():
    docs, pool = [EIFFEL, LIBERTY, GUSTAVE], [MONA, GUSTAVE, APOLLO, LIBERTY]
    first = augment(docs, pool, random.Random(3))
    assert first == augment(docs, pool, random.Random(3))
    assert first[:2] == [EIFFEL, LIBERTY] and first[2] in (MONA, APOLLO)
    drawn = {augment(docs, pool, random.Random(seed))[2].id for seed in range(20)}
    assert drawn == {"mona", "apollo"}  # never a document already in the set
    two = augment(docs, pool, random.Random(0), n_irrelevant=2)
    assert two[0] == EIFFEL and {d.id for d in two[1:]} == {"mona", "apollo"}
    same = augment(docs, pool, random.Random(0), n_irrelevant=0)
    assert same == docs and same is not docs
    assert docs == [EIFFEL, LIBERTY, GUSTAVE]  # the input is left alone


def test_augment_rejects_bad_inputs():
    docs = [EIFFEL, LIBERTY]
    for n in (-1, 2):
        with pytest.raises(ValueError, match=rf"n_irrelevant must be in \[0, 2\) for 2 documents .* got {n}"):
            augment(docs, [MONA], random.Random(0), n_irrelevant=n)
    with pytest.raises(ValueError, match="pool has 0 document"):
        augment(docs, [EIFFEL, LIBERTY], random.Random(0))
    with pytest.raises(ValueError, match="pool has 1 document.*need n_irrelevant=2"):  # one per id
        augment([EIFFEL, LIBERTY, GUSTAVE], [MONA, MONA, GUSTAVE], random.Random(0), n_irrelevant=2)
    with pytest.raises(TypeError, match="rng must be a Random"):
        augment(docs, [MONA], random)
