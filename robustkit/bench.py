"""``python -m robustkit bench``: speed and memory of the kit's building blocks, in one run.

Prints generator tokens/s unbatched vs batched, call-cache replay vs generation, BM25 and dense
queries/s, model load time cold (GGUF conversion) vs cached, reranking latency (critic vs
relevance CE vs LLM-rerank) with end-to-end queries/s with and without abstention, and peak
RSS. Ratios are against baselines measured in the same run. Timings are printed, never asserted.
"""
from __future__ import annotations

import os
import resource
import tempfile
import time
from pathlib import Path

from robustkit.config import get_scale, resolve_model
from robustkit.data import corpus as load_corpus
from robustkit.data import mini_corpus, mini_questions
from robustkit.llm import CallCache, Generator, load_causal_lm
from robustkit.rag import reader_prompt
from robustkit.retrieval import BM25Retriever, DenseRetriever


def bench_generator(n_prompts: int = 16, max_new_tokens: int = 16) -> dict[str, float]:
    """Tokens/s one prompt at a time vs one batch of ``n_prompts``, and cache replay speed-up.

    The prompts are the reader's (a gold passage and a question, ~165 tokens): prefill dominates,
    so the batched gain grows with the number of generated tokens.
    """
    corpus = mini_corpus()
    prompts = [reader_prompt(q.text, [corpus[q.gold_ids[0]]]) for q in mini_questions()[:n_prompts]]
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


def bench_retrieval(n_queries: int = 500) -> dict[str, float]:
    """Queries/s of BM25 and dense search over the largest corpus available offline."""
    try:
        corpus = load_corpus("nq_open_oracle")
    except Exception:  # no real mirror: fall back to the embedded corpus
        corpus = mini_corpus()
    queries = [p.title + " " + " ".join(p.text.split()[:8]) for p in corpus][:n_queries]
    out = {"corpus passages": float(len(corpus))}
    for retriever in (BM25Retriever(corpus), DenseRetriever(corpus)):
        start = time.perf_counter()
        retriever.search(queries, 10)
        out[f"{retriever.name} q/s"] = len(queries) / (time.perf_counter() - start)
    return out


def bench_load() -> dict[str, float]:
    """Generator load time: first load (GGUF de-quantise + convert) vs the cached copy."""
    spec = resolve_model("generator", get_scale())
    with tempfile.TemporaryDirectory() as tmp:
        previous = os.environ.get("ROBUSTKIT_CACHE")
        os.environ["ROBUSTKIT_CACHE"] = tmp
        try:
            start = time.perf_counter()
            load_causal_lm(spec)
            cold = time.perf_counter() - start
            start = time.perf_counter()
            load_causal_lm(spec)
            cached = time.perf_counter() - start
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

    from robustkit import experiments as ex
    from robustkit import pipeline
    from robustkit.corm import RiskAwareRAG

    scale = get_scale("tiny")
    queries = ex.test_queries(scale)
    biased = list(queries.loc[queries["condition"] == "biased", "query"][:n_queries])
    methods = ex.rerankers(scale, ["relevance-ce", "corm", "llm-rerank"])
    latency = ex.rerank_latency(scale, methods, biased[:8]).set_index("method")["rerank ms/query"]
    out = {f"{name} rerank ms/query": ms for name, ms in latency.items()}
    out["corm / relevance-ce latency"] = latency["corm"] / latency["relevance-ce"]
    out["llm-rerank / corm latency"] = latency["llm-rerank"] / latency["corm"]
    reader = pipeline.generator_for(scale.name).with_cache(False)  # real generation, no replays
    system = RiskAwareRAG(pipeline.retriever_for(scale.name), methods["corm"], reader,
                          pipeline.corpus_for(scale.name), m=scale.m_inference,
                          c=scale.context_size, max_words=scale.max_passage_words)
    gamma = float(np.median([s[0] for _, s in system.rank(biased)]))
    for label, g in (("forced", None), (f"gamma={gamma:.2f}", gamma)):
        start = time.perf_counter()
        results = system(biased, gamma=g)
        out[f"end-to-end q/s, {label}"] = len(biased) / (time.perf_counter() - start)
        out[f"abstained, {label}"] = float(np.mean([r.abstained for r in results]))
    return out


def main() -> None:
    import torch

    print(f"robustkit bench — scale {get_scale().name}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")
    sections = [(f"generator, {n} new tokens", lambda n=n: bench_generator(max_new_tokens=n))
                for n in (16, 32)]
    sections += [("retrieval", bench_retrieval), ("model load", bench_load),
                 ("risk-aware RAG (Algorithm 1)", bench_corm)]
    for title, fn in sections:
        print(f"\n[{title}]")
        for key, value in fn().items():
            print(f"  {key:<24} {value:10.2f}")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS {peak_mb:.0f} MB")
