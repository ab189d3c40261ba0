"""AlignRAG's critique format, the kit's deterministic contrastive critique, and context granularity.

AlignRAG (critique-driven alignment) trains a critic LM on *contrastive critiques*: for a training
question q with retrieved documents D, a weak model writes a rationale and answer (y_unexp) and a
strong one writes the expected rationale (y_exp); the critique says what separates them. Every
critique has one shape, and the critic learns to write it on one line::

    The critique for the rationale is: <what is wrong or right> The better rationale should be: <…>

The paper writes these critiques by prompting a strong LLM with both rationales. At the kit's
scale the "strong" model is the same 135M model shown the gold answer, and a 135M model cannot
write a useful critique, so the training target is **the kit's deterministic critique**, built
from the evidence alone (``contrastive_critique``):

a. is the weak answer right (a gold alias occurs in it, ``answer_in``)?
b. which document holds the answer (``evidence_span``: the first document whose content holds a
   gold alias, and a window of its sentence), cited as "document [i]", 1-based as in the prompts;
c. the first checkable claim of the weak reasoning that no document supports (``unsupported_claims``:
   numbers and capitalised names);
d. what the strong rationale concludes (the gold alias it names, else the first gold answer).

It is short (about 45 words after the first head, ~60 in all) because the critic generates it
with a budget of about 56 tokens: the evidence is quoted once, in the better rationale when the
weak answer is right, in the critique when it is wrong.

Context granularity labels a training document set as the paper does — relevant or noisy,
helpful or unhelpful, complete or incomplete (``granularity``) — and ``augment`` makes a noisy set
by swapping documents for ones of unrelated questions.
"""
from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from robustkit.data.records import Passage, Question, normalize_answer
from robustkit.metrics import substring_match

CRITIQUE_HEAD = "The critique for the rationale is:"
BETTER_HEAD = "The better rationale should be:"

_HEADS = re.compile(f"({re.escape(CRITIQUE_HEAD)})|({re.escape(BETTER_HEAD)})", re.I)
_LABELS = (("relevant", "noisy"), ("helpful", "unhelpful"), ("complete", "incomplete"))
_ABSTENTIONS = ("unknown", "I don't know", "cannot be determined", "not enough information", "no answer")


@dataclass(frozen=True)
class Rationale:
    """One reasoning sentence and its short answer (y in the paper)."""

    reasoning: str
    answer: str

    def __post_init__(self):
        _require(self.reasoning, str, "Rationale.reasoning"), _require(self.answer, str, "Rationale.answer")

    @property
    def text(self) -> str:
        return f"Reasoning: {self.reasoning}\nAnswer: {self.answer}"


@dataclass(frozen=True)
class Granularity:
    """The three granularity labels of one training document set."""

    relevance: str  # "relevant" | "noisy" (augmented with irrelevant documents)
    helpfulness: str  # "helpful" | "unhelpful" (some document states a gold answer)
    completeness: str  # "complete" | "incomplete" (every hop's gold document is present)

    def __post_init__(self):
        for name, allowed in zip(("relevance", "helpfulness", "completeness"), _LABELS):
            if getattr(self, name) not in allowed:
                raise ValueError(f"Granularity.{name} must be one of {allowed}, got {getattr(self, name)!r}")


# ---------------------------------------------------------------------------- the format

def split_critique(text: str) -> tuple[str, str]:
    """The critique part and the better-rationale part of ``text``, stripped.

    Heads match case-insensitively; each part runs from the first occurrence of its head to the
    next head or the end, and is "" when its head is missing.
    """
    heads = list(_HEADS.finditer(_require(text, str, "critique text")))
    ends = [m.start() for m in heads[1:]] + [len(text)]
    critique, better = (next((text[m.end():end].strip() for m, end in zip(heads, ends) if m[group]), "")
                        for group in (1, 2))
    return critique, better


def check_target(text: str) -> str:
    """``text`` unchanged when it is a well-formed training target, else a ValueError saying why.

    Well formed: it starts with CRITIQUE_HEAD, has BETTER_HEAD after it, each head once, and
    something follows each head.
    """
    if not isinstance(text, str):
        raise ValueError(f"a critique target must be a str, got {type(text).__name__}")
    heads = list(_HEADS.finditer(text))
    counts = {head: sum(1 for m in heads if m[group]) for group, head in ((1, CRITIQUE_HEAD), (2, BETTER_HEAD))}
    missing = [repr(h) for h, n in counts.items() if n == 0]
    repeated = [(h, n) for h, n in counts.items() if n > 1]
    if missing:
        raise ValueError(f"critique target lacks {' and '.join(missing)}: {text!r:.80}")
    if repeated:
        raise ValueError(f"critique target repeats {repeated[0][0]!r} ({repeated[0][1]} times): {text!r:.80}")
    if heads[0][2]:
        raise ValueError(f"critique target has {BETTER_HEAD!r} before {CRITIQUE_HEAD!r}: {text!r:.80}")
    if text[:heads[0].start()].strip():
        raise ValueError(f"critique target has text before {CRITIQUE_HEAD!r}: "
                         f"{text[:heads[0].start()].strip()!r:.60}")
    for head, part in zip((CRITIQUE_HEAD, BETTER_HEAD), split_critique(text)):
        if not part:
            raise ValueError(f"critique target has nothing after {head!r}: {text!r:.80}")
    return text


# ---------------------------------------------------------------------------- the evidence

def answer_in(text: str, answers: Sequence[str]) -> bool:
    """Whether a gold alias occurs in ``text`` as whole words (the kit's ``substring_match``)."""
    return bool(substring_match(_require(text, str, "text"), _check_answers(answers)))


def evidence_span(docs: Sequence[Passage], answers: Sequence[str],
                  max_words: int = 12) -> tuple[int, str] | None:
    """The first document holding a gold alias, and a window of its sentence around the alias.

    Args:
        docs: the documents, in prompt order; answers: gold answer first, then aliases.
        max_words: the most words of the window, trimmed around the alias (centred, shifted at
            the sentence's ends); an alias longer than this is quoted whole.
    Returns:
        (0-based document index, the window verbatim less trailing punctuation), or None when no
        document holds an alias.
    """
    answers = _check_answers(answers)
    if isinstance(max_words, bool) or not isinstance(max_words, int) or max_words < 1:
        raise ValueError(f"max_words must be a positive int, got {max_words!r}")
    for index, doc in enumerate(_check_docs(docs)):
        if not answer_in(doc.content, answers):
            continue
        # an alias split by a sentence boundary we drew wrongly is still found in the whole text
        sentence = next((s for s in _sentences(doc.content) if answer_in(s, answers)), doc.content)
        words = sentence.split()
        # the first occurrence: the shortest prefix holding an alias, then its shortest suffix
        end = next(j for j in range(1, len(words) + 1) if answer_in(" ".join(words[:j]), answers))
        start = next(i for i in range(end - 1, -1, -1) if answer_in(" ".join(words[i:end]), answers))
        if len(words) <= max_words:
            lo, hi = 0, len(words)
        elif end - start >= max_words:
            lo, hi = start, end
        else:  # centred on the alias, shifted back inside the sentence at its end
            lo = max(start - (max_words - (end - start)) // 2, 0)
            hi = min(lo + max_words, len(words))
            lo = hi - max_words
        return index, " ".join(words[lo:hi]).rstrip(",;:.!?")
    return None


def unsupported_claims(reasoning: str, docs: Sequence[Passage]) -> list[str]:
    """The checkable claims of ``reasoning`` that no document supports, in order, deduplicated.

    Claims are numbers (years included) and runs of capitalised words (names, "of"/"de"… allowed
    inside); a common word opening a sentence ("The", "According"), the words "Document" and
    "Answer", and document ids ("[2]", "document 3") are not claims. A name is supported when it
    occurs in some document under the kit's answer normalisation; a number when the same number
    (thousands separators and ordinal suffixes dropped) is written in some document.
    """
    _require(reasoning, str, "reasoning")
    docs = _check_docs(docs)
    # SQuAD normalisation deletes punctuation, fusing "1889–1890" into one token and "3.5" into
    # "35", so numbers are compared as numbers
    numbers = {n.replace(",", "") for d in docs for n in _NUMBER.findall(d.content)}
    claims: dict[str, str] = {}
    for claim in _claims(_DOC_REF.sub(" , ", reasoning)):
        is_number = claim[0].isdigit()
        key = claim.replace(",", "") if is_number else normalize_answer(claim)
        if key in claims or not key:
            continue
        supported = key in numbers if is_number else any(answer_in(d.content, [claim]) for d in docs)
        claims[key] = "" if supported else claim
    return [c for c in claims.values() if c]


# ---------------------------------------------------------------------------- the critique

def contrastive_critique(question: Question, docs: Sequence[Passage], weak: Rationale, strong: Rationale,
                         *, max_words: int = 12) -> str:
    """The kit's deterministic contrastive critique of ``weak`` (a one-line training target).

    Three cases (module docstring for the parts a–d): the weak answer is right and a document
    holds the answer; it is wrong and a document holds the answer; no document holds the answer,
    so the better rationale concludes "unknown". An unsupported claim of the weak reasoning is
    named in every case. The result always passes ``check_target``.
    """
    _require(question, Question, "question")
    _require(weak, Rationale, "weak"), _require(strong, Rationale, "strong")
    docs = _check_docs(docs, nonempty=True)
    answers = question.answers
    found = evidence_span(docs, answers, max_words)
    said = _clip(weak.answer)
    if found is None:
        if not said or answer_in(weak.answer, _ABSTENTIONS):
            critique = "None of the documents contains the answer, and the rationale rightly does not guess."
        else:
            critique = ("None of the documents contains the answer, so the rationale should not "
                        f"guess '{said}'.")
        better = "The documents do not answer the question, so the answer is unknown."
    else:
        cite, quote = f"document [{found[0] + 1}]", '"' + _clean(found[1]).replace('"', "'") + '"'
        if answer_in(weak.answer, answers):
            critique = f"The answer '{said}' is right, as {cite} says."
            better = f"{cite.capitalize()} says {quote}, so the answer is {_clean(answers[0])}."
        else:
            critique = (f"The answer '{said}' is not what {cite} says: {quote}." if said
                        else f"The rationale gives no answer, but {cite} says {quote}.")
            # the gold alias the strong rationale names: its conclusion in the kit's words, never
            # a sentence the 135M model wrapped around it
            named = next((a for a in answers if answer_in(strong.answer, [a])), answers[0])
            better = f"As {cite} says, the answer is {_clean(named)}."
    claims = unsupported_claims(weak.reasoning, docs)
    if claims:
        critique += f" The rationale claims '{_clean(claims[0])}', which no document supports."
    return check_target(f"{CRITIQUE_HEAD} {critique} {BETTER_HEAD} {better}")


# ---------------------------------------------------------------------------- context granularity

def granularity(question: Question, docs: Sequence[Passage], augmented: bool) -> Granularity:
    """The granularity labels of a training set: noisy if ``augmented`` with irrelevant documents;
    helpful if some document holds a gold alias; complete if all of a multi-hop question's gold
    documents (2+ ``gold_ids``) are present, else complete exactly when helpful."""
    _require(question, Question, "question"), _require(augmented, bool, "augmented")
    docs = _check_docs(docs, nonempty=True)
    helpful = any(answer_in(d.content, question.answers) for d in docs)
    # a multi-hop question needs every hop's document; an answer alone may sit in a bridge one
    gold = set(question.gold_ids)
    complete = gold <= {d.id for d in docs} if len(gold) >= 2 else helpful
    return Granularity("noisy" if augmented else "relevant", "helpful" if helpful else "unhelpful",
                       "complete" if complete else "incomplete")


def augment(docs: Sequence[Passage], pool: Sequence[Passage], rng: random.Random,
            n_irrelevant: int = 1) -> list[Passage]:
    """``docs`` with its last ``n_irrelevant`` documents replaced by ones drawn by ``rng`` from
    ``pool`` (documents of unrelated questions) whose ids are not in ``docs``; order kept."""
    docs, pool = _check_docs(docs), _check_docs(pool, "pool")
    _require(rng, random.Random, "rng")
    if isinstance(n_irrelevant, bool) or not isinstance(n_irrelevant, int) \
            or not 0 <= n_irrelevant < len(docs):
        raise ValueError(f"n_irrelevant must be in [0, {len(docs)}) for {len(docs)} documents "
                         f"(at least one retrieved document stays), got {n_irrelevant}")
    present = {d.id for d in docs}
    candidates = list({d.id: d for d in pool if d.id not in present}.values())  # one per id, pool order
    if len(candidates) < n_irrelevant:
        raise ValueError(f"pool has {len(candidates)} document(s) not already in docs, "
                         f"need n_irrelevant={n_irrelevant}")
    return docs[:len(docs) - n_irrelevant] + rng.sample(candidates, n_irrelevant)


# ---------------------------------------------------------------------------- helpers

def _require(value, kind: type, name: str):
    if not isinstance(value, kind):
        raise TypeError(f"{name} must be a {kind.__name__}, got {type(value).__name__} {value!r:.40}")
    return value


def _check_answers(answers: Sequence[str]) -> tuple[str, ...]:
    # a bare string would be read as its characters: answers "1", "8", "8", "9"
    items = None if isinstance(answers, (str, bytes)) or not isinstance(answers, Iterable) else tuple(answers)
    if items is None or not all(isinstance(a, str) for a in items):
        raise TypeError(f"answers must be a list or tuple of strings, got {answers!r:.60}")
    answers = items
    if not any(normalize_answer(a) for a in answers):
        raise ValueError(f"answers must hold at least one non-empty gold answer, got {answers!r:.60}")
    return answers


def _check_docs(docs: Sequence[Passage], name: str = "docs", nonempty: bool = False) -> list[Passage]:
    items = None if isinstance(docs, (str, bytes)) or not isinstance(docs, Iterable) else list(docs)
    if items is None or not all(isinstance(d, Passage) for d in items):
        raise TypeError(f"{name} must be a list of Passages, got {docs!r:.60}")
    if nonempty and not items:
        raise ValueError(f"{name} is empty: a training set needs at least one document")
    return items


def _clean(text: str) -> str:
    """One line with single spaces and no head phrase, so the target stays well formed."""
    return " ".join(_HEADS.sub(" ", text).split())


def _clip(answer: str, n: int = 6) -> str:
    words = _clean(answer).split()
    return " ".join(words[:n]) + ("…" if len(words) > n else "")


# a sentence ends at . ! ? before whitespace, unless the word is an initial or a known abbreviation
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_ABBREVIATION = re.compile(r"(?:\b[A-Z]|\b(?:Mr|Mrs|Ms|Dr|St|Mt|Jr|Sr|vs|No|Inc|Co|Ltd|Gen|Col|Lt))\.$")


def _sentences(text: str) -> list[str]:
    sentences: list[str] = []
    for piece in _SENTENCE_END.split(text.strip()):
        if sentences and (_ABBREVIATION.search(sentences[-1]) or piece[:1].islower()):
            sentences[-1] += " " + piece
        else:
            sentences.append(piece)
    return sentences


_NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?")
_DOC_REF = re.compile(r"\[\s*\d+\s*\]|\b(?:documents?|docs?|passages?|snippets?)\s*#?\s*\[?\d+\]?"
                      r"(?:\s*(?:,|and|or|&)\s*\[?\d+\]?)*", re.I)
_INITIALS = re.compile(r"(?:[A-Z]\.)+")  # "U.S.", "J.": part of a name, not a sentence end
_CONNECTORS = {"of", "de", "da", "del", "der", "van", "von", "la", "le", "du"}
_NOT_CLAIMS = {"document", "documents", "doc", "passage", "passages", "answer", "reasoning", "question", "i"}
# words that open sentences without naming anything; a capitalised one mid-sentence stays a name
_COMMON = set("""the a an this that these those it its he she they we you his her their our my there here
in on at by for from with of to as after before during since when where who what which why how while
although though because so thus therefore hence however but and or yes no not according based both
neither either each all some many most one if then also only first finally given overall none is was
are were did does do has have had can could will would should""".split())
_EDGE = "\"'“”‘’()[]{}<>,;:.!?*"


def _claims(text: str) -> list[str]:
    """Numbers and capitalised-name runs of ``text``, in order of appearance."""
    claims: list[str] = []
    run: list[str] = []
    initial = True

    def flush() -> None:
        while run and run[-1].lower() in _CONNECTORS:
            run.pop()
        if run:
            claims.append(" ".join(run))
        run.clear()

    for raw in text.split():
        word = raw.lstrip(_EDGE)
        core = word.rstrip(_EDGE)
        if _INITIALS.fullmatch(core + ".") and word.startswith(core + "."):
            core += "."
        trailing = word[len(core):]
        if len(word) < len(raw) or not core:  # an opening quote or bracket starts a new run
            flush()
        if any(c.isdigit() for c in core):
            flush()
            claims.extend(_NUMBER.findall(core))
        elif core[:1].isupper() and core.lower() not in _NOT_CLAIMS \
                and not (initial and core.lower() in _COMMON):
            run.append(core)
        elif run and core in _CONNECTORS:
            run.append(core)  # "Bank of England"; dropped again if no name follows
        else:
            flush()
        if trailing:  # a comma or a full stop ends a name
            flush()
        initial = any(c in ".!?:" for c in trailing) or (initial and not core)
    flush()
    return claims
