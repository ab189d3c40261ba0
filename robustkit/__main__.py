"""Command line: ``python -m robustkit {run,bench,gap}``."""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m robustkit")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("bench", help="speed and memory of generator, cache, retrieval, model load")
    gap = sub.add_parser("gap", help="the relevance-robustness gap on data/mini")
    gap.add_argument("--retriever", default="dense", choices=["bm25", "dense", "hybrid"])
    gap.add_argument("--split", default="test", choices=["train", "test", "all"])
    args = parser.parse_args(argv)
    if args.command == "bench":
        from robustkit.bench import main as bench

        bench()
    elif args.command == "gap":
        _gap(args.retriever, args.split)
    return 0


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
