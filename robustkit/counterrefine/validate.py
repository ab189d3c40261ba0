"""CounterRefine's parsing and deterministic validation of a refinement reply.

A refinement call answers in three fields, each once, at the start of its own line::

    DECISION: KEEP | REVISE
    ANSWER: <the answer>
    EVIDENCE: <snippet ids, e.g. [2] or S1 and S4, and/or a "quoted span">

``parse_refinement`` is strict: a missing or repeated field, an unknown decision or a REVISE
with an empty answer makes the reply *malformed*, which counts as KEEP with the reason kept.
``validate`` accepts a REVISE only when, in this order (the first failure is the reason):

a. the evidence cites something: a snippet id or a quoted span;
b. every cited id is one of the snippets shown (ids are 1-based);
c. a quoted span occurs in some snippet;
d. the answer occurs, as whole tokens, in one cited snippet or in the quoted span;
e. the answer differs from the draft;
f. the answer has the type the question asks for (``has_answer_type``).

With canonical forms, checks d–f look at the answer's *core* (``answer_core``): what it adds to
the question. A 135M reader answers in sentences that restate the question ("The Mayflower
carried the Pilgrims in 1620"), and no snippet holds such a sentence verbatim; its core
("Mayflower") is what the evidence must support — each core token in one cited piece — what
must differ from the draft's core and what must have the asked type. That is the kit's
addition for sentence-writing readers; a reply whose answer is one short span is unaffected.

Comparisons use ``canonical`` forms; ``canonicalise=False`` is the "no canonicalisation"
ablation (raw, case-sensitive substrings and raw equality). The canonical form:

* NFKD with accents stripped, lower-case, ``&`` → ``and``;
* thousands separators dropped ("1,000" → "1000"); a period is kept only between digits (a
  decimal point); dashes become spaces; any other punctuation is deleted ("U.S." → "us");
* the articles a/an/the are dropped as whole words;
* ordinals and number words become digits: "21st", "twenty-first" → "21", "three hundred" →
  "300", "two thousand and five" → "2005"; a multiplier (hundred, thousand, million, billion,
  trillion) after a number, digits or words, gives the full integer ("5 million", "3.5
  million" → "5000000", "3500000"), and alone counts once ("a million" → "1000000");
* dates become ISO: "9 November 1989", "9th of November 1989", "November 9, 1989", "Nov. 9
  1989", "1989-11-09" → "1989-11-09"; "November 1989" → "1989-11"; a bare year stays. Years have
  3–4 digits. A year or year-month also matches a fuller ISO date in step d, so "1989" occurs in
  "on 9 November 1989"; a day-month without a year ("November 9") is not folded.

``canonical`` is idempotent.
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

QUESTION_TYPES = ("who", "where", "when", "how many", "other")

# Verdict reasons, as prefixes in check order, so tables can group rejections.
REASONS = ("keep", "malformed", "no evidence cited", "cites snippet",
           "quoted span not in any snippet", "answer adds nothing to the question",
           "answer not in the cited evidence",
           "same as the draft", "wrong answer type", "accepted")
(_KEEP, _MALFORMED, _NO_EVIDENCE, _BAD_ID, _SPAN_NOT_FOUND, _NOTHING_NEW, _ANSWER_NOT_FOUND,
 _SAME_AS_DRAFT, _WRONG_TYPE, _ACCEPTED) = REASONS

_EXPECTED = {"when": "a year or date", "how many": "a number",
             "who": "a capitalised name", "where": "a capitalised name"}

# ---------------------------------------------------------------------------- canonical form

_ARTICLES = {"a", "an", "the"}
_UNITS = "zero one two three four five six seven eight nine".split()
_TEENS = "ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}
_IRREGULAR = {"one": "first", "two": "second", "three": "third", "five": "fifth",
              "eight": "eighth", "nine": "ninth", "twelve": "twelfth"}
_CARDINALS: dict[str, tuple[int, str]] = {
    **{w: (v, "unit") for v, w in enumerate(_UNITS)},
    **{w: (v, "teen") for v, w in enumerate(_TEENS, 10)},
    **{w: (v, "tens") for v, w in zip(range(20, 100, 10), _TENS)},
    "hundred": (100, "hundred"),
    **{w: (v, "scale") for w, v in _SCALES.items()},
}
_ORDINALS = {_IRREGULAR.get(w) or (w[:-1] + "ieth" if w.endswith("y") else w + "th"): vk
             for w, vk in _CARDINALS.items()}  # twenty → twentieth, four → fourth
_NUMBER_WORDS = {**_CARDINALS, **_ORDINALS}
# Which kind of word may follow which inside one number (None: the number's first word), so
# "twenty one" is 21 but "one two" stays two numbers and "ten five" is not 15.
_FOLLOWS = {"unit": {None, "tens", "hundred", "scale", "and"},
            "teen": {None, "hundred", "scale", "and"},
            "tens": {None, "hundred", "scale", "and"},
            "hundred": {None, "unit", "teen", "tens", "digits"},
            "scale": {None, "unit", "teen", "tens", "hundred", "digits"}}
_SMALL = ("unit", "teen", "tens")

_MONTH_NAMES = ("january february march april may june july august september october "
                "november december").split()
_MONTHS = {**{m: i for i, m in enumerate(_MONTH_NAMES, 1)},
           **{m[:3]: i for i, m in enumerate(_MONTH_NAMES, 1)}, "sept": 9}
_DAYS_IN_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_MONTH = "(" + "|".join(_MONTHS) + ")"
_DAY, _YEAR = r"(\d{1,2})", r"(\d{3,4})"
# (pattern, group order as day/month/year) over the space-joined tokens, tried in this order.
_DATE_FORMS = (
    (re.compile(rf"(?<!\S){_DAY} (?:of )?{_MONTH} {_YEAR}(?!\S)"), (1, 2, 3)),
    (re.compile(rf"(?<!\S){_MONTH} {_DAY} {_YEAR}(?!\S)"), (2, 1, 3)),
    (re.compile(rf"(?<!\S){_MONTH} {_YEAR}(?!\S)"), (None, 1, 2)),
)
_ISO = re.compile(r"(\d{4})-(\d\d?)-(\d\d?)|(\d{4})-(\d\d)")  # "1990-1" is no year-month
_DECIMAL = re.compile(r"\d+(?:\.\d+)?")
_ORDINAL_SUFFIX = re.compile(r"^(\d+)(?:st|nd|rd|th)$")  # the whole token: "21st" → "21"


def canonical(text: str) -> str:
    """The canonical answer form (rules in the module docstring); idempotent."""
    tokens = [t for t in _tokens(_fold(text)) if t not in _ARTICLES]
    tokens = [_ORDINAL_SUFFIX.sub(r"\1", t) for t in tokens]
    return _fold_dates(" ".join(_fold_numbers(tokens)))


def _fold(text: str) -> str:
    """Accents, case, '&', dashes and punctuation; keeps letters, digits, '-' and decimal points."""
    text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    text = text.lower().replace("&", " and ")
    text = "".join("-" if unicodedata.category(c) == "Pd" or c == "\u2212" else c for c in text)
    text = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text)
    text = re.sub(r"(?<!\d)\.|\.(?!\d)", "", text)
    return re.sub(r"[^\w\s.-]|_", "", text)


def _tokens(text: str) -> list[str]:
    """Whitespace tokens; an ISO date keeps its hyphens (zero-padded), other hyphens split."""
    tokens: list[str] = []
    for chunk in text.split():
        iso = _iso(chunk)
        tokens.extend([iso] if iso else chunk.replace("-", " ").split())
    return tokens


def _iso(chunk: str) -> str:
    match = _ISO.fullmatch(chunk)
    if not match:
        return ""
    year, month, day = (match[1], match[2], match[3]) if match[1] else (match[4], match[5], None)
    return _iso_date(int(year), int(month), None if day is None else int(day))


def _iso_date(year: int, month: int, day: int | None) -> str:
    """'YYYY-MM[-DD]', or '' when the month or day cannot exist."""
    if not 1 <= month <= 12 or (day is not None and not 1 <= day <= _DAYS_IN_MONTH[month - 1]):
        return ""
    return f"{year:04d}-{month:02d}" + ("" if day is None else f"-{day:02d}")


def _fold_numbers(tokens: list[str]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(tokens):
        value, end = _read_number(tokens, i)
        end = max(end, i + 1)  # no number here: the token stays, as a non-integral one does
        out.extend(tokens[i:end] if value is None else [str(value)])
        i = end
    return out


def _kind_after(tokens: list[str], i: int) -> str | None:
    following = tokens[i + 1] if i + 1 < len(tokens) else ""
    return _NUMBER_WORDS[following][1] if following in _NUMBER_WORDS else None


def _read_number(tokens: list[str], start: int) -> tuple[int | None, int]:
    """The integer written from tokens[start] (None if none, or not integral) and where it ends."""
    total, current, last, smallest_scale = Fraction(0), Fraction(0), None, None
    i = start
    if _DECIMAL.fullmatch(tokens[i]) and _kind_after(tokens, i) in ("hundred", "scale"):
        current, last, i = Fraction(tokens[i]), "digits", i + 1  # "5 million", "3.5 billion"
    while i < len(tokens):
        word = tokens[i]
        if word == "and" and last in ("hundred", "scale") and _kind_after(tokens, i) in _SMALL:
            last, i = "and", i + 1  # "two thousand and five"
            continue
        if word not in _NUMBER_WORDS or last not in _FOLLOWS[_NUMBER_WORDS[word][1]]:
            break
        value, kind = _NUMBER_WORDS[word]
        if kind == "hundred":
            current = (current or 1) * 100
        elif kind == "scale":
            if smallest_scale is not None and value >= smallest_scale:
                break  # "million million" is two numbers
            total, current, smallest_scale = total + (current or 1) * value, Fraction(0), value
        else:
            current += value
        last, i = kind, i + 1
        if word in _ORDINALS:  # an ordinal ends its number: "twenty first" → 21
            break
    number = total + current
    return (int(number) if i > start and number.denominator == 1 else None), i


def _fold_dates(text: str) -> str:
    for pattern, order in _DATE_FORMS:
        text = pattern.sub(lambda match: _date_to_iso(match, *order), text)
    return text


def _date_to_iso(match: re.Match[str], day: int | None, month: int, year: int) -> str:
    day_number = None if day is None else int(match[day])
    return _iso_date(int(match[year]), _MONTHS[match[month]], day_number) or match[0]


# ---------------------------------------------------------------------------- question types

_WH_PHRASES = {"who": "who", "whom": "who", "whose": "who", "where": "where", "when": "when",
               "how many": "how many", "how much": "how many",
               **{f"{w} {n}": "when" for w in ("what", "which") for n in ("year", "date")},
               **{f"{w} {n}": "how many" for w in ("what", "which")
                  for n in ("number", "percentage", "percent")}}
_PREPOSITIONS = {"in", "on", "at", "by", "during", "from", "to", "for", "of", "since", "until",
                 "till", "after", "before", "with", "about", "around"}


def question_type(question: str) -> str:
    """One of QUESTION_TYPES, read from the wh-phrase at the start (after leading prepositions)."""
    if not isinstance(question, str):
        raise ValueError(f"question must be a string, got {type(question).__name__}")
    words = re.findall(r"[a-z]+", question.lower())  # "who's" → who, s
    if not words:
        raise ValueError(f"question has no words: {question!r}")
    while len(words) > 1 and words[0] in _PREPOSITIONS:  # "in which year", "to whom"
        words = words[1:]
    return _WH_PHRASES.get(" ".join(words[:2])) or _WH_PHRASES.get(words[0], "other")


def has_answer_type(answer: str, qtype: str) -> bool:
    """Whether the answer has the type a question of type qtype asks for.

    when: a year (3–4 digits, 100–2100) or a day with a month, after canonicalisation;
    how many: a number, digits or words; who/where: some token of the raw answer whose first
    letter is upper-case ("Paris", "3M", "O'Neill"), the pronoun "I" excepted; other: always.
    """
    if qtype not in QUESTION_TYPES:
        raise ValueError(f"unknown question type {qtype!r}; expected one of {QUESTION_TYPES}")
    if qtype == "when":
        form = canonical(answer)
        years = re.findall(r"(?<![\d.])\d{3,4}(?![\d.])", form)
        day_month = re.search(rf"(?<!\S)(\d{{1,2}} (of )?{_MONTH}|{_MONTH} \d{{1,2}})(?!\S)", form)
        return any(100 <= int(y) <= 2100 for y in years) or day_month is not None
    if qtype == "how many":
        return re.search(r"\d", canonical(answer)) is not None
    if qtype in ("who", "where"):
        words = ("".join(c for c in token if c.isalpha()) for token in answer.split())
        return any(w[:1].isupper() and w != "I" for w in words)
    return True


# ---------------------------------------------------------------------------- parsing

@dataclass(frozen=True)
class Refinement:
    """A parsed reply; a malformed one is KEEP with empty fields and the reason in error."""

    decision: str  # "KEEP" | "REVISE"
    answer: str
    evidence: str
    error: str = ""


_FIELDS = ("DECISION", "ANSWER", "EVIDENCE")
_FIELD = re.compile(r"^[ \t]*(decision|answer|evidence)[ \t]*:(.*)$", re.I | re.M)
_QUOTED = re.compile(r'["“”]([^"“”]*)["“”]')
# An id, bare or as [3], S3, snippet 3, snippet #3; never part of a word or a decimal.
_ID = re.compile(r"(?<!\w)(?<!\d\.)(?:snippets?\s*#?\s*|s)?(\d+)(?!\w)(?!\.\d)", re.I)


def parse_refinement(reply: str) -> Refinement:
    """The three fields of a reply; lines outside them (chatter) are ignored."""
    if not isinstance(reply, str):
        return _malformed(f"reply is a {type(reply).__name__}, not a string")
    values: dict[str, list[str]] = {name: [] for name in _FIELDS}
    for match in _FIELD.finditer(reply):
        values[match[1].upper()].append(match[2].strip())
    for name in _FIELDS:
        if len(values[name]) != 1:
            return _malformed(f"{'repeated' if values[name] else 'missing'} {name} field")
    (decision,), (answer,), (evidence,) = (values[name] for name in _FIELDS)
    known = re.fullmatch(r"(keep|revise)\W*", decision, re.I)
    if not known:
        return _malformed(f"unknown decision {decision!r}")
    if known[1].upper() == "REVISE" and not answer:
        return _malformed("REVISE with an empty ANSWER")
    if known[1].upper() == "REVISE" and re.fullmatch(r"\s*(?:\[\s*\d+\s*\]|(?:snippet\s*#?\s*|s)\d+)\W*", answer, re.I):
        return _malformed("ANSWER is only a snippet id")  # "[2]" is a citation, not an answer
    return Refinement(known[1].upper(), answer, evidence)


def _malformed(error: str) -> Refinement:
    return Refinement("KEEP", "", "", error=error)


def cited_snippets(evidence: str) -> tuple[list[int], str]:
    """0-based indices of the cited snippets (deduplicated, in order) and the first quoted span.

    Every number outside the quotes is an id, so an out-of-range one comes back (as a negative
    or too-large index) for ``validate`` to reject; numbers inside the quoted span are not ids.
    """
    span = next((s.strip() for s in _QUOTED.findall(evidence) if s.strip()), "")
    ids = [int(n) - 1 for n in _ID.findall(_QUOTED.sub(" ", evidence))]
    return list(dict.fromkeys(ids)), span


# ---------------------------------------------------------------------------- validation

@dataclass(frozen=True)
class Verdict:
    accepted: bool
    reason: str  # starts with one of REASONS


def validate(question: str, draft: str, proposal: Refinement, snippets: Sequence[str], *,
             canonicalise: bool = True) -> Verdict:
    """Accept a REVISE only when it passes checks a–f of the module docstring."""
    qtype = question_type(question)  # a bad question fails loudly, whatever the decision
    if proposal.error:
        return Verdict(False, f"{_MALFORMED}: {proposal.error}")
    if proposal.decision != "REVISE":
        return Verdict(False, _KEEP)
    ids, span = cited_snippets(proposal.evidence)
    if not ids and not span:
        return Verdict(False, _NO_EVIDENCE)
    for i in ids:
        if not 0 <= i < len(snippets):
            return Verdict(False, f"{_BAD_ID} {i + 1}, but only {len(snippets)} were shown")
    if canonicalise:
        answer, before = answer_core(proposal.answer, question), answer_core(draft, question)
        if not canonical(answer):
            return Verdict(False, _NOTHING_NEW)
        contains, form = _contains_all_tokens, canonical
    else:  # the ablation: the whole raw answer, a raw case-sensitive substring, raw equality
        answer, before = proposal.answer.strip(), draft.strip()
        contains, form = (lambda text, part: bool(part) and part in text), (lambda text: text)
    if span and not any(_contains_tokens(form(s), form(span)) if canonicalise else contains(s, span)
                        for s in snippets):
        return Verdict(False, _SPAN_NOT_FOUND)
    # Each piece alone, so an answer cannot straddle two snippets.
    evidence = [snippets[i] for i in ids] + ([span] if span else [])
    if not any(contains(form(piece), form(answer)) for piece in evidence):
        return Verdict(False, _ANSWER_NOT_FOUND)
    if form(answer) == form(before):
        return Verdict(False, _SAME_AS_DRAFT)
    if not has_answer_type(answer, qtype):
        return Verdict(False, f"{_WRONG_TYPE}: expected {_EXPECTED[qtype]}")
    return Verdict(True, _ACCEPTED)


# function words a restating sentence adds without adding information
_FUNCTION_WORDS = set("""is was are were be been by of in on at to for from with as and or it its he she
they his her their this that which who whom whose what where when is born there has had have""".split())


def answer_core(answer: str, question: str) -> str:
    """What an answer adds to its question: its raw words whose canonical form is neither a word of
    the question nor a function word, in order ("The Mayflower carried the Pilgrims to America in
    1620" → "Mayflower" for "which ship carried the pilgrims to america in 1620")."""
    asked = set(canonical(question).split()) | _FUNCTION_WORDS
    return " ".join(w for w in answer.split() if (c := canonical(w)) and not set(c.split()) <= asked)


def _contains_all_tokens(text: str, part: str) -> bool:
    """Whether every token of canonical `part` occurs in canonical `text` (never if empty)."""
    hay = text.split()
    return bool(part.split()) and all(any(_same_token(t, h) for h in hay) for t in part.split())


def _contains_tokens(text: str, part: str) -> bool:
    """Whether canonical `part` occurs in canonical `text` on token boundaries (never if empty)."""
    hay, needle = text.split(), part.split()
    return bool(needle) and any(all(map(_same_token, needle, hay[i:i + len(needle)]))
                                for i in range(len(hay) - len(needle) + 1))


def _same_token(needle: str, token: str) -> bool:
    # A year or year-month occurs in a fuller ISO date: "1989" in "1989-11-09".
    return needle == token or (_ISO.fullmatch(token) is not None and token.startswith(needle + "-"))
