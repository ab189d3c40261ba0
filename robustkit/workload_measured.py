"""What ``workload`` measured rather than derived: properties of the data and of the kit's outputs.

Everything else the workload uses is read where it is decided: the knobs from each method's
``settings``, the prompts from the methods' own builders (``workload_prompts`` counts them). What
stays here depends on the data or on what a model wrote, so no code states it: split sizes, passage
and question lengths, how long replies run, how often a step fires — with the token counts of data
they imply (``passage_tokens``, ``pair_tokens`` …). Where and how each was measured is on the
results page (figures/README.md, "The workload's measured constants"): tiny's are SmolLM2 on
data/mini, small's SmolLM2 on the real data; bigger scales take small's unless a bigger model
surely changes them (marked assumed).
"""
from __future__ import annotations

from robustkit.config import Scale
from robustkit.crossencoder import MAX_LENGTH

# Split sizes where a knob is 0 (= all): (train, test) questions per dataset; data/mini's two-hop
# and misconception questions; HotpotQA's dev questions and paragraphs per question; TruthfulQA.
TRAIN_TEST = {"mini": (104, 56), "nq_open_oracle": (2163, 492)}
MINI_MULTIHOP, MINI_MISCONCEPTIONS, HOTPOT, HOTPOT_PARAGRAPHS, TRUTHFULQA = (29, 15), (43, 21), 488, 9.86, 817

# Per corpus: deciles (5th…95th percentile) of a passage's words as prompts show it (title + text),
# SmolLM2 tokens per word, MiniLM WordPiece tokens per word (cross-encoder, NLI and embedder inputs;
# taken for DeBERTa and bge too), and its passages (each embedded once per embedder).
CORPORA = {
    "mini": ((53, 58, 61, 63, 65, 68, 70, 73, 78, 87), 1.349, 1.232, 964),
    "nq": ((30, 48, 60, 70, 81, 93, 102, 103, 104, 108), 1.447, 1.321, 2600),
    "tqa_A": ((25, 33, 38, 43, 49, 53, 58, 65, 75, 92), 1.258, 1.272, 817),
    "tqa_B": ((21, 29, 33, 38, 43, 47, 53, 59, 68, 86), 1.246, 1.269, 1634),
    "hotpot": ((28, 44, 56, 66, 76, 86, 99, 113, 134, 180), 1.513, 1.335, 4811),
}
# Mean tokens of a query (SmolLM2, MiniLM); "_rewrite": a biased rewrite of the dataset's questions.
QUERY = {"mini": (11.1, 9.6), "mini_rewrite": (22.5, 19.6), "nq": (10.7, 9.9), "nq_rewrite": (22.1, 19.9),
         "truthfulqa": (13.0, 13.0), "mini_misconception": (13.7, 13.7), "hotpot": (20.6, 18.7),
         "mini_multihop": (15.4, 13.1)}
# SmolLM2 tokens of a training question's gold answer (teacher-forced in the soft labels, shown to
# AlignRAG's strong rationales).
GOLD_ANSWER = {"mini": 3.0, "nq_open_oracle": 4.4}
# MiniLM tokens of an SNLI training pair and of an SNLI/MNLI dev pair; TruthfulQA's distinct MC1 ∪ MC2
# options per question and SmolLM2 tokens of one; the texts TruthfulQA's embedding rule embeds per
# question and call (its references and "I have no comment") and MiniLM tokens of one.
SNLI_TRAIN, SNLI_DEV, MC_OPTIONS, MC_OPTION, TQA_TEXTS, TQA_TEXT = 26, 32, 7.59, 11.1, 8.6, 16

# New tokens a reply runs to, as (share of its budget, cap in tokens): what SmolLM2 wrote into the
# call cache at tiny, kept at every scale (a bigger model stops sooner: this errs long).
DECODE = {"read": (0.9, 15.7),  # the reader's short answers
          "adversary": (1.0, 22.0), "adversary_III": (1.0, 19.0),  # a type I/II rewrite; a type III sentence
          "no_stop": (1.0, None),  # FVA's kill queries decode without a stop string: the whole budget
          "revision": (0.47, None),  # FVA's revisions; CRAG's query rewrites alike
          "cr_answer": (0.9, 10.5),  # CounterRefine's constrained REVISE answers
          "cr_free": (1.0, 16.0),  # assumed: a DECISION / ANSWER / EVIDENCE reply in free decoding
          "rationale": (0.88, None), "answer": (0.74, None),  # AlignRAG's rationale; its answer
          "critique": (0.78, None)}  # AlignRAG's critiques: a critic's and the generator's own feedback


# How often a method's step fires, per scale
RATES = {
    "tiny": dict(attempts=57 / 24,  # adversary calls per type I/II slot (a repeated prompt is a cache hit)
                 s_pos=0.347, f_pos=1.0,  # labels with s > 0; training slots that give a group
                 kept=1.31, none=0.05,  # Self-RAG: passages kept per question; questions with none kept
                 crag_redo=0.528, falsified=0.639,  # CRAG's share of questions rewritten; FVA's falsified
                 cr_revise=0.73),  # CounterRefine: P(REVISE) over its threshold
    "small": dict(attempts=57 / 24, s_pos=0.035, f_pos=0.40, kept=1.70, none=0.05, crag_redo=0.471,
                  falsified=0.660, cr_revise=0.60),
}
RATES["colab"] = RATES["paper"] = dict(RATES["small"], attempts=1.3, s_pos=0.2, f_pos=0.75)  # assumed: 3B+ models
POOL_GROWTH = 0.227  # each rewrite adds POOL_GROWTH·M new candidates to a question's labelling pool (tiny)
NEG_FOUND = 0.89  # s = 0 candidates in a rewrite's top M: NEG_FOUND·M·(1 - s_pos) (tiny)
ALIAS_HIT = {"mini": 1.0, "nq_open_oracle": 0.9}  # warm-start questions with a gold-bearing candidate; NQ assumed
CR_SNIPPETS, CR_QUERIES = 1.14, 2.5  # CounterRefine: merged snippets per k; second-pass queries (assumed)


def passage_tokens(corpus: str, cap: int) -> float:
    """SmolLM2 tokens of one passage of ``corpus`` clipped to ``cap`` words, with its separator."""
    return _words(corpus, cap) * CORPORA[corpus][1] + 2


def pair_tokens(corpus: str, query: str, cap: int = 999) -> int:
    """Cross-encoder tokens of (query, passage): WordPiece, at most the kit's ``MAX_LENGTH``."""
    return min(MAX_LENGTH, round(QUERY[query][1] + _words(corpus, cap) * CORPORA[corpus][2] + 3))


def embedded_tokens(corpus: str) -> int:
    """Embedder tokens of one passage of ``corpus`` (WordPiece, with [CLS] and [SEP])."""
    return round(_words(corpus, 999) * CORPORA[corpus][2] + 2)


def decoded(kind: str, budget: int) -> float:
    """Average new tokens of a ``kind`` reply under ``budget`` (``DECODE``)."""
    share, cap = DECODE[kind]
    return min(share * budget, cap if cap is not None else budget)


def qa_sets(s: Scale, n_multihop, n_factual, n_hotpotqa, n_nq, n_train) -> list[tuple]:
    """``qa_sets.short_answer_sets`` at ``s`` as counts, two-hop first: (name, corpus, query key, evaluated,
    training questions, passages a question may search)."""
    if s.dataset == "mini":
        (hop_train, hop_test), (train, test) = MINI_MULTIHOP, TRAIN_TEST["mini"]
        return [("mini-multihop", "mini", "mini_multihop", min(n_multihop or hop_test, hop_test),
                 min(n_train or hop_train, hop_train), 999),
                ("mini-factual", "mini", "mini", min(n_factual or test, test), min(n_train or train, train), 999)]
    hot = min(n_hotpotqa or HOTPOT, HOTPOT)  # HotpotQA's training questions are its unevaluated dev ones
    train, test = TRAIN_TEST["nq_open_oracle"]
    return [("hotpotqa", "hotpot", "hotpot", hot, min(n_train or HOTPOT, HOTPOT - hot), HOTPOT_PARAGRAPHS),
            ("nq_open", "nq", "nq", min(n_nq or test, test), min(n_train or train, train), 999)]


def _words(corpus: str, cap: int) -> float:
    return sum(min(w, cap) for w in CORPORA[corpus][0]) / 10
