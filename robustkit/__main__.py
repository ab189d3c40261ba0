"""Command line: ``python -m robustkit {run,bench,gap}``."""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m robustkit")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="the CoRM-RAG pipeline end to end at a scale: perturb, "
                         "label, distil the critics, evaluate (Table 1, Fig. 3)")
    run.add_argument("--scale", help="tiny | small | colab | paper (default: $ROBUSTKIT_SCALE)")
    run.add_argument("--no-llm-rerank", action="store_true", help="skip the slow LLM-rerank baseline")
    sub.add_parser("bench", help="speed and memory of generator, cache, retrieval, model load")
    gap = sub.add_parser("gap", help="the relevance-robustness gap on data/mini")
    gap.add_argument("--retriever", default="dense", choices=["bm25", "dense", "hybrid"])
    gap.add_argument("--split", default="test", choices=["train", "test", "all"])
    args = parser.parse_args(argv)
    if args.command == "run":
        _run(args.scale, not args.no_llm_rerank)
    elif args.command == "bench":
        from robustkit.bench import main as bench

        bench()
    elif args.command == "gap":
        _gap(args.retriever, args.split)
    return 0


def _run(scale_name: str | None, llm_rerank: bool) -> None:
    import pandas as pd

    from robustkit import experiments as ex
    from robustkit import pipeline, plots
    from robustkit.config import get_scale, runs_dir

    scale = get_scale(scale_name)
    print(f"[robustkit] CoRM-RAG pipeline at scale {scale.name!r}; artifacts in {runs_dir(scale)}")
    names = [n for n in ex.METHOD_LABELS if llm_rerank or n != "llm-rerank"]
    queries = ex.test_queries(scale)
    methods = ex.rerankers(scale, names)
    results = ex.run_methods(scale, methods, queries)
    results.drop(columns=["answers", "gold_ids"]).to_json(runs_dir(scale) / "results.jsonl",
                                                          orient="records", lines=True)
    table = ex.table1(results, ex.rerank_latency(scale, methods, list(queries["query"][:8])))
    curves, coverage = ex.risk_coverage_table(results)
    recall = ex.recall_table(results)
    pairs, shares = ex.paired_ranks(results)
    tests = ex.significance(results)
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(table.drop(columns=["key", "source"]).to_string(index=False))
        print(tests.to_string(index=False))
        print(coverage.to_string(index=False))
        print(recall[recall["k"].isin([1, 3, 5, 10, 20, 50, 100])].pivot(index="k", columns="method",
                                                                          values="recall").round(3))
    print(ex.findings(table, tests, coverage, shares))
    suffix = "" if scale.name == "tiny" else f"_{scale.name}"
    plots.plot_table1(table, ex.PAPER_TABLE1, scale=scale.name, name=f"corm_table1{suffix}")
    plots.plot_risk_coverage(curves, coverage, ex.PAPER_POINTS["risk_coverage"], scale=scale.name,
                             name=f"corm_fig3_risk_coverage{suffix}")
    plots.plot_recall_and_ranks(recall, pairs, shares, ex.PAPER_POINTS, scale=scale.name,
                                name=f"corm_fig4_recall_ranks{suffix}")


def _gap(kind: str, split: str) -> None:
    from robustkit.data import mini_corpus, mini_questions, mini_rewrites
    from robustkit.llm import Generator
    from robustkit.rag import relevance_robustness_gap, summarize_gap
    from robustkit.retrieval import build_retriever

    corpus = mini_corpus()
    table = relevance_robustness_gap(corpus, mini_questions(None if split == "all" else split),
                                     mini_rewrites(), build_retriever(kind, corpus), Generator())
    print(summarize_gap(table).to_string())


if __name__ == "__main__":
    sys.exit(main())
