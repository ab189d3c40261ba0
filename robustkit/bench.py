"""``python -m robustkit bench``: speed and memory of the kit's building blocks, in one run.

Prints the CPU, generator calls/s in fp32 vs bf16 on it (and whether their answers agree),
tokens/s unbatched vs batched, call-cache replay vs generation, the teacher's workload with and
without shared passage prefixes, BM25 and dense queries/s, model load time cold (GGUF
conversion) vs cached, cross-encoder pairs/s on the device, reranking latency (critic vs relevance
CE vs LLM-rerank) with end-to-end
queries/s with and without abstention, CounterRefine's questions/s and model calls against
Baseline-RAG's, FVA-RAG's questions/s, model and NLI calls against vanilla RAG's, Self-RAG's and
CRAG's, a served generator's calls/s at 1, 4 and 16 concurrent requests against in-process
batching, ``serve``'s requests/s and latency under 1, 4 and 16 concurrent requests with and
without batching, and peak RSS. Ratios are
against baselines measured in the same run. Timings are printed, never asserted.
"""
from __future__ import annotations

import os
import resource
import tempfile
import time
from pathlib import Path

from robustkit.config import get_scale
from robustkit.data import DataError, mini_corpus, mini_questions, mini_rewrites
from robustkit.data import corpus as load_corpus
from robustkit.device import cpu_info, model_dtype
from robustkit.callcache import CallCache
from robustkit.llm import Generator
from robustkit.methods import Query
from robustkit.models import resolve_model
from robustkit.reader import reader_prompt
from robustkit.retrieval import BM25Retriever, DenseRetriever, load_embedder
from robustkit.weights import load_causal_lm


def _reader_prompts(n: int) -> list[str]:
    """The reader's prompts for the first ``n`` data/mini questions with their gold passage
    (~165 tokens: prefill dominates)."""
    corpus = mini_corpus()
    return [reader_prompt(q.text, [corpus[q.gold_ids[0]]]) for q in mini_questions()[:n]]


def bench_dtypes(n_prompts: int = 16, max_new_tokens: int = 16) -> dict[str, float]:
    """Calls/s for one batch of reader prompts in fp32 and in bf16 on this CPU, and how many of
    the bf16 answers equal the fp32 ones (greedy decoding)."""
    prompts = _reader_prompts(n_prompts)
    out, answers = {}, {}
    for dtype in ("float32", "bfloat16"):
        gen = Generator("generator", cache=False, dtype=dtype)
        gen.generate(prompts[:2], max_new_tokens=2, batch_size=2)  # load + warm up kernels
        start = time.perf_counter()
        answers[dtype] = gen.generate(prompts, max_new_tokens=max_new_tokens, batch_size=n_prompts)
        out[f"{dtype} calls/s"] = n_prompts / (time.perf_counter() - start)
    out["bf16 / fp32 speed"] = out["bfloat16 calls/s"] / out["float32 calls/s"]
    out["bf16 answers = fp32"] = sum(a == b for a, b in zip(*answers.values())) / n_prompts
    return out


def bench_generator(n_prompts: int = 16, max_new_tokens: int = 16) -> dict[str, float]:
    """Tokens/s one prompt at a time vs one batch of ``n_prompts``, and cache replay speed-up.

    The prompts are the reader's (a gold passage and a question, ~165 tokens): prefill dominates,
    so the batched gain grows with the number of generated tokens.
    """
    prompts = _reader_prompts(n_prompts)
    with tempfile.TemporaryDirectory() as tmp:
        gen = Generator("generator", cache=CallCache(Path(tmp) / "calls.sqlite"))
        gen.generate(prompts[:2], max_new_tokens=2, batch_size=2)  # load + warm up kernels
        gen.cache = CallCache(Path(tmp) / "fresh.sqlite")
        start = time.perf_counter()
        singles = [gen.generate([p], max_new_tokens=max_new_tokens, stop=())[0] for p in prompts]
        t_single = time.perf_counter() - start
        gen.cache = CallCache(Path(tmp) / "batched.sqlite")
        start = time.perf_counter()
        batched = gen.generate(prompts, max_new_tokens=max_new_tokens, stop=(),
                               batch_size=n_prompts)
        t_batch = time.perf_counter() - start
        start = time.perf_counter()
        gen.generate(prompts, max_new_tokens=max_new_tokens, stop=())
        t_replay = time.perf_counter() - start
    tokens = lambda outs: sum(len(gen.tokenizer(o).input_ids) for o in outs)  # noqa: E731
    return {"unbatched tok/s": tokens(singles) / t_single,
            f"batch-{n_prompts} tok/s": tokens(batched) / t_batch,
            "batched / unbatched": (tokens(batched) / t_batch) / (tokens(singles) / t_single),
            "generate s": t_batch, "cache replay s": t_replay,
            "replay speed-up": t_batch / t_replay}


def bench_served(n_prompts: int = 16, max_new_tokens: int = 16) -> dict[str, float]:
    """Calls/s of the generator in-process (one batch) vs served by `transformers serve` on
    loopback (continuous batching) at 1, 4 and 16 concurrent requests, and how many served answers
    equal the in-process ones. Both share this machine's cores: this measures the served path's
    cost and what concurrency buys, not what a GPU server would give."""
    from robustkit.config import with_overrides
    from robustkit.loopback import transformers_serve
    from robustkit.llm_client import make_generator
    from robustkit.weights import weights_dir

    prompts = _reader_prompts(n_prompts)
    local = Generator("generator", cache=False)
    local.generate(prompts[:2], max_new_tokens=2)  # load + warm up kernels
    start = time.perf_counter()
    expected = local.generate(prompts, max_new_tokens=max_new_tokens, batch_size=n_prompts)
    out = {"in-process batched calls/s": n_prompts / (time.perf_counter() - start)}
    with transformers_serve(weights_dir(local.spec, "float32"), continuous_batching=True) as choice:
        scale = with_overrides(get_scale(), models={"generator": choice})
        make_generator("generator", scale, cache=False).generate(prompts[:2], max_new_tokens=2)  # warm up
        for concurrency in (1, 4, 16):
            served = make_generator("generator", scale, cache=False, concurrency=concurrency)
            start = time.perf_counter()
            answers = served.generate(prompts, max_new_tokens=max_new_tokens)
            out[f"served calls/s, {concurrency} concurrent"] = n_prompts / (time.perf_counter() - start)
        out["served answers = in-process ones"] = sum(a == b for a, b in zip(answers, expected))
    out["served (16) / in-process"] = out["served calls/s, 16 concurrent"] / out["in-process batched calls/s"]
    return out


def bench_prefix_sharing(n_passages: int = 32, max_new_tokens: int = 16) -> dict[str, float]:
    """The teacher's workload: each of ``n_passages`` gold passages asked its question's three
    hand-written biased rewrites. Calls/s of each prompt in full in batches of 16 with
    transformers' growing KV cache (the kit's earliest path), then with the passage prefix
    computed once per passage in batches of 32, then with the cache reserved for decoding in
    place (the kit's path), and whether all three give the same answers."""
    corpus, rewrites = mini_corpus(), {}
    for r in mini_rewrites():
        rewrites.setdefault(r.question_id, []).append(r.text)
    prompts = [reader_prompt(text, [corpus[q.gold_ids[0]]])
               for q in mini_questions()[:n_passages] for text in rewrites.get(q.id, [])]
    out, answers = {"prompts": float(len(prompts))}, {}
    paths = (("full prompts, growing cache, batch 16", False, False, 16),
             ("shared prefixes, growing cache, batch 32", True, False, 32),
             ("shared prefixes, reserved cache, batch 32", True, True, 32))
    loaded = Generator("teacher", cache=False)
    loaded.generate(prompts[:2], max_new_tokens=2, batch_size=2)  # load + warm up kernels
    for label, shared, reserved, batch in paths:
        gen = loaded.with_cache(False)
        gen.share_prefixes, gen.reserve_cache = shared, reserved
        start = time.perf_counter()
        answers[label] = gen.generate(prompts, max_new_tokens=max_new_tokens, batch_size=batch, progress=False)
        out[f"{label} calls/s"] = len(prompts) / (time.perf_counter() - start)
    speeds = [out[f"{label} calls/s"] for label, *_ in paths]
    out["sharing speed-up"], out["reserving speed-up"] = speeds[1] / speeds[0], speeds[2] / speeds[1]
    out["kit / earliest speed"] = speeds[2] / speeds[0]
    first = answers[paths[0][0]]
    out["same answers"] = min(sum(a == b for a, b in zip(first, other)) for other in answers.values()) / len(prompts)
    return out


def bench_retrieval(n_queries: int = 500) -> dict[str, float]:
    """Queries/s of BM25 and dense search over the largest corpus available offline."""
    try:
        corpus = load_corpus("nq_open_oracle")
    except DataError as err:  # no real mirror here: say so, and time the embedded corpus
        print(f"  (NQ-open oracle mirror not found — {err}; timing data/mini instead)")
        corpus = mini_corpus()
    queries = [p.title + " " + " ".join(p.text.split()[:8]) for p in corpus][:n_queries]
    out = {"corpus passages": float(len(corpus))}
    for retriever in (BM25Retriever(corpus), DenseRetriever(corpus, load_embedder())):
        start = time.perf_counter()
        retriever.search(queries, 10)
        out[f"{retriever.name} q/s"] = len(queries) / (time.perf_counter() - start)
    return out


def bench_load() -> dict[str, float]:
    """Generator load time: first load (GGUF de-quantise + convert) vs the cached copy."""
    spec = resolve_model("generator", get_scale())
    dtype = model_dtype("cpu")[0]
    with tempfile.TemporaryDirectory() as tmp:
        previous = os.environ.get("ROBUSTKIT_CACHE")
        os.environ["ROBUSTKIT_CACHE"] = tmp
        try:
            times = []
            for _ in range(2):  # a fresh cache: convert the GGUF, then load the converted copy
                start = time.perf_counter()
                load_causal_lm(spec, dtype, shared=False)
                times.append(time.perf_counter() - start)
            cold, cached = times
        finally:
            if previous is None:
                os.environ.pop("ROBUSTKIT_CACHE")
            else:
                os.environ["ROBUSTKIT_CACHE"] = previous
    return {"load cold s": cold, "load cached s": cached, "cold / cached": cold / cached}


def bench_corm(n_queries: int = 48) -> dict[str, float]:
    """Algorithm 1 at tiny: reranking latency for M candidates (critic vs relevance CE vs
    LLM-rerank, no cache), and end-to-end queries/s with and without the abstention short-cut."""
    import numpy as np

    from robustkit.corm import experiments as ex
    from robustkit.corm import settings
    from robustkit.corm.build import build

    cfg = settings("tiny")
    queries = ex.test_queries(cfg)
    biased = list(queries.loc[queries["condition"] == "biased", "query"][:n_queries])
    names = ["relevance-ce", "corm", "llm-rerank"]
    latency = ex.rerank_latency(cfg, names, biased[:8]).set_index("method")["rerank ms/query"]
    out = {f"{name} rerank ms/query": ms for name, ms in latency.items()}
    out["corm / relevance-ce latency"] = latency["corm"] / latency["relevance-ce"]
    out["llm-rerank / corm latency"] = latency["llm-rerank"] / latency["corm"]
    system = build("corm", cfg)
    system.generator = system.generator.with_cache(False)  # real generation, no replays
    gamma = float(np.median([s[0] for _, s in system.rank(biased)]))
    batch = [Query(str(i), str(i), text) for i, text in enumerate(biased)]
    for label, g in (("forced", None), (f"gamma={gamma:.2f}", gamma)):
        system.gamma = g
        start = time.perf_counter()
        answers = system.answer(batch)
        out[f"end-to-end q/s, {label}"] = len(biased) / (time.perf_counter() - start)
        out[f"abstained, {label}"] = float(np.mean([a.abstained for a in answers]))
    return out


def bench_scorer(n_questions: int = 16, m: int = 100) -> dict[str, float]:
    """Cross-encoder scoring on this machine's device: pairs/s over ``n_questions`` × ``m`` dense
    candidates (data/mini, no cache), and ms to rerank one question's ``m`` candidates (the
    paper's critic: 215 ms for M = 100). MiniLM with a fresh head: the speed does not depend on
    what a head has learnt. On a GPU every call is copied back once, after its last batch."""
    from robustkit.crossencoder.model import CrossEncoder, CrossEncoderScorer

    corpus = mini_corpus()
    questions = [q.text for q in mini_questions("test")[:n_questions]]
    hits = DenseRetriever(corpus, load_embedder("tiny")).search(questions, m)
    rows = [([q] * len(row), [corpus[h.doc_id].content for h in row]) for q, row in zip(questions, hits)]
    scorer = CrossEncoderScorer(CrossEncoder(resolve_model("critic_init", "tiny").path), cache=False)
    scorer.score(*rows[0])  # warm-up: first kernels, allocator
    start = time.perf_counter()
    scorer.score([q for qs, _ in rows for q in qs], [d for _, ds in rows for d in ds])
    pairs_per_s = sum(len(qs) for qs, _ in rows) / (time.perf_counter() - start)
    start = time.perf_counter()
    for queries, passages in rows:
        scorer.score(queries, passages)
    per_question = (time.perf_counter() - start) / len(rows)
    return {f"pairs/s on {scorer.device}, all {len(rows)} questions in one call": pairs_per_s,
            f"ms to rerank one question's {m} candidates": per_question * 1000}


def bench_counterrefine(n_queries: int = 8) -> dict[str, float]:
    """Questions/s of Baseline-RAG (the draft alone) and of CounterRefine at tiny, no call cache,
    and their ratio of model calls. Every draft takes the REVISE path (threshold 0), the costliest
    case: decision, answer line and citation."""
    from robustkit import registry
    from robustkit.counterrefine import eval_sets, settings
    from robustkit.reader import answer_with_context
    from robustkit.retrieval import top_passages

    cfg = settings("tiny")
    ev = eval_sets(cfg)[0]
    method = registry.build("counterrefine", cfg, corpus=ev.corpus, retriever=ev.retriever, revise_above=0.0)
    method.generator = method.generator.with_cache(False)
    texts = [q.text for q in ev.questions[:n_queries]]
    answer_with_context(method.generator, texts[:1], top_passages(ev.retriever, ev.corpus, texts[:1], cfg.k),
                        max_words=method.max_words, max_new_tokens=2)  # load + warm up kernels
    start = time.perf_counter()
    answer_with_context(method.generator, texts, top_passages(ev.retriever, ev.corpus, texts, cfg.k),
                        max_words=method.max_words, max_new_tokens=cfg.draft_tokens)
    out = {"dense (the draft) q/s": len(texts) / (time.perf_counter() - start)}
    start = time.perf_counter()
    answers = method.answer([Query(str(i), q.id, q.text) for i, q in enumerate(ev.questions[:n_queries])])
    out["counterrefine q/s"] = len(texts) / (time.perf_counter() - start)
    out["dense / counterrefine time"] = out["dense (the draft) q/s"] / out["counterrefine q/s"]
    out["model calls, counterrefine / baseline"] = sum(a.model_calls for a in answers) / len(answers)
    return out


def bench_fva(n_queries: int = 8) -> dict[str, float]:
    """Questions/s of vanilla RAG, Self-RAG, CRAG and FVA-RAG at tiny over cache B on data/mini's
    held-out misconception questions, no call cache (FVA-RAG pays for its own draft), and each
    method's model calls and FVA-RAG's NLI calls per question."""
    from robustkit import registry
    from robustkit.fva import eval_sets, settings
    from robustkit.fva.build import IDS
    from robustkit.fva.train import calibration_questions
    from robustkit.reader import answer_with_context
    from robustkit.retrieval import DenseRetriever, load_embedder
    from robustkit.retrieval import top_passages

    cfg = settings("tiny")
    ev = eval_sets(cfg)[0]
    queries = [Query(i.id, i.id, i.text) for i in ev.items[:n_queries]]
    dense = DenseRetriever(ev.caches["B"], load_embedder(cfg.scale))
    systems = {name: registry.build(name, cfg, corpus=ev.caches["B"], retriever=dense,
                                    calibration=calibration_questions()) for name in IDS}
    generator = systems["dense"].generator.with_cache(False)  # real generation, no replays
    for system in systems.values():
        system.generator = generator
    if systems["crag"].evaluator is not None:  # its grades are kept on disk: grade afresh
        systems["crag"].evaluator = systems["crag"].evaluator.uncached()
    probe = systems["dense"]
    answer_with_context(generator, [queries[0].text], top_passages(probe.retriever, probe.corpus, [queries[0].text], 1),
                        max_words=probe.max_words, max_new_tokens=2)  # load + warm up kernels
    out, rates = {}, {}
    for name, system in systems.items():
        start = time.perf_counter()
        answers = system.answer(queries)
        rates[name] = len(queries) / (time.perf_counter() - start)
        out[f"{name} q/s"] = rates[name]
        out[f"{name} model calls/q"] = sum(a.model_calls for a in answers) / len(answers)
        if name == "fva-rag":
            out["fva-rag NLI calls/q"] = sum(a.trace["adjudicator_calls"] for a in answers) / len(answers)
    for name in ("self-rag", "crag", "fva-rag"):
        out[f"dense / {name} time"] = rates["dense"] / rates[name]
    return out


def bench_serve_load(n_requests: int = 16, repeats: int = 2) -> dict[str, float]:
    """`serve` under load: requests/s and p50/p95 latency of dense RAG (tiny) over HTTP on loopback
    at 1, 4 and 16 concurrent chat requests, answered one request per method call (the server
    before batching) and with concurrent requests batched (``serve.BATCH_WINDOW_S``). Both servers
    run side by side and take turns, ``repeats`` times per concurrency, so that a drift in the
    machine's load falls on both alike; requests/s is the median turn's, latencies pool the turns.
    The same questions in every turn and no call cache: every answer is computed."""
    import statistics
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import httpx
    import uvicorn

    from robustkit import registry, resources
    from robustkit.loopback import free_port
    from robustkit.serve import app_for

    method = registry.build("dense", "tiny")
    method.generator = method.generator.with_cache(False)
    questions = [q.text for q in mini_questions()[:n_requests]]
    servers = {}
    for label, share in (("one at a time", False), ("batched", True)):
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(app_for(method, resources.corpus_for("tiny"), share=share),
                                               host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.05)
        servers[label] = (server, thread, port)

    def ask(port: int, question: str) -> float:
        start = time.perf_counter()
        httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", timeout=600,
                   json={"model": method.name, "messages": [{"role": "user", "content": question}]}
                   ).raise_for_status()
        return time.perf_counter() - start

    for _, _, port in servers.values():
        ask(port, questions[0])  # warm-up: first kernels, allocator
    out: dict[str, float] = {}
    for concurrency in (1, 4, 16):
        rates: dict[str, list[float]] = {label: [] for label in servers}
        latencies: dict[str, list[float]] = {label: [] for label in servers}
        for _ in range(repeats):
            for label, (_, _, port) in servers.items():
                start = time.perf_counter()
                with ThreadPoolExecutor(concurrency) as pool:
                    latencies[label] += pool.map(lambda q, port=port: ask(port, q), questions)
                rates[label].append(len(questions) / (time.perf_counter() - start))
        for label in servers:
            ordered = sorted(latencies[label])
            out[f"{label}, {concurrency} concurrent: requests/s"] = statistics.median(rates[label])
            out[f"{label}, {concurrency} concurrent: p50 s"] = statistics.median(ordered)
            out[f"{label}, {concurrency} concurrent: p95 s"] = ordered[round(0.95 * (len(ordered) - 1))]
        out[f"batched / one at a time, {concurrency} concurrent"] = (
            out[f"batched, {concurrency} concurrent: requests/s"] / out[f"one at a time, {concurrency} concurrent: requests/s"])
    for server, thread, _ in servers.values():
        server.should_exit = True
        thread.join()
    return out


def main() -> None:
    import torch

    cpu = cpu_info()
    print(f"robustkit bench — scale {get_scale().name}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, CPU {cpu['model']} ({cpu['isa']}, "
          f"{'native' if cpu['bf16'] else 'no native'} bf16), generator dtype {model_dtype('cpu')[0]}")
    sections = [("dtype on this CPU (16 reader prompts, 16 new tokens)", bench_dtypes)]
    sections += [(f"generator, {n} new tokens", lambda n=n: bench_generator(max_new_tokens=n))
                 for n in (16, 32)]
    sections += [("served generator: transformers serve on loopback vs in-process (16 reader prompts)",
                  bench_served)]
    sections += [("teacher workload: shared passage prefixes, reserved KV cache (96 prompts)", bench_prefix_sharing)]
    sections += [("retrieval", bench_retrieval), ("model load", bench_load),
                 ("cross-encoder scoring (MiniLM, M = 100 candidates a question)", bench_scorer),
                 ("risk-aware RAG (Algorithm 1)", bench_corm),
                 ("CounterRefine vs Baseline-RAG (8 two-hop questions)", bench_counterrefine),
                 ("FVA-RAG vs its baselines (8 misconception questions, cache B)", bench_fva),
                 ("serve under load: dense RAG over HTTP, one request per call vs batched (16 requests, 2 turns each)",
                  bench_serve_load)]
    for title, fn in sections:
        print(f"\n[{title}]")
        for key, value in fn().items():
            print(f"  {key:<44} {value:10.2f}")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS {peak_mb:.0f} MB")
