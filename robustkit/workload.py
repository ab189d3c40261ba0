"""The model work each notebook does at a scale: what ``robustkit.timings`` turns into minutes.

    rows = notebook_work("02", "colab")     # list[Work], from a cold cache, notebooks run in order
    stages = stage_work("04", "tiny")       # the same rows by stage, for a breakdown

Counts follow the knobs (``rk.<method>.settings``, ``crossencoder.relevance.RECIPES``, ``nli.TRAINING``,
``config.SCALES``) and leave out what is cached already: the LLM call cache keys a prompt, cross-encoder
scores are stored per checkpoint, stage artifacts (rewrites, labels, critics, the NLI model) are reused
downstream. Different methods reading the same context also hit the cache; that overlap depends on the
data and is not subtracted (an upper bound). Tokens: SmolLM2's tokenizer on the kit's prompt builders
and data (Qwen's, not available offline, assumed alike). Rates are measured at tiny/small, assumed beyond.
"""
from __future__ import annotations

from dataclasses import dataclass

from robustkit.config import Scale, get_scale


@dataclass(frozen=True)
class Work:
    what: str
    role: str  # generator | teacher | adversary | embedder | critic_init | relevance_ce | nli
    kind: str  # generate | forward | train | lora
    items: int  # prompts, (query, passage) pairs, or training examples × epochs
    tokens_in: int  # typical tokens per item (prompt with chat template and system prompt; or pair)
    tokens_out: int = 0  # average new tokens per generated item (measured at tiny: ``_out``)
    shared_prefix: int = 0  # tokens of each prompt shared with others (robustkit/prefix.py)
    share: int = 1  # how many prompts share that prefix
    budget: int = 0  # max_new_tokens: a batch decodes until its longest row stops, often this


# --- measured constants ---------------------------------------------------------------------------
# Split sizes where a knob is 0 (= all): data/mini/README.md; NQ-open oracle's 80/20 split counted with
# rk.data.load (2,163 / 492); HotpotQA 488 (9.86 paragraphs each), TruthfulQA 817 (shared/datasets).
TRAIN_TEST = {"mini": (104, 56), "nq_open_oracle": (2163, 492)}
MINI_MULTIHOP, MINI_MISCONCEPTIONS, HOTPOT, HOTPOT_PARAGRAPHS, TRUTHFULQA = (29, 15), (43, 21), 488, 9.86, 817
# Per corpus: deciles (5th…95th percentile) of a passage's words as prompts show it (title + text),
# SmolLM2 tokens per word, MiniLM WordPiece tokens per word (cross-encoder and NLI pairs; taken for
# DeBERTa too), measured on 400 passages each; and its passages (embedded once per embedder).
CORPORA = {
    "mini": ((53, 58, 61, 63, 65, 68, 70, 73, 78, 87), 1.349, 1.232, 964),
    "nq": ((30, 48, 60, 70, 81, 93, 102, 103, 104, 108), 1.447, 1.321, 2600),
    "tqa_A": ((25, 33, 38, 43, 49, 53, 58, 65, 75, 92), 1.258, 1.272, 817),
    "tqa_B": ((21, 29, 33, 38, 43, 47, 53, 59, 68, 86), 1.246, 1.269, 1634),
    "hotpot": ((28, 44, 56, 66, 76, 86, 99, 113, 134, 180), 1.513, 1.335, 4811),
}
# Mean tokens of a query (SmolLM2, MiniLM). NQ rewrites: NQ questions plus the 11.4 tokens data/mini's
# hand-written rewrites add to their questions (22.5 vs 11.1).
QUERY = {"mini": (11.1, 9.6), "mini_rewrite": (22.5, 19.6), "nq": (10.7, 9.9), "nq_rewrite": (22.1, 19.9),
         "truthfulqa": (13.0, 13.0), "mini_misconception": (13.7, 13.7), "hotpot": (20.6, 18.7),
         "mini_multihop": (15.4, 13.1)}
# Each prompt rendered with its chat template, system prompt, instruction and prefill, but with empty
# passages, question and answer (SmolLM2 tokens; HEAD of them are the template and system prompt).
# The adversary's, by perturbation type: I/II (demonstrations and the question) and III (a domain only).
HEAD = 26
OVERHEAD = {"reader": 54, "llm_rerank": 56, "kill": 72, "revision": 111, "is_relevant": 48, "is_supported": 53,
            "closed_book": 36, "crag_rewrite": 51, "cr_refine": 92, "ar_reason": 49, "ar_answer": 58,
            "ar_strong": 51, "ar_critic": 67, "ar_selffb": 60, "ar_refine": 62, "ar_closed": 46, "adversary": 168,
            "adversary_III": 49}
# MiniLM tokens of an SNLI training pair (26) and of an SNLI/MNLI dev pair (32); distinct MC1 ∪ MC2
# options per TruthfulQA question and tokens of one (question + option); texts TruthfulQA's embedding
# rule embeds per question and call (its references and "I have no comment").
SNLI_TRAIN, SNLI_DEV, MC_OPTIONS, MC_PROMPT, TQA_TEXTS = 26, 32, 7.59, 52, 8.6


def _out(kind: str, budget: int) -> float:
    """Average new tokens, measured on SmolLM2's cached outputs at tiny ((n) calls), as a share of
    the budget or a cap; kept at every scale (bigger models stop sooner: this errs long)."""
    return {"read": min(0.9 * budget, 15.7),  # reader: 11.0 of 12 (8), 14.2 of 16 (441), 15.7 of 24 (20)
            "adversary": min(budget, 22.0), "adversary_III": min(budget, 19.0),  # of 32 (82 and 8)
            "no_stop": budget,  # FVA's kill queries decode without a stop string: 40 of 40 (5)
            "revision": 0.47 * budget,  # FVA revisions 15.0 of 32 (3); CRAG rewrites 10.3 of 24 (3)
            "cr_answer": min(0.9 * budget, 10.5),  # constrained REVISE answers: 10.8 of 12 (4), 10.5 of 24 (2)
            "cr_free": min(budget, 16.0),  # assumed: the length of a DECISION / ANSWER / EVIDENCE reply
            "rationale": 0.88 * budget, "answer": 0.74 * budget,  # AlignRAG: 21.0 of 24 (6), 5.9 of 8 (8)
            "critique": 0.78 * budget}[kind]  # critic 36.0 of 40 (2), self-feedback 26.2 of 40 (4)


# Data-dependent rates: tiny is SmolLM2 on data/mini, small SmolLM2 on the real data; colab and paper
# take small's except where a bigger teacher/adversary surely changes them ("assumed", unmeasured).
RATES = {
    "tiny": dict(attempts=57 / 24,  # adversary calls per type I/II slot: 57 for 24 in a tiny run's call cache
                 s_pos=0.347, f_pos=1.0,  # labels with s > 0 (42 of 121); slots giving a group (36 of 36)
                 kept=1.31, none=0.05,  # Self-RAG passages kept per question: 5.667 calls = 3 + 2·kept + none
                 crag_redo=0.528, falsified=0.639,  # CRAG: 1.528 calls a question, FVA 2.639 (notebook 05)
                 cr_revise=0.73),  # P(REVISE) over the threshold: 3.5 / 3.375 / 3.5 calls (notebook 06)
    "small": dict(attempts=57 / 24, s_pos=0.035, f_pos=0.40,  # results page: 96.5% of labels s = 0; 60 of 100 no positive
                  kept=1.70, none=0.05, crag_redo=0.471, falsified=0.660,  # figures/fva_cost_small.csv
                  cr_revise=0.60),  # counterrefine_table4_small.csv: REVISE proposed 70/74/68 and 56/44/48%
}
RATES["colab"] = RATES["paper"] = dict(RATES["small"], attempts=1.3, s_pos=0.2, f_pos=0.75)  # assumed: 3B+ models
POOL_GROWTH = 0.227  # a rewrite adds 0.227·M new candidates to the pool: 121 labels, 12 questions, M 6, K 3 (tiny)
NEG_FOUND = 0.89  # s = 0 candidates in a rewrite's top-M: 0.89·M·(1 - s_pos), 3.5 of 6 at tiny
ALIAS_HIT = {"mini": 1.0, "nq_open_oracle": 0.9}  # warm-start questions with a gold-bearing candidate: 104/104; NQ assumed
CR_SNIPPETS, CR_QUERIES = 1.14, 2.5  # 5.69 merged snippets at k 5 (notebook 06); second-pass queries (assumed)
VAL = 0.15  # crossencoder.groups.split_groups holds 15% of the questions out for validation
_KEYS = {"mini": ("mini", "mini", "mini_rewrite"), "nq_open_oracle": ("nq", "nq", "nq_rewrite")}  # CoRM's data


def _words(corpus: str, cap: int) -> float:
    return sum(min(w, cap) for w in CORPORA[corpus][0]) / 10


def _ptok(corpus: str, cap: int) -> float:
    """SmolLM2 tokens of one passage clipped to ``cap`` words, with its separator."""
    return _words(corpus, cap) * CORPORA[corpus][1] + 2


def _pair(corpus: str, query: str, cap: int = 999) -> int:
    """Cross-encoder tokens of (query, passage): WordPiece, at most the kit's MAX_LENGTH 256."""
    return min(256, round(QUERY[query][1] + _words(corpus, cap) * CORPORA[corpus][2] + 3))


def _share(s: Scale, prompts: float, corpus: str, least: int = 1) -> int:
    """Prompts sharing a passage prefix: those about one passage, batched together (prefix.plan)."""
    return int(min(s.gen_batch_size, max(least, prompts / CORPORA[corpus][3])))


def _gen(what, role, items, tokens_in, out, budget, prefix=0, share=1) -> Work:
    return Work(what, role, "generate", round(items), round(tokens_in), round(out), round(prefix), share, budget)


def _fwd(what, role, items, tokens_in, prefix=0, share=1) -> Work:
    return Work(what, role, "forward", round(items), round(tokens_in), 0, round(prefix), share)


def _adversary(what: str, slots: float, attempts: float) -> list[Work]:
    """``perturb.synthesize`` (32 new tokens, stop at a newline): a rejected type I/II rewrite is retried with a
    new prompt (a retry that repeats one is a cache hit, hence the measured rate); type III's prompt
    names only one of 10 domains, so its slots, a third, ask 10 distinct prompts at most."""
    return [_gen(f"{what}, types I/II", "adversary", slots * 2 / 3 * attempts, OVERHEAD["adversary"],
                 _out("adversary", 32), 32),
            _gen(f"{what}, type III", "adversary", min(10, slots / 3), OVERHEAD["adversary_III"],
                 _out("adversary_III", 32), 32)]


def _training(what, groups, size, epochs, tokens) -> list[Work]:
    """A cross-encoder's training: every pair of the training groups per epoch, forward and backward;
    each epoch ends with a forward pass over the validation groups (VAL of the questions)."""
    return [Work(what, "critic_init", "train", round(groups * (1 - VAL) * size * epochs), tokens),
            _fwd(f"{what}: validation", "critic_init", groups * VAL * size * epochs, tokens)]


def _relevance_role(s: Scale) -> str:
    """Who scores relevance: the hub's MS MARCO cross-encoder (colab, paper) or the kit's own."""
    from robustkit.models import MODEL_REGISTRY
    return "relevance_ce" if s.name in MODEL_REGISTRY["relevance_ce"] else "critic_init"


def _corm(s: Scale):
    """CoRM's knobs and the counts notebooks 01-04 share."""
    import robustkit as rk
    cfg, r = rk.corm.settings(s), RATES[s.name]
    train_n, test_n = TRAIN_TEST[s.dataset]
    n_train, n_test = min(s.n_train_questions or train_n, train_n), min(s.n_test_questions or test_n, test_n)
    pool = cfg.m_candidates * (1 + cfg.k_perturbations * POOL_GROWTH)  # clean top-M ∪ each rewrite's top-M
    groups = n_train * cfg.k_perturbations * r["f_pos"]  # one per (question, rewrite) with a positive
    size = 1 + min(cfg.n_negatives, NEG_FOUND * cfg.m_candidates * (1 - r["s_pos"]))
    return cfg, r, n_train, n_test, pool, groups, size


def _nb00(s: Scale) -> dict:
    test = TRAIN_TEST["mini"][1]  # data/mini's test questions: the notebook reads data/mini's rewrites
    n = min(s.n_test_questions or test, test)
    q = (QUERY["mini"][0] + 3 * QUERY["mini_rewrite"][0]) / 4  # a clean question's 3 rows share one prompt
    return {"the gap": [_gen("answers from the top passage: clean + 3 rewrites per test question", "generator",
                             4 * n, OVERHEAD["reader"] + _ptok("mini", s.max_passage_words) + q, _out("read", 24), 24)],
            "passage embeddings": [_fwd("the scale's corpus", "embedder", CORPORA[_KEYS[s.dataset][0]][3], 100)]}


def _nb01(s: Scale) -> dict:
    cfg, r, n_train, *_ = _corm(s)
    return {"adversary": _adversary(f"adversary rewrites: {n_train} questions × K {cfg.k_perturbations}",
                                    n_train * cfg.k_perturbations, r["attempts"])}


def _nb02(s: Scale) -> dict:
    cfg, r, n_train, _, pool, *_ = _corm(s)
    corpus, _, rw = _KEYS[s.dataset]
    prompt = OVERHEAD["reader"] + _ptok(corpus, s.max_passage_words) + QUERY[rw][0]
    calls, k = n_train * pool * cfg.k_perturbations, cfg.k_perturbations
    # everything but the question is shared: by a passage's K rewrites while labelling (chunks of 8
    # questions), by every prompt about that passage in the soft labels' one call (up to a batch)
    prefix = prompt - QUERY[rw][0] - 5
    return {"teacher labels": [_gen(f"teacher labels s(x, d): {pool:.1f} candidates × K {k} per question", "teacher",
                                    calls, prompt, _out("read", 16), 16, prefix, k)],
            "soft labels": [_fwd("soft labels: the gold answer teacher-forced", "teacher", calls, prompt + 5, prefix,
                                 _share(s, calls, corpus, k))]}


def _nb03(s: Scale) -> dict:
    import robustkit as rk
    cfg, r, n_train, n_test, pool, groups, size = _corm(s)
    corpus, qk, rw = _KEYS[s.dataset]
    negatives = rk.crossencoder.relevance.RECIPES[s.name].n_negatives  # the warm start keeps its recipe's N
    w_total = TRAIN_TEST[cfg.warm_start_dataset][0]
    w_groups = min(cfg.warm_start_questions or w_total, w_total) * ALIAS_HIT[cfg.warm_start_dataset]
    w_pair = _pair("mini", "mini") if cfg.warm_start_dataset == "mini" else _pair("nq", "nq")
    pair, m = _pair(corpus, rw), min(cfg.m_inference, CORPORA[corpus][3])
    critics = [w for name in ("corm", "corm-soft", "pa-ce")
               for w in _training(f"critic training ({name})", groups, size, cfg.epochs, pair)]
    # relevance-ce: the same number of groups, clean query, any non-gold candidate a negative. It is
    # trained even where a pretrained one scores in its place (colab, paper)
    critics += _training("critic training (relevance-ce)", groups, 1 + min(cfg.n_negatives, pool - 1), cfg.epochs,
                         _pair(corpus, qk))
    stages = {"warm start": _training("relevance warm start", w_groups, 1 + min(negatives, cfg.warm_start_m - 1),
                                      cfg.warm_start_epochs, w_pair),
              "critics": critics,
              "validation comparison": [_fwd("5 cross-encoders on the validation groups", "critic_init",
                                             5 * groups * VAL * size, pair)],
              "test rankings": [_fwd("biased test queries × M, 4 critics", "critic_init", 4 * n_test * m, pair),
                                _fwd("biased test queries × M, relevance CE", _relevance_role(s), n_test * m, pair)]}
    if s.dataset != "mini":  # data/mini has hand-written test rewrites; elsewhere the adversary writes one each
        stages["test rewrites"] = _adversary("adversary test rewrites (K 1)", n_test, r["attempts"])[:1]  # III: 01's
    return stages


def _nb04(s: Scale) -> dict:
    cfg, r, n_train, n, pool, groups, size = _corm(s)
    corpus, qk, rw = _KEYS[s.dataset]
    m, c, words = min(cfg.m_inference, CORPORA[corpus][3]), cfg.context_size, s.max_passage_words
    q = (QUERY[qk][0] + QUERY[rw][0]) / 2
    read = OVERHEAD["reader"] + c * _ptok(corpus, words) + q
    pair, rerank = _pair(corpus, rw), OVERHEAD["llm_rerank"] + _ptok(corpus, words) + q
    reads = lambda what, items: _gen(what, "generator", items, read, _out("read", 24), 24)
    llm = (min(cfg.llm_rerank_questions, n) if cfg.llm_rerank_questions else 2 * n)  # biased of a sample, or all
    dense = 0 if s.dataset == "mini" and c == 1 else 2 * n  # at tiny notebook 00 asked dense's very prompts
    critic = lambda name, g: _training(f"critic training ({name})", g, size, cfg.epochs, pair)
    stages = {"γ from validation": [_fwd("critic on the validation questions' rewrites × M (λ reuses them)",
                                         "critic_init", n_train * VAL * r["f_pos"] * cfg.k_perturbations * m, pair)],
              "Table 1": [reads("Table 1 answers: 10 methods, clean + biased", 8 * 2 * n + dense + llm),
                          _fwd("clean queries × M, 4 critics (biased: notebook 03's)", "critic_init", 4 * n * m, pair),
                          _fwd("clean queries × M, relevance CE", _relevance_role(s), n * m, pair),
                          _fwd("LLM-rerank: P(yes) per candidate", "generator", llm * m, rerank,
                               HEAD + _ptok(corpus, words), _share(s, llm * m, corpus))],
              "Fig. 7 latency, uncached": [
                  _fwd("6 cross-encoder rerankers × 4 queries × M", "critic_init", 6 * (4 * m + 1), pair),
                  _fwd("LLM-rerank × 4 queries × M", "generator", 4 * m + 1, rerank)]}
    stages["Fig. 5 ablation"] = [w for t in ("false_premise", "confirmation_bias", "topical_distraction")
                                 for w in critic(f"no-{t}", groups)]  # upsampled to the critic's group count
    stages["Fig. 5 ablation"] += [_fwd("3 critics × biased × M", "critic_init", 3 * n * m, pair),
                                  reads("Fig. 5 answers: 3 critics, biased", 3 * n)]
    sens = [w for k in range(1, cfg.k_perturbations) for w in critic(f"k-{k}", n_train * k * r["f_pos"])]
    sens += [w for tau in ("0.1", "3") for w in critic(f"tau-{tau}", groups)]
    new, smaller = cfg.k_perturbations + 1, len({max(c, m // 4), m // 2, m} - {m})  # new critics; smaller-M runs
    stages["Fig. 6 sensitivity"] = sens + [_fwd(f"{new} critics × biased × M", "critic_init", new * n * m, pair),
                                           reads(f"Fig. 6 answers: {new} critics + {smaller} smaller M, biased",
                                                 (new + smaller) * n)]
    return stages


def _nb05(s: Scale) -> dict:
    import robustkit as rk
    from robustkit.models import MODEL_REGISTRY
    cfg, r = rk.fva.settings(s), RATES[s.name]
    words, k = cfg.max_words or s.max_passage_words, cfg.k
    n_tqa = min(cfg.n_truthfulqa or TRUTHFULQA, TRUTHFULQA)
    runs = [(n_tqa, "tqa_A", "truthfulqa"), (n_tqa, "tqa_B", "truthfulqa")]  # (questions, cache, query) per cache
    if s.dataset == "mini":  # data/mini's held-out misconceptions: cache A lacks the debunking passages
        runs += [(min(cfg.n_mini or MINI_MISCONCEPTIONS[1], MINI_MISCONCEPTIONS[1]), "mini", "mini_misconception")] * 2
    total = sum(n for n, *_ in runs)
    mean = lambda f: sum(n * f(c, key) for n, c, key in runs) / total  # (per question)
    p, q = mean(lambda c, key: _ptok(c, words)), mean(lambda c, key: QUERY[key][0])
    draft = _out("read", cfg.draft_tokens)
    read_k, revision = OVERHEAD["reader"] + k * p + q, OVERHEAD["revision"] + 2 * k * p + q + draft
    revise = lambda what, share: _gen(what, "generator", total * share, revision,
                                      _out("revision", cfg.revision_tokens), cfg.revision_tokens)
    gen = lambda what, items, tin, out=_out("read", 24), budget=24: _gen(what, "generator", items, tin, out, budget)
    if s.name in MODEL_REGISTRY["nli"]:
        nli = [_fwd("report card: 500 SNLI + 500 MNLI dev pairs", "nli", 1000, SNLI_DEV)]
    else:  # no hub NLI model here: the kit fine-tunes MiniLM on SNLI (nli.TRAINING)
        recipe = rk.nli.TRAINING[s.name]
        nli = [Work("NLI training on SNLI (MiniLM)", "nli", "train", recipe.pairs * recipe.epochs, SNLI_TRAIN),
               _fwd("NLI evaluation: SNLI + MNLI dev", "nli", 2 * recipe.eval_pairs, SNLI_DEV)]
    run = [gen("vanilla answers (FVA's drafts too, while draft_tokens is 24)", total, read_k),
           _fwd("Self-RAG IsRelevant", "generator", total * k, OVERHEAD["is_relevant"] + p + q),
           gen("Self-RAG answers", total * r["kept"], OVERHEAD["reader"] + p + q),
           _fwd("Self-RAG IsSupported", "generator", total * r["kept"], OVERHEAD["is_supported"] + p + q + 16),
           gen("Self-RAG closed book", total * r["none"], OVERHEAD["closed_book"] + q),
           _fwd("CRAG evaluator: 43 calibration questions per cache, k per question", _relevance_role(s),
                (43 * len(runs) + total) * k, mean(lambda c, key: _pair(c, key))),
           gen("CRAG query rewrites", total * r["crag_redo"], OVERHEAD["crag_rewrite"] + q, _out("revision", 24)),
           gen("CRAG answers", total, read_k),
           gen("FVA kill queries", total, OVERHEAD["kill"] + q + draft, _out("no_stop", cfg.kill_tokens), cfg.kill_tokens),
           _fwd("FVA NLI: k anti-context passages", "nli", total * k, mean(lambda c, key: _pair(c, key, 60)) + draft),
           revise("FVA revisions of falsified drafts", r["falsified"]),
           _fwd("TruthfulQA rule: embeddings, 4 methods", "embedder", 4 * total * TQA_TEXTS, 16)]
    if cfg.draft_tokens != 24:
        run.append(gen("FVA drafts", total, read_k, draft, cfg.draft_tokens))
    return {"NLI adjudicator": nli, "run (both caches)": run,
            "exact τ curve": [revise("revisions of the kept drafts", 1 - r["falsified"])],
            "MC1 / MC2": [_fwd("TruthfulQA options, teacher-forced", "generator",
                               min(cfg.n_mc or n_tqa, n_tqa) * MC_OPTIONS, MC_PROMPT)],
            "passage embeddings": [_fwd("TruthfulQA corpus B (A is its subset)", "embedder", CORPORA["tqa_B"][3], 70)]}


def _qa_sets(s: Scale, n_multihop, n_factual, n_hotpotqa, n_nq, n_train) -> list[tuple]:
    """``qa_sets.short_answer_sets`` as counts, two-hop first: (name, corpus, query key, evaluated,
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


def _nb06(s: Scale) -> dict:
    import robustkit as rk
    cfg, r = rk.counterrefine.settings(s), RATES[s.name]
    words, k, free = cfg.max_words or s.max_passage_words, cfg.k, cfg.decoding == "free"
    draft, stages = _out("read", cfg.draft_tokens), {}
    for name, corpus, key, n, n_train, scope in _qa_sets(s, cfg.n_multihop, cfg.n_factual, cfg.n_hotpotqa,
                                                         cfg.n_nq, cfg.n_calibration):
        p, q = _ptok(corpus, words) + 1, QUERY[key][0]  # "[i] " numbers each snippet
        refine = lambda snippets: OVERHEAD["cr_refine"] + snippets * p + q + draft
        # counterrefine, question-only and reconsider ask distinct prompts (the other two ablations' are
        # counterrefine's, cached); all three start with the draft's own k snippets
        distinct = [min(cfg.max_snippets, CR_SNIPPETS * k, scope), min(cfg.max_snippets, CR_QUERIES * k, scope), k]
        tin, prefix = sum(refine(x) for x in distinct) / 3, HEAD + k * p
        cal = 0 if free else n_train  # constrained decoding sets its REVISE threshold on training questions
        probe = min(4, n_train) if name in ("mini-multihop", "hotpotqa") else 0  # the free-decoding demo (cell 10)
        rows = [_gen(f"drafts: {n} questions + {max(cal, probe)} training", "generator", n + max(cal, probe),
                     OVERHEAD["reader"] + k * p + q, draft, cfg.draft_tokens)]
        if probe:
            rows.append(_gen("free-decoding demo replies (max_snippets 9)", "generator", probe,
                             refine(min(9, CR_SNIPPETS * k)), _out("cr_free", cfg.refine_tokens), cfg.refine_tokens))
        if free:
            rows.append(_gen("refine replies, 3 distinct second passes", "generator", 3 * n, tin,
                             _out("cr_free", cfg.refine_tokens), cfg.refine_tokens, prefix, 3))
        else:
            revised = 3 * n * r["cr_revise"]
            rows += [_fwd("KEEP / REVISE: calibration + 3 distinct second passes", "generator", cal + 3 * n, tin, prefix, 3),
                     _gen("REVISE answers", "generator", revised, tin + 4, _out("cr_answer", cfg.refine_tokens),
                          cfg.refine_tokens),
                     _fwd("cited snippet", "generator", revised, tin + 16)]
        stages[name] = rows
    if s.dataset != "mini":
        stages["passage embeddings"] = [_fwd("HotpotQA paragraphs", "embedder", CORPORA["hotpot"][3], 130)]
    return stages


def _nb07(s: Scale) -> dict:
    import robustkit as rk
    cfg = rk.alignrag.settings(s)
    words, k, T = cfg.max_words or s.max_passage_words, cfg.k, cfg.iterations
    rt, at, ct = cfg.rationale_tokens, cfg.answer_tokens, cfg.critique_tokens
    ro, ao, co = _out("rationale", rt), _out("answer", at), _out("critique", ct)
    multihop, factual = _qa_sets(s, cfg.n_multihop, cfg.n_factual, cfg.n_hotpotqa, cfg.n_nq, cfg.n_train)
    docs = lambda corpus: k * (_ptok(corpus, words) + 1)  # ("[i] " numbers each document)
    gen = lambda what, items, tin, out, budget, share=1: _gen(  # (documents lead every prompt)
        what, "generator", items, tin, out, budget, HEAD + d if share > 1 else 0, share)
    d, q, n_tr = docs(factual[1]), QUERY[factual[2]][0], factual[4]  # the critics learn in-domain
    critic_in = OVERHEAD["ar_critic"] + d + q + ro + ao
    seq = lambda completion: round(min(cfg.max_length, critic_in + completion))
    ccs, own = seq(30 + ro), seq(14 + co + ro + ao)  # contrastive critique; self-critique (+ weak rationale)
    stages = {"training corpus": [
        gen("weak rationales", n_tr, OVERHEAD["ar_reason"] + d + q, ro, rt),
        gen("weak answers", n_tr, OVERHEAD["ar_answer"] + d + ro + q, ao, at),
        gen("strong rationales (gold shown)", n_tr, OVERHEAD["ar_strong"] + d + q + 3, ro, rt),
        gen("self-critiques", n_tr, OVERHEAD["ar_selffb"] + d + q + ro + ao, co, ct)],
        "critics (TRL, LoRA)": [
        Work("CFT critic (SFT)", "generator", "lora", n_tr * cfg.epochs, ccs),
        Work("w/o-CCS critic (SFT)", "generator", "lora", n_tr * cfg.epochs, own),
        Work("CPO critic (DPO: chosen + rejected)", "generator", "lora", n_tr * cfg.epochs, ccs + own),
        _fwd("CPO reference log-probs, once", "generator", 2 * n_tr, (ccs + own) / 2)]}
    for name, corpus, key, n, *_ in (factual, multihop):
        d, q = docs(corpus), QUERY[key][0]
        tin = OVERHEAD["ar_critic"] + d + q + ro + ao
        refine = (OVERHEAD["ar_refine"] + ro + ao + 8 + co + OVERHEAD["ar_answer"] + ro) / 2 + d + q
        stages[f"{name}: {n} questions, T {T}"] = [
            gen("CoT, closed book: rationale + answer", 2 * n, (OVERHEAD["ar_closed"] + OVERHEAD["ar_answer"] + ro) / 2 + q,
                (ro + ao) / 2, rt),
            gen("y0 (vanilla reasoning RAG): rationale + answer", 2 * n,
                (OVERHEAD["ar_reason"] + OVERHEAD["ar_answer"] + ro) / 2 + d + q, (ro + ao) / 2, rt),
            gen("critiques: Self-Refine + frozen critic (the generator)", 2 * n * T, tin - 3, co, ct, 2),
            gen("critiques: CFT, CPO, w/o-CCS critics (the generator's size)", 3 * n * T, tin, co, ct),
            gen("refinements: 5 refiners × (rationale + answer)", 10 * n * T, refine, (ro + ao) / 2, rt, 5)]
    return stages


def _nb08(s: Scale) -> dict:
    """Every method on n test questions' clean and biased queries. CoRM's methods ask notebook 04's
    very prompts (cache hits), but for LLM-rerank's clean queries; the others start cold."""
    import robustkit as rk
    corm, fva, cr, ar, r = (rk.corm.settings(s), rk.fva.settings(s), rk.counterrefine.settings(s),
                            rk.alignrag.settings(s), RATES[s.name])
    corpus, qk, rw = _KEYS[s.dataset]
    test = TRAIN_TEST[s.dataset][1]
    n = min(rk.headtohead.settings(s).n_questions or s.n_test_questions or test, s.n_test_questions or test, test)
    total, q = 2 * n, (QUERY[qk][0] + QUERY[rw][0]) / 2
    gen = lambda what, items, tin, out=_out("read", 24), budget=24: _gen(what, "generator", items, tin, out, budget)
    m, words = min(corm.m_inference, CORPORA[corpus][3]), s.max_passage_words
    clean = n if corm.llm_rerank_questions else 0  # notebook 04 read every query's candidates when 0
    p, k = _ptok(corpus, fva.max_words or words), fva.k
    read_k, draft = OVERHEAD["reader"] + k * p + q, _out("read", fva.draft_tokens)
    rp, ck = _ptok(corpus, cr.max_words or words) + 1, cr.k
    refine = OVERHEAD["cr_refine"] + min(cr.max_snippets, CR_SNIPPETS * ck) * rp + q + draft
    ap, T = ar.k * (_ptok(corpus, ar.max_words or words) + 1), ar.iterations
    ro, ao, co = _out("rationale", ar.rationale_tokens), _out("answer", ar.answer_tokens), _out("critique", ar.critique_tokens)
    fva_rows = [gen("drafts (vanilla reads of k)", total, read_k, draft, fva.draft_tokens),
                gen("FVA kill queries", total, OVERHEAD["kill"] + q + draft, _out("no_stop", fva.kill_tokens),
                    fva.kill_tokens),
                _fwd("FVA NLI: k anti-context passages", "nli", total * k, _pair(corpus, rw, 60) + draft),
                gen("FVA revisions", total * r["falsified"], OVERHEAD["revision"] + 2 * k * p + q + draft,
                    _out("revision", fva.revision_tokens), fva.revision_tokens)]
    cr_rows = [gen("CounterRefine drafts", total, OVERHEAD["reader"] + ck * rp + q, draft, cr.draft_tokens),
               (_gen("refine replies", "generator", total, refine, _out("cr_free", cr.refine_tokens),
                     cr.refine_tokens) if cr.decoding == "free" else _fwd("KEEP / REVISE", "generator", total, refine))]
    # composed: both again over the CoRM critic, which scores M candidates of every new search query
    searches = total * (fva.m_kill_queries + CR_QUERIES)
    return {"CoRM-RAG and rerankers": [_fwd("LLM-rerank: clean queries × M", "generator", clean * m,
                                            OVERHEAD["llm_rerank"] + _ptok(corpus, words) + q)],
            "composed over the CoRM critic": [*fva_rows, *cr_rows,
                                              _fwd("critic: kill and second-pass queries × M", "critic_init",
                                                   searches * m, _pair(corpus, rw))],
            "FVA-RAG, Self-RAG, CRAG": [
                *fva_rows,
                _fwd("Self-RAG IsRelevant", "generator", total * k, OVERHEAD["is_relevant"] + p + q),
                gen("Self-RAG answers", total * r["kept"], OVERHEAD["reader"] + p + q),
                _fwd("Self-RAG IsSupported", "generator", total * r["kept"], OVERHEAD["is_supported"] + p + q + 16),
                gen("CRAG rewrites and answers", total * (1 + r["crag_redo"]), read_k)],
            "CounterRefine": cr_rows,
            "Self-Refine and AlignRAG": [
                gen("y0: rationale + answer", 2 * total, (OVERHEAD["ar_reason"] + OVERHEAD["ar_answer"] + ro) / 2 + ap + q,
                    (ro + ao) / 2, ar.rationale_tokens),
                gen("critiques, 2 critics", 2 * total * T, OVERHEAD["ar_critic"] + ap + q + ro + ao, co, ar.critique_tokens),
                gen("refinements: rationale + answer", 4 * total * T,
                    (OVERHEAD["ar_refine"] + ro + ao + co + OVERHEAD["ar_answer"] + ro) / 2 + ap + q, (ro + ao) / 2,
                    ar.rationale_tokens)]}


_NOTEBOOKS = {"00": _nb00, "01": _nb01, "02": _nb02, "03": _nb03, "04": _nb04, "05": _nb05, "06": _nb06, "07": _nb07,
              "08": _nb08}


def stage_work(notebook: str, scale: Scale | str | None = None) -> dict[str, list[Work]]:
    """``notebook_work`` by stage (stage name → its rows), for a per-stage breakdown."""
    if notebook not in _NOTEBOOKS:
        raise ValueError(f"unknown notebook {notebook!r}; expected one of {sorted(_NOTEBOOKS)}")
    stages = _NOTEBOOKS[notebook](get_scale(scale))
    return {name: kept for name, rows in stages.items() if (kept := [w for w in rows if w.items > 0])}


def notebook_work(notebook: str, scale: Scale | str | None = None) -> list[Work]:
    """The model work notebook "00".."08" does at ``scale`` (a Scale or its name), from a cold
    cache, when run in order after the notebooks before it (each reuses upstream artifacts)."""
    return [w for rows in stage_work(notebook, scale).values() for w in rows]


if __name__ == "__main__":
    for name in ("tiny", "small", "colab", "paper"):
        for nb in _NOTEBOOKS:
            kinds = {kind: sum(w.items for w in notebook_work(nb, name) if w.kind == kind)
                     for kind in ("generate", "forward", "train", "lora")}
            print(f"\n== {name} notebook {nb}: {kinds}")
            for stage, rows in stage_work(nb, name).items():
                for w in rows:
                    print(f"  [{stage}] {w.what}: {w.role} {w.kind} {w.items:,} × {w.tokens_in} tokens"
                          + (f", {w.tokens_out} of {w.budget} out" if w.kind == "generate" else "")
                          + (f", prefix {w.shared_prefix} shared by {w.share}" if w.share > 1 else ""))
