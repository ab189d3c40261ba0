"""The model work each notebook does at a scale: what ``robustkit.timings`` turns into minutes.

    rows = notebook_work("02", "colab")     # list[Work], from a cold cache, notebooks run in order
    stages = stage_work("04", "tiny")       # the same rows by stage, for a breakdown

Counts follow the knobs (each method's ``settings``, ``crossencoder.relevance.RECIPES``, ``nli.TRAINING``,
``config.SCALES``) and leave out what is cached already: the LLM call cache keys a prompt, cross-encoder
scores are stored per checkpoint, stage artifacts (rewrites, labels, critics, the NLI model) are reused
downstream. Different methods reading the same context also hit the cache; that overlap depends on the
data and is not subtracted (an upper bound). A prompt's tokens are its method's prompt counted with its
chat template (``prompt_skeletons``, ``workload_prompts``) plus its passages, question and answer, whose
lengths were measured on the data (``workload_measured``, as are reply lengths and the rates of each
step). Rates are measured at tiny/small, assumed beyond.
"""
from __future__ import annotations

from dataclasses import dataclass
from inspect import signature

from robustkit import adaptive, memo
from robustkit.alignrag import config as alignrag_config, method as alignrag_method
from robustkit.alignrag.critique import CRITIQUE_HEAD, Rationale
from robustkit.baselines import LLMReranker
from robustkit.config import Scale, get_scale
from robustkit.corm import config as corm_config, perturb
from robustkit.counterrefine import config as counterrefine_config, method as counterrefine_method
from robustkit.crossencoder.groups import split_groups
from robustkit.crossencoder.relevance import RECIPES
from robustkit.data.records import Question
from robustkit.fva import config as fva_config, method as fva_method
from robustkit.headtohead import config as headtohead_config
from robustkit.llm import DEFAULT_SYSTEM
from robustkit.models import MODEL_REGISTRY
from robustkit.nli import TRAINING
from robustkit.reader import answer_with_context, reader_prompt
from robustkit.workload_measured import (ALIAS_HIT, CORPORA, CR_QUERIES, CR_SNIPPETS, GOLD_ANSWER, MC_OPTION,
                                         MC_OPTIONS, MINI_MISCONCEPTIONS, NEG_FOUND, POOL_GROWTH, QUERY, RATES,
                                         SNLI_DEV, SNLI_TRAIN, TQA_TEXT, TQA_TEXTS, TRAIN_TEST, TRUTHFULQA, decoded,
                                         embedded_tokens, pair_tokens, passage_tokens, qa_sets)
from robustkit.workload_prompts import CUT, Prompt, staged_table, tokens


@dataclass(frozen=True)
class Work:
    what: str
    role: str  # generator | teacher | adversary | embedder | critic_init | relevance_ce | nli
    kind: str  # generate | forward | train | lora
    items: int  # prompts, (query, passage) pairs, or training examples × epochs
    tokens_in: int  # typical tokens per item (prompt with chat template and system prompt; or pair)
    tokens_out: int = 0  # average new tokens per generated item (``workload_measured.DECODE``)
    shared_prefix: int = 0  # tokens of each prompt shared with others (robustkit/prefix.py)
    share: int = 1  # how many prompts share that prefix
    budget: int = 0  # max_new_tokens: a batch decodes until its longest row stops, often this


def prompt_skeletons() -> dict[str, Prompt]:
    """Every prompt the workload counts, built by its method's own builder or template with empty
    passages, question and answer: name -> (system prompt, variants of its chat messages). A prefilled
    reply ("1.", "Reasoning:", "Answer:") is the method's own, written here as it writes it inline."""
    ask = lambda user, reply=None, system=DEFAULT_SYSTEM: (system, [[{"role": "user", "content": user}] + (
        [{"role": "assistant", "content": reply}] if reply is not None else [])])
    ar, cr, fva, e = alignrag_method, counterrefine_method, fva_method, dict(question="", answer="")
    y, refine = Rationale("", ""), cr.REFINE_PROMPT.format(snippets="", question="", draft="")
    # the adversary runs without the kit's system prompt (corm.pipeline); its type I/II prompts are
    # averaged over the sub-templates as ``rotation`` balances them and over the 3 demonstration orders;
    # "X" stands for the wrong belief y′, the question is added per dataset (``_adversary``)
    blank = [Question(f"q{i}", "?", ("a",)) for i in range(6)]  # "?": an empty question once stripped
    plan = lambda kind, sub, demo=0: {"type": kind, "subtemplate": sub, "demo": demo, "distraction": "",
                                      "wrong_entity": "X" if kind == perturb.FALSE_PREMISE else None}
    slots = [(kind, sub) for _, _, kind, sub in perturb.rotation(blank, 1)]
    return {
        "head": ask(CUT),  # what the chat template and system prompt put before any prompt's content
        "mc": ask("", ""),  # TruthfulQA's MC: the question alone, an option as the reply
        "reader": ask(reader_prompt("", [])),
        "reader_head": ask(reader_prompt(CUT, [])),  # all but the question (and what follows it)
        "llm_rerank": ask(LLMReranker.PROMPT.format(passage="", question="")),
        "llm_rerank_head": ask(LLMReranker.PROMPT.format(passage=CUT, question="")),
        "is_relevant": ask(adaptive.IS_RELEVANT.format(passage="", question="")),
        "is_supported": ask(adaptive.IS_SUPPORTED.format(passage="", **e)),
        "closed_book": ask(adaptive.CLOSED_BOOK.format(question="")),
        "crag_rewrite": ask(adaptive.REWRITE.format(question="")),
        "kill": ask(fva.KILL_PROMPT.format(m=3, **e), "1."),  # m, one digit: one token at any value
        "revision": ask(fva.REVISION_PROMPT.format(positive="", negative="", **e), fva.REVISION_PREFILL),
        "cr_refine": ask(refine, cr.REFINE_PREFILL),
        "cr_revise": ask(refine, f"{cr.REFINE_PREFILL} REVISE\nANSWER:"),  # constrained decoding's REVISE answer
        "cr_cite": ask(refine, f"{cr.REFINE_PREFILL} REVISE\nANSWER: \nEVIDENCE: ["),  # then its cited snippet
        "ar_reason": ask(ar.REASON.format(documents="", question=""), "Reasoning:"),
        "ar_answer": ask(ar.answer_prompt(" ", "", ""), "Answer:"),  # " ": with documents, none counted
        "ar_answer_closed": ask(ar.answer_prompt(None, "", ""), "Answer:"),
        "ar_strong": ask(ar.STRONG.format(documents="", question="", gold=""), "Reasoning:"),
        "ar_critic": ask(ar.critic_prompt("", [], y, 1)[0]["content"], CRITIQUE_HEAD),
        "ar_selffb": ask(ar.critic_prompt("", [], y, 1, template=ar.SELF_FEEDBACK)[0]["content"], CRITIQUE_HEAD),
        "ar_refine": ask(ar.REFINE.format(documents="", reasoning="", critique=CRITIQUE_HEAD, **e), "Reasoning:"),
        "ar_closed": ask(ar.CLOSED_BOOK.format(question=""), "Reasoning:"),
        "adversary": (None, [perturb.adversary_prompt(blank[0], plan(kind, sub, demo)) for kind, sub in slots
                             if kind != perturb.TOPICAL_DISTRACTION for demo in range(3)]),
        "adversary_III": (None, [perturb.adversary_prompt(blank[0], plan(perturb.TOPICAL_DISTRACTION, ""))])}


@memo.cached(1)
def overheads() -> dict[str, float]:
    """Tokens of each prompt of ``prompt_skeletons`` (``workload_prompts.tokens``)."""
    return tokens(prompt_skeletons())


# Budgets a method writes as a literal, not a knob: the reader's default answer budget, the adversary's
# (perturb.synthesize), the teacher's while labelling (corm.teacher) and CRAG's query rewrites (adaptive)
READ = signature(answer_with_context).parameters["max_new_tokens"].default
ADVERSARY_TOKENS, TEACHER_TOKENS, CRAG_REWRITE_TOKENS = 32, 16, 24
VAL = signature(split_groups).parameters["val_fraction"].default  # questions held out for validation
_KEYS = {"mini": ("mini", "mini", "mini_rewrite"), "nq_open_oracle": ("nq", "nq", "nq_rewrite")}  # CoRM's data


def _share(s: Scale, prompts: float, corpus: str, least: int = 1) -> int:
    """Prompts sharing a passage prefix: those about one passage, batched together (prefix.plan)."""
    return int(min(s.gen_batch_size, max(least, prompts / CORPORA[corpus][3])))


def _gen(what, role, items, tokens_in, out, budget, prefix=0, share=1) -> Work:
    return Work(what, role, "generate", round(items), round(tokens_in), round(out), round(prefix), share, budget)


def _fwd(what, role, items, tokens_in, prefix=0, share=1) -> Work:
    return Work(what, role, "forward", round(items), round(tokens_in), 0, round(prefix), share)


def _adversary(what: str, slots: float, attempts: float, question: float) -> list[Work]:
    """``perturb.synthesize`` (stop at a newline): a rejected type I/II rewrite is retried with a new
    prompt (a retry that repeats one is a cache hit, hence the measured rate); its prompt holds the
    question twice. Type III's slots, a third, each retell one sentence of an unrelated passage (about
    as long as a question)."""
    o, budget = overheads(), ADVERSARY_TOKENS
    return [_gen(f"{what}, types I/II", "adversary", slots * 2 / 3 * attempts, o["adversary"] + 2 * question,
                 decoded("adversary", budget), budget),
            _gen(f"{what}, type III", "adversary", slots / 3, o["adversary_III"] + question,
                 decoded("adversary_III", budget), budget)]


def _training(what, groups, size, epochs, tokens) -> list[Work]:
    """A cross-encoder's training: every pair of the training groups per epoch, forward and backward;
    each epoch ends with a forward pass over the validation groups (VAL of the questions)."""
    return [Work(what, "critic_init", "train", round(groups * (1 - VAL) * size * epochs), tokens),
            _fwd(f"{what}: validation", "critic_init", groups * VAL * size * epochs, tokens)]


def _relevance_role(s: Scale) -> str:
    """Who scores relevance: the hub's MS MARCO cross-encoder (colab, paper) or the kit's own."""
    return "relevance_ce" if s.name in MODEL_REGISTRY["relevance_ce"] else "critic_init"


def _corm(s: Scale):
    """CoRM's knobs and the counts notebooks 01-04 share."""
    cfg, r = corm_config.settings(s), RATES[s.name]
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
    corpus, prompt = _KEYS[s.dataset][0], overheads()["reader"] + passage_tokens("mini", s.max_passage_words) + q
    return {"the gap": [_gen("answers from the top passage: clean + 3 rewrites per test question", "generator", 4 * n,
                             prompt, decoded("read", READ), READ)],
            "passage embeddings": [_fwd("the scale's corpus", "embedder", CORPORA[corpus][3], embedded_tokens(corpus))]}


def _nb01(s: Scale) -> dict:
    cfg, r, n_train, *_ = _corm(s)
    return {"adversary": _adversary(f"adversary rewrites: {n_train} questions × K {cfg.k_perturbations}",
                                    n_train * cfg.k_perturbations, r["attempts"], QUERY[_KEYS[s.dataset][1]][0])}


def _nb02(s: Scale) -> dict:
    cfg, r, n_train, _, pool, *_ = _corm(s)
    corpus, _, rw = _KEYS[s.dataset]
    o, passage, budget = overheads(), passage_tokens(corpus, s.max_passage_words), TEACHER_TOKENS
    prompt = o["reader"] + passage + QUERY[rw][0]
    calls, k = n_train * pool * cfg.k_perturbations, cfg.k_perturbations
    # everything but the question is shared: by a passage's K rewrites while labelling (chunks of 8
    # questions), by every prompt about that passage in the soft labels' one call (up to a batch)
    prefix = o["reader_head"] + passage
    return {"teacher labels": [_gen(f"teacher labels s(x, d): {pool:.1f} candidates × K {k} per question", "teacher",
                                    calls, prompt, decoded("read", budget), budget, prefix, k)],
            "soft labels": [_fwd("soft labels: the gold answer teacher-forced", "teacher", calls,
                                 prompt + GOLD_ANSWER[s.dataset], prefix, _share(s, calls, corpus, k))]}


def _nb03(s: Scale) -> dict:
    cfg, r, n_train, n_test, pool, groups, size = _corm(s)
    corpus, qk, rw = _KEYS[s.dataset]
    negatives = RECIPES[s.name].n_negatives  # the warm start keeps its recipe's N
    w_total = TRAIN_TEST[cfg.warm_start_dataset][0]
    w_groups = min(cfg.warm_start_questions or w_total, w_total) * ALIAS_HIT[cfg.warm_start_dataset]
    w_pair = pair_tokens("mini", "mini") if cfg.warm_start_dataset == "mini" else pair_tokens("nq", "nq")
    pair, m = pair_tokens(corpus, rw), min(cfg.m_inference, CORPORA[corpus][3])
    critics = [w for name in ("corm", "corm-soft", "pa-ce")
               for w in _training(f"critic training ({name})", groups, size, cfg.epochs, pair)]
    # relevance-ce: the same number of groups, clean query, any non-gold candidate a negative. It is
    # trained even where a pretrained one scores in its place (colab, paper)
    critics += _training("critic training (relevance-ce)", groups, 1 + min(cfg.n_negatives, pool - 1), cfg.epochs,
                         pair_tokens(corpus, qk))
    stages = {"warm start": _training("relevance warm start", w_groups, 1 + min(negatives, cfg.warm_start_m - 1),
                                      cfg.warm_start_epochs, w_pair),
              "critics": critics,
              "validation comparison": [_fwd("5 cross-encoders on the validation groups", "critic_init",
                                             5 * groups * VAL * size, pair)],
              "test rankings": [_fwd("biased test queries × M, 4 critics", "critic_init", 4 * n_test * m, pair),
                                _fwd("biased test queries × M, relevance CE", _relevance_role(s), n_test * m, pair)]}
    if s.dataset != "mini":  # data/mini has hand-written test rewrites; elsewhere the adversary writes one each
        stages["test rewrites"] = _adversary("adversary test rewrites (K 1)", n_test, r["attempts"],
                                             QUERY[qk][0])[:1]  # type III's prompts are notebook 01's
    return stages


def _nb04(s: Scale) -> dict:
    cfg, r, n_train, n, pool, groups, size = _corm(s)
    corpus, qk, rw = _KEYS[s.dataset]
    m, c, words = min(cfg.m_inference, CORPORA[corpus][3]), cfg.context_size, s.max_passage_words
    o, q = overheads(), (QUERY[qk][0] + QUERY[rw][0]) / 2
    read = o["reader"] + c * passage_tokens(corpus, words) + q
    pair, rerank = pair_tokens(corpus, rw), o["llm_rerank"] + passage_tokens(corpus, words) + q
    reads = lambda what, items: _gen(what, "generator", items, read, decoded("read", READ), READ)
    llm = (min(cfg.llm_rerank_questions, n) if cfg.llm_rerank_questions else 2 * n)  # biased of a sample, or all
    dense = 0 if s.dataset == "mini" and c == 1 else 2 * n  # at tiny notebook 00 asked dense's very prompts
    critic = lambda name, g: _training(f"critic training ({name})", g, size, cfg.epochs, pair)
    stages = {"γ from validation": [_fwd("critic on the validation questions' rewrites × M (λ reuses them)",
                                         "critic_init", n_train * VAL * r["f_pos"] * cfg.k_perturbations * m, pair)],
              "Table 1": [reads("Table 1 answers: 10 methods, clean + biased", 8 * 2 * n + dense + llm),
                          _fwd("clean queries × M, 4 critics (biased: notebook 03's)", "critic_init", 4 * n * m, pair),
                          _fwd("clean queries × M, relevance CE", _relevance_role(s), n * m, pair),
                          _fwd("LLM-rerank: P(yes) per candidate", "generator", llm * m, rerank,
                               o["llm_rerank_head"] + passage_tokens(corpus, words), _share(s, llm * m, corpus))],
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
    cfg, r, o = fva_config.settings(s), RATES[s.name], overheads()
    words, k = cfg.max_words or s.max_passage_words, cfg.k
    n_tqa = min(cfg.n_truthfulqa or TRUTHFULQA, TRUTHFULQA)
    runs = [(n_tqa, "tqa_A", "truthfulqa"), (n_tqa, "tqa_B", "truthfulqa")]  # (questions, cache, query) per cache
    if s.dataset == "mini":  # data/mini's held-out misconceptions: cache A lacks the debunking passages
        runs += [(min(cfg.n_mini or MINI_MISCONCEPTIONS[1], MINI_MISCONCEPTIONS[1]), "mini", "mini_misconception")] * 2
    total = sum(n for n, *_ in runs)
    mean = lambda f: sum(n * f(c, key) for n, c, key in runs) / total  # (per question)
    p, q = mean(lambda c, key: passage_tokens(c, words)), mean(lambda c, key: QUERY[key][0])
    draft, answer = decoded("read", cfg.draft_tokens), decoded("read", READ)
    read_k, revision = o["reader"] + k * p + q, o["revision"] + 2 * k * p + q + draft
    revise = lambda what, share: _gen(what, "generator", total * share, revision,
                                      decoded("revision", cfg.revision_tokens), cfg.revision_tokens)
    gen = lambda what, items, tin, out=answer, budget=READ: _gen(what, "generator", items, tin, out, budget)
    if s.name in MODEL_REGISTRY["nli"]:
        nli = [_fwd("report card: 500 SNLI + 500 MNLI dev pairs", "nli", 1000, SNLI_DEV)]
    else:  # no hub NLI model here: the kit fine-tunes MiniLM on SNLI (nli.TRAINING)
        recipe = TRAINING[s.name]
        nli = [Work("NLI training on SNLI (MiniLM)", "nli", "train", recipe.pairs * recipe.epochs, SNLI_TRAIN),
               _fwd("NLI evaluation: SNLI + MNLI dev", "nli", 2 * recipe.eval_pairs, SNLI_DEV)]
    calibration = MINI_MISCONCEPTIONS[0]  # CRAG's thresholds: data/mini's training misconceptions, per cache
    run = [gen(f"vanilla answers (FVA's drafts too, while draft_tokens is {READ})", total, read_k),
           _fwd("Self-RAG IsRelevant", "generator", total * k, o["is_relevant"] + p + q),
           gen("Self-RAG answers", total * r["kept"], o["reader"] + p + q),
           _fwd("Self-RAG IsSupported", "generator", total * r["kept"], o["is_supported"] + p + q + answer),
           gen("Self-RAG closed book", total * r["none"], o["closed_book"] + q),
           _fwd(f"CRAG evaluator: {calibration} calibration questions per cache, k per question", _relevance_role(s),
                (calibration * len(runs) + total) * k, mean(lambda c, key: pair_tokens(c, key))),
           gen("CRAG query rewrites", total * r["crag_redo"], o["crag_rewrite"] + q,
               decoded("revision", CRAG_REWRITE_TOKENS), CRAG_REWRITE_TOKENS),
           gen("CRAG answers", total, read_k),
           gen("FVA kill queries", total, o["kill"] + q + draft, decoded("no_stop", cfg.kill_tokens), cfg.kill_tokens),
           _fwd("FVA NLI: k anti-context passages", "nli", total * k,
                mean(lambda c, key: pair_tokens(c, key, 60)) + draft),
           revise("FVA revisions of falsified drafts", r["falsified"]),
           _fwd("TruthfulQA rule: embeddings, 4 methods", "embedder", 4 * total * TQA_TEXTS, TQA_TEXT)]
    if cfg.draft_tokens != READ:
        run.append(gen("FVA drafts", total, read_k, draft, cfg.draft_tokens))
    return {"NLI adjudicator": nli, "run (both caches)": run,
            "exact τ curve": [revise("revisions of the kept drafts", 1 - r["falsified"])],
            "MC1 / MC2": [_fwd("TruthfulQA options, teacher-forced", "generator", min(cfg.n_mc or n_tqa, n_tqa)
                               * MC_OPTIONS, o["mc"] + QUERY["truthfulqa"][0] + MC_OPTION)],
            "passage embeddings": [_fwd("TruthfulQA corpus B (A is its subset)", "embedder", CORPORA["tqa_B"][3],
                                        embedded_tokens("tqa_B"))]}


def _nb06(s: Scale) -> dict:
    cfg, r, o = counterrefine_config.settings(s), RATES[s.name], overheads()
    words, k, free = cfg.max_words or s.max_passage_words, cfg.k, cfg.decoding == "free"
    draft, stages, answer = decoded("read", cfg.draft_tokens), {}, decoded("cr_answer", cfg.refine_tokens)
    for name, corpus, key, n, n_train, scope in qa_sets(s, cfg.n_multihop, cfg.n_factual, cfg.n_hotpotqa,
                                                         cfg.n_nq, cfg.n_calibration):
        p, q = passage_tokens(corpus, words) + 1, QUERY[key][0]  # "[i] " numbers each snippet
        refine = lambda snippets: o["cr_refine"] + snippets * p + q + draft
        # counterrefine, question-only and reconsider ask distinct prompts (the other two ablations' are
        # counterrefine's, cached); all three start with the draft's own k snippets
        distinct = [min(cfg.max_snippets, CR_SNIPPETS * k, scope), min(cfg.max_snippets, CR_QUERIES * k, scope), k]
        tin, prefix = sum(refine(x) for x in distinct) / 3, o["head"] + k * p
        cal = 0 if free else n_train  # constrained decoding sets its REVISE threshold on training questions
        probe = min(4, n_train) if name in ("mini-multihop", "hotpotqa") else 0  # the free-decoding demo (cell 10)
        rows = [_gen(f"drafts: {n} questions + {max(cal, probe)} training", "generator", n + max(cal, probe),
                     o["reader"] + k * p + q, draft, cfg.draft_tokens)]
        if probe:
            rows.append(_gen("free-decoding demo replies (max_snippets 9)", "generator", probe,
                             refine(min(9, CR_SNIPPETS * k)), decoded("cr_free", cfg.refine_tokens), cfg.refine_tokens))
        if free:
            rows.append(_gen("refine replies, 3 distinct second passes", "generator", 3 * n, tin,
                             decoded("cr_free", cfg.refine_tokens), cfg.refine_tokens, prefix, 3))
        else:
            revised = 3 * n * r["cr_revise"]
            rows += [_fwd("KEEP / REVISE: calibration + 3 distinct second passes", "generator", cal + 3 * n, tin,
                          prefix, 3),
                     _gen("REVISE answers", "generator", revised, tin + o["cr_revise"] - o["cr_refine"], answer,
                          cfg.refine_tokens),
                     _fwd("cited snippet", "generator", revised, tin + o["cr_cite"] - o["cr_refine"] + answer)]
        stages[name] = rows
    if s.dataset != "mini":
        stages["passage embeddings"] = [_fwd("HotpotQA paragraphs", "embedder", CORPORA["hotpot"][3],
                                             embedded_tokens("hotpot"))]
    return stages


def _nb07(s: Scale) -> dict:
    cfg, o = alignrag_config.settings(s), overheads()
    words, k, T = cfg.max_words or s.max_passage_words, cfg.k, cfg.iterations
    rt, at, ct = cfg.rationale_tokens, cfg.answer_tokens, cfg.critique_tokens
    ro, ao, co = decoded("rationale", rt), decoded("answer", at), decoded("critique", ct)
    multihop, factual = qa_sets(s, cfg.n_multihop, cfg.n_factual, cfg.n_hotpotqa, cfg.n_nq, cfg.n_train)
    docs = lambda corpus: k * (passage_tokens(corpus, words) + 1)  # ("[i] " numbers each document)
    gen = lambda what, items, tin, out, budget, share=1: _gen(  # (documents lead every prompt)
        what, "generator", items, tin, out, budget, o["head"] + d if share > 1 else 0, share)
    d, q, n_tr = docs(factual[1]), QUERY[factual[2]][0], factual[4]  # the critics learn in-domain
    critic_in = o["ar_critic"] + d + q + ro + ao
    seq = lambda completion: round(min(cfg.max_length, critic_in + completion))
    ccs, own = seq(30 + ro), seq(14 + co + ro + ao)  # contrastive critique; self-critique (+ weak rationale)
    stages = {"training corpus": [
        gen("weak rationales", n_tr, o["ar_reason"] + d + q, ro, rt),
        gen("weak answers", n_tr, o["ar_answer"] + d + ro + q, ao, at),
        gen("strong rationales (gold shown)", n_tr, o["ar_strong"] + d + q + GOLD_ANSWER[s.dataset], ro, rt),
        gen("self-critiques", n_tr, o["ar_selffb"] + d + q + ro + ao, co, ct)],
        "critics (TRL, LoRA)": [
        Work("CFT critic (SFT)", "generator", "lora", n_tr * cfg.epochs, ccs),
        Work("w/o-CCS critic (SFT)", "generator", "lora", n_tr * cfg.epochs, own),
        Work("CPO critic (DPO: chosen + rejected)", "generator", "lora", n_tr * cfg.epochs, ccs + own),
        _fwd("CPO reference log-probs, once", "generator", 2 * n_tr, (ccs + own) / 2)]}
    for name, corpus, key, n, *_ in (factual, multihop):
        d, q = docs(corpus), QUERY[key][0]
        tin = o["ar_critic"] + d + q + ro + ao
        refine = (o["ar_refine"] + ro + ao + co + o["ar_answer"] + ro) / 2 + d + q  # rationale, then answer
        stages[f"{name}: {n} questions, T {T}"] = [
            gen("CoT, closed book: rationale + answer", 2 * n, (o["ar_closed"] + o["ar_answer_closed"] + ro) / 2 + q,
                (ro + ao) / 2, rt),
            gen("y0 (vanilla reasoning RAG): rationale + answer", 2 * n,
                (o["ar_reason"] + o["ar_answer"] + ro) / 2 + d + q, (ro + ao) / 2, rt),
            gen("critiques: Self-Refine + frozen critic (the generator)", 2 * n * T,
                tin + (o["ar_selffb"] - o["ar_critic"]) / 2, co, ct, 2),
            gen("critiques: CFT, CPO, w/o-CCS critics (the generator's size)", 3 * n * T, tin, co, ct),
            gen("refinements: 5 refiners × (rationale + answer)", 10 * n * T, refine, (ro + ao) / 2, rt, 5)]
    return stages


def _nb08(s: Scale) -> dict:
    """Every method on n test questions' clean and biased queries. CoRM's methods ask notebook 04's
    very prompts (cache hits), but for LLM-rerank's clean queries; the others start cold."""
    corm, fva, cr, ar = (corm_config.settings(s), fva_config.settings(s), counterrefine_config.settings(s),
                         alignrag_config.settings(s))
    r, o, answer = RATES[s.name], overheads(), decoded("read", READ)
    corpus, qk, rw = _KEYS[s.dataset]
    test = TRAIN_TEST[s.dataset][1]
    n = min(headtohead_config.settings(s).n_questions or s.n_test_questions or test, s.n_test_questions or test, test)
    total, q = 2 * n, (QUERY[qk][0] + QUERY[rw][0]) / 2
    gen = lambda what, items, tin, out=answer, budget=READ: _gen(what, "generator", items, tin, out, budget)
    m, words = min(corm.m_inference, CORPORA[corpus][3]), s.max_passage_words
    clean = n if corm.llm_rerank_questions else 0  # notebook 04 read every query's candidates when 0
    p, k = passage_tokens(corpus, fva.max_words or words), fva.k
    read_k, draft = o["reader"] + k * p + q, decoded("read", fva.draft_tokens)
    rp, ck = passage_tokens(corpus, cr.max_words or words) + 1, cr.k
    refine = o["cr_refine"] + min(cr.max_snippets, CR_SNIPPETS * ck) * rp + q + draft
    ap, T = ar.k * (passage_tokens(corpus, ar.max_words or words) + 1), ar.iterations
    ro, ao = decoded("rationale", ar.rationale_tokens), decoded("answer", ar.answer_tokens)
    co = decoded("critique", ar.critique_tokens)
    fva_rows = [gen("drafts (vanilla reads of k)", total, read_k, draft, fva.draft_tokens),
                gen("FVA kill queries", total, o["kill"] + q + draft, decoded("no_stop", fva.kill_tokens),
                    fva.kill_tokens),
                _fwd("FVA NLI: k anti-context passages", "nli", total * k, pair_tokens(corpus, rw, 60) + draft),
                gen("FVA revisions", total * r["falsified"], o["revision"] + 2 * k * p + q + draft,
                    decoded("revision", fva.revision_tokens), fva.revision_tokens)]
    cr_rows = [gen("CounterRefine drafts", total, o["reader"] + ck * rp + q, draft, cr.draft_tokens),
               (_gen("refine replies", "generator", total, refine, decoded("cr_free", cr.refine_tokens),
                     cr.refine_tokens) if cr.decoding == "free" else _fwd("KEEP / REVISE", "generator", total, refine))]
    # composed: both again over the CoRM critic, which scores M candidates of every new search query
    searches = total * (fva.m_kill_queries + CR_QUERIES)
    return {"CoRM-RAG and rerankers": [_fwd("LLM-rerank: clean queries × M", "generator", clean * m,
                                            o["llm_rerank"] + passage_tokens(corpus, words) + q)],
            "composed over the CoRM critic": [*fva_rows, *cr_rows,
                                              _fwd("critic: kill and second-pass queries × M", "critic_init",
                                                   searches * m, pair_tokens(corpus, rw))],
            "FVA-RAG, Self-RAG, CRAG": [
                *fva_rows,
                _fwd("Self-RAG IsRelevant", "generator", total * k, o["is_relevant"] + p + q),
                gen("Self-RAG answers", total * r["kept"], o["reader"] + p + q),
                _fwd("Self-RAG IsSupported", "generator", total * r["kept"], o["is_supported"] + p + q + answer),
                gen("CRAG rewrites and answers", total * (1 + r["crag_redo"]), read_k)],
            "CounterRefine": cr_rows,
            "Self-Refine and AlignRAG": [
                gen("y0: rationale + answer", 2 * total, (o["ar_reason"] + o["ar_answer"] + ro) / 2 + ap + q,
                    (ro + ao) / 2, ar.rationale_tokens),
                gen("critiques, 2 critics", 2 * total * T, o["ar_critic"] + ap + q + ro + ao, co, ar.critique_tokens),
                gen("refinements: rationale + answer", 4 * total * T,
                    (o["ar_refine"] + ro + ao + co + o["ar_answer"] + ro) / 2 + ap + q, (ro + ao) / 2,
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


if __name__ == "__main__":  # restage workload_prompts.STAGED: every prompt counted afresh (under a minute)
    print(staged_table(prompt_skeletons()))
