"""CounterRefine validation: canonical forms, question and answer types, the strict reply parser,
cited snippets, and every verdict validate can reach."""
import pytest

from robustkit.counterrefine.validate import (QUESTION_TYPES, REASONS, Refinement, Verdict,
                                              answer_core, canonical, cited_snippets, has_answer_type,
                                              parse_refinement, question_type, validate)

BERLIN = "when did the berlin wall fall"
SNIPPETS = ["The Berlin Wall was built in 1961.", "The wall fell on November 9, 1989.",
            "Germany reunified in 1990."]


def revise(answer: str, evidence: str) -> Refinement:
    return Refinement("REVISE", answer, evidence)


# ------------------------------------------------------------------------------- canonical

def test_canonical_drops_articles_punctuation_case_and_accents():
    assert canonical("The Eiffel Tower!") == "eiffel tower"
    assert canonical("  Émile   Zola & Co. ") == "emile zola and co"
    assert canonical("an apple, a pear") == "apple pear"
    assert canonical("Theatre") == "theatre"  # "the" only as a whole word
    assert canonical("Jay-Z") == "jay z"
    assert canonical("U.S.") == "us"
    assert canonical("1914–1918") == "1914 1918"  # an en dash is a hyphen


def test_canonical_number_words():
    assert canonical("twenty-one") == "21"
    assert canonical("three hundred") == "300"
    assert canonical("two thousand and five") == "2005"
    assert canonical("nineteen hundred and eighty-nine") == "1989"
    assert canonical("a hundred years") == "100 years"
    assert canonical("one two three") == "1 2 3"  # no grammar joins these
    assert canonical("one and two") == "1 and 2"  # "and" joins only after hundred/thousand/…


def test_canonical_thousands_separators_and_multipliers():
    assert canonical("1,000") == "1000"
    assert canonical("1,234,567 people") == "1234567 people"
    assert canonical("5 million") == "5000000"
    assert canonical("3.5 billion") == "3500000000"
    assert canonical("two million") == "2000000"
    assert canonical("a million") == "1000000"
    assert canonical("3.14") == "3.14"  # a decimal point survives


def test_canonical_ordinals():
    assert [canonical(x) for x in ("1st", "2nd", "3rd", "21st", "4th")] == ["1", "2", "3", "21", "4"]
    assert canonical("first") == "1"
    assert canonical("twelfth") == "12"
    assert canonical("twentieth") == "20"
    assert canonical("twenty-first") == "21"
    assert canonical("the second world war") == "2 world war"


@pytest.mark.parametrize("written", ["9 November 1989", "November 9, 1989", "Nov. 9 1989",
                                     "1989-11-09", "9th of November 1989", "Nov 9th, 1989",
                                     "the ninth of November 1989", "1989-11-9"])
def test_canonical_dates_are_iso(written):
    assert canonical(written) == "1989-11-09"


def test_canonical_partial_and_impossible_dates():
    assert canonical("November 1989") == "1989-11"
    assert canonical("in 1989") == "in 1989"
    assert canonical("November 9") == "november 9"  # no year, no ISO
    assert canonical("1989-13-01") == "1989 13 01"  # no month 13


@pytest.mark.parametrize("text", ["The Eiffel Tower!", "two thousand and five", "Nov. 9 1989",
                                  "November 1989", "5 million", "1.23456789 million",
                                  "million million", "twenty-first of May 2001", "a & b",
                                  "9 november 800", "31 February 1990", "hundred and", "1st"])
def test_canonical_is_idempotent(text):
    assert canonical(canonical(text)) == canonical(text)


# ------------------------------------------------------------------------------- types

@pytest.mark.parametrize("question, expected", [
    ("who was the first emperor of the roman empire", "who"),
    ("Whose portrait is on the $20 bill?", "who"),
    ("to whom did she write", "who"),
    ("where is the eiffel tower", "where"),
    ("when did the berlin wall fall", "when"),
    ("what year did world war ii end", "when"),
    ("in which year did the titanic sink", "when"),
    ("what date is independence day", "when"),
    ("how many moons does mars have", "how many"),
    ("how much does the earth weigh", "how many"),
    ("what percentage of the earth is water", "how many"),
    ("what is the capital of france", "other"),
    ("in which city was the director of the film jaws born", "other"),
    ("why is the sky blue", "other"),
    ("is paris in france", "other"),
    ("the berlin wall fell in what year", "other"),  # the wh-phrase must lead
])
def test_question_type(question, expected):
    assert question_type(question) == expected
    assert expected in QUESTION_TYPES


@pytest.mark.parametrize("bad, message", [(None, "string"), (42, "string"), ("", "no words"),
                                          (" ?! ", "no words")])
def test_question_type_rejects_non_questions(bad, message):
    with pytest.raises(ValueError, match=message):
        question_type(bad)


def test_has_answer_type_positives():
    assert has_answer_type("9 November 1989", "when")
    assert has_answer_type("in the 1980s", "when")
    assert has_answer_type("December 25", "when")
    assert has_answer_type("two", "how many")
    assert has_answer_type("1,000 people", "how many")
    assert has_answer_type("Napoleon", "who")
    assert has_answer_type("the city of Paris", "where")
    assert has_answer_type("NASA", "who")
    assert has_answer_type("anything at all", "other")


def test_has_answer_type_negatives():
    assert not has_answer_type("a long time ago", "when")
    assert not has_answer_type("42", "when")  # two digits are no year
    assert not has_answer_type("3000", "when")  # past 2100
    assert not has_answer_type("several", "how many")
    assert not has_answer_type("my mother", "who")
    assert not has_answer_type("I think so", "who")  # the pronoun "I" is no name
    assert not has_answer_type("", "where")
    with pytest.raises(ValueError, match="how many"):
        has_answer_type("x", "what")


# ------------------------------------------------------------------------------- parsing

def test_parse_valid_keep_and_revise():
    assert parse_refinement("DECISION: KEEP\nANSWER: 1991\nEVIDENCE: [1]") == \
        Refinement("KEEP", "1991", "[1]")
    reply = "DECISION: REVISE.\nANSWER:  9 November 1989  \n  EVIDENCE: [2]\n"
    assert parse_refinement(reply) == Refinement("REVISE", "9 November 1989", "[2]")


def test_parse_allows_lowercase_names_and_chatter_around_the_fields():
    reply = ("Let me check the snippets.\nThe answer: is wrong\n"
             "decision: revise\nAnswer : Paris\nevidence: S1\nHope this helps!")
    assert parse_refinement(reply) == Refinement("REVISE", "Paris", "S1")


@pytest.mark.parametrize("reply, error", [
    ("DECISION: REVISE\nEVIDENCE: [1]", "missing ANSWER field"),
    ("", "missing DECISION field"),
    ("DECISION: REVISE ANSWER: Paris EVIDENCE: [1]", "missing ANSWER field"),  # one line
    ("DECISION: KEEP\nANSWER: a\nANSWER: b\nEVIDENCE: [1]", "repeated ANSWER field"),
    ("DECISION: MAYBE\nANSWER: Paris\nEVIDENCE: [1]", "unknown decision 'MAYBE'"),
    ("DECISION: REVISE\nANSWER:\nEVIDENCE: [1]", "REVISE with an empty ANSWER"),
    (None, "not a string"),
])
def test_parse_malformed_replies_count_as_keep(reply, error):
    parsed = parse_refinement(reply)
    assert (parsed.decision, parsed.answer, parsed.evidence) == ("KEEP", "", "")
    assert error in parsed.error


def test_cited_snippets_id_styles():
    for evidence in ("[3]", "3", "S3", "snippet 3", "Snippet #3.", "[s3]"):
        assert cited_snippets(evidence) == ([2], ""), evidence
    assert cited_snippets("[1], [4]") == ([0, 3], "")
    assert cited_snippets("1 and 4, also [1]") == ([0, 3], "")
    assert cited_snippets("snippets 2 and 7") == ([1, 6], "")  # out of range is kept
    assert cited_snippets("[0]") == ([-1], "")
    assert cited_snippets("none") == ([], "")


def test_cited_snippets_quoted_spans():
    assert cited_snippets('"the wall fell in 1989"') == ([], "the wall fell in 1989")
    assert cited_snippets("[2] “the wall fell”") == ([1], "the wall fell")
    assert cited_snippets('"" [2]') == ([1], "")  # an empty quote is no span


# ------------------------------------------------------------------------------- validate

def test_validate_accepts_a_revision_thanks_to_canonical_dates():
    proposal = parse_refinement("DECISION: REVISE\nANSWER: 9 November 1989\nEVIDENCE: [2]")
    assert validate(BERLIN, "1991", proposal, SNIPPETS) == Verdict(True, "accepted")
    assert validate(BERLIN, "1991", proposal, SNIPPETS, canonicalise=False) == \
        Verdict(False, "answer not in the cited evidence")


def test_validate_accepts_a_year_inside_a_cited_date_and_a_quoted_span():
    assert validate(BERLIN, "1991", revise("1989", "S2"), SNIPPETS).accepted
    verdict = validate(BERLIN, "1991", revise("1989", '"wall fell on November 9, 1989"'), SNIPPETS)
    assert verdict == Verdict(True, "accepted")


@pytest.mark.parametrize("proposal, snippets, reason", [
    (Refinement("KEEP", "1991", "[1]"), SNIPPETS, "keep"),
    (parse_refinement("ANSWER: 1989"), SNIPPETS, "malformed: missing DECISION field"),
    (revise("1989", "see above"), SNIPPETS, "no evidence cited"),
    (revise("1989", "[4]"), SNIPPETS, "cites snippet 4, but only 3 were shown"),
    (revise("1989", "[0]"), SNIPPETS, "cites snippet 0, but only 3 were shown"),
    (revise("1989", '[2] "the wall fell in 1988"'), SNIPPETS, "quoted span not in any snippet"),
    (revise("1990", "[2]"), SNIPPETS, "answer not in the cited evidence"),
    (revise("1961", "[2]"), SNIPPETS, "answer not in the cited evidence"),  # only in snippet 1
    (revise("1991", "[1]"), ["It fell in 1991."], "same as the draft"),
    (revise("Germany", "[3]"), SNIPPETS, "wrong answer type: expected a year or date"),
    (revise("the Berlin wall did fall", "[2]"), SNIPPETS, "answer adds nothing to the question"),
])
def test_validate_each_rejection(proposal, snippets, reason):
    verdict = validate(BERLIN, "1991", proposal, snippets)
    assert verdict == Verdict(False, reason)
    assert sum(verdict.reason.startswith(prefix) for prefix in REASONS) == 1


def test_validate_tokens_and_draft_comparison_are_canonical():
    snippets = ["The emperor Augustus ruled Rome.", "Augustine of Hippo wrote books."]
    question = "who was the first emperor of the roman empire"
    assert validate(question, "Caesar", revise("Augustus", "[1]"), snippets).accepted
    # whole tokens: "August" is in "Augustus" only as a substring
    assert validate(question, "Caesar", revise("August", "[1, 2]"), snippets).reason == \
        "answer not in the cited evidence"
    assert validate(question, "the AUGUSTUS!", revise("Augustus", "[1]"), snippets).reason == \
        "same as the draft"
    assert validate(question, "the AUGUSTUS!", revise("Augustus", "[1]"), snippets,
                    canonicalise=False).accepted
    assert validate(question, "Caesar", revise("rome", "[1]"), snippets).reason == \
        "wrong answer type: expected a capitalised name"


def test_validate_judges_a_sentence_by_what_it_adds_to_the_question():
    question = "which ship carried the pilgrims to america in 1620"
    snippets = ["The Mayflower was an English ship.", "The Speedwell leaked."]
    sentence = revise("The Mayflower carried the Pilgrims to America in 1620.", "[1]")
    assert answer_core(sentence.answer, question) == "Mayflower"
    assert validate(question, "The Speedwell carried them.", sentence, snippets).accepted
    # the core must be supported by the snippet it cites, and differ from the draft's core
    assert validate(question, "The Speedwell", revise("The Mayflower carried them", "[2]"),
                    snippets).reason == "answer not in the cited evidence"
    assert validate(question, "It was the Mayflower.", sentence, snippets).reason == "same as the draft"
    # without canonicalisation the whole sentence must occur verbatim
    assert validate(question, "The Speedwell", sentence, snippets, canonicalise=False).reason == \
        "answer not in the cited evidence"


def test_an_answer_that_is_only_a_snippet_id_is_malformed():
    assert parse_refinement("DECISION: REVISE\nANSWER: [1]\nEVIDENCE: [2]").error == "ANSWER is only a snippet id"
    assert parse_refinement("DECISION: REVISE\nANSWER: 1945\nEVIDENCE: [2]").error == ""


def test_validate_raw_mode_is_case_sensitive_and_checks_spans_raw():
    snippets = ["Mars has two moons, Phobos and Deimos."]
    question = "how many moons does mars have"
    assert validate(question, "1", revise("two", "[1]"), snippets).accepted
    assert validate(question, "1", revise("Two", "[1]"), snippets, canonicalise=False).reason == \
        "answer not in the cited evidence"
    assert validate(question, "1", revise("two", '"mars has two moons"'), snippets).accepted
    assert validate(question, "1", revise("two", '"mars has two moons"'), snippets,
                    canonicalise=False).reason == "quoted span not in any snippet"
    assert validate(question, "1", revise("Phobos", "[1]"), snippets).reason == \
        "wrong answer type: expected a number"


def test_validate_answer_must_not_straddle_snippets():
    snippets = ["It was Neil", "Armstrong who walked first."]
    assert validate("who walked on the moon first", "Buzz Aldrin",
                    revise("Neil Armstrong", "[1] [2]"), snippets).reason == \
        "answer not in the cited evidence"


def test_validate_rejects_a_bad_question_even_for_keep():
    with pytest.raises(ValueError):
        validate("", "x", Refinement("KEEP", "", ""), SNIPPETS)
