"""Command line: ``python -m robustkit {run,bench,gap,doctor,serve,audit,disk,clean}``."""
from __future__ import annotations

import argparse
import importlib
import sys

from robustkit.config import SCALE_DATASETS, SCALES
from robustkit.device import ModelDoesNotFit
from robustkit.disk import FolderInUse
from robustkit.models import OfflineModelError, ServerError

# errors whose message already says what is wrong and where (a bug still shows its traceback)
KIT_ERRORS = (ValueError, TypeError, FileNotFoundError, OfflineModelError, ModelDoesNotFit, ServerError, FolderInUse)

METHODS = ("corm", "fva", "counterrefine", "alignrag", "headtohead")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m robustkit")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="a method end to end at a scale (corm: perturb, label, distil "
                         "the critics, evaluate, Table 1, Fig. 3-4; fva: FVA-RAG and its baselines "
                         "on TruthfulQA, Table 2; counterrefine: CounterRefine, its ablations and "
                         "Baseline-RAG, Table 3-4, Fig. 2-3; alignrag: train the critics, CDA vs "
                         "Self-Refine and baselines, Table 1 and 5, Fig. 2-4 and 6; headtohead: every method and "
                         "baseline on the same queries, cost-accuracy and robustness figures)")
    run.add_argument("method", nargs="?", default="corm", choices=METHODS)
    run.add_argument("--scale", choices=sorted(SCALES), help="default: $ROBUSTKIT_SCALE, else tiny "
                     "(colab on a GPU)")
    run.add_argument("--seed", type=_count("the seed"), default=0)
    run.add_argument("--no-llm-rerank", action="store_true", help="corm: skip the slow LLM-rerank baseline")
    run.add_argument("--questions", help="headtohead: your questions, a JSONL file of {id?, question, answers, "
                     "rewrites?} (the audit's format), answered instead of the scale's test questions")
    run.add_argument("--corpus", help="headtohead with --questions: your passages, a JSONL file of {id, title?, "
                     "text} (default: the scale's corpus)")
    run.add_argument("--methods", help="headtohead: comma-separated method ids (default: all; rk.registry.ids())")
    run.add_argument("--reference", help="headtohead: the method every paired test compares with (default: dense)")
    sub.add_parser("bench", help="speed and memory of generator, cache, retrieval, model load")
    gap = sub.add_parser("gap", help="the relevance-robustness gap on data/mini")
    gap.add_argument("--retriever", default="dense", choices=["bm25", "dense", "hybrid"])
    gap.add_argument("--split", default="test", choices=["train", "test", "all"])
    doctor = sub.add_parser("doctor", help="a short end-to-end self-check of every method on this machine "
                            "(data, retrieval, generator, corm, fva, counterrefine, alignrag): a pass/fail "
                            "table with times, dtype and memory; exit status 1 when a check failed")
    doctor.add_argument("--scale", choices=sorted(SCALES), help="default: $ROBUSTKIT_SCALE, else tiny "
                        "(colab on a GPU)")
    doctor.add_argument("--dataset", choices=SCALE_DATASETS, help="read this dataset instead of the scale's "
                        "own, keeping its knobs and models: e.g. --scale colab --dataset mini checks colab's "
                        "paths in minutes on the teaching set (FVA-RAG still reads TruthfulQA)")
    doctor.add_argument("--only", help="comma-separated checks to run, e.g. corm,fva (default: all)")
    serve = sub.add_parser("serve", help="a kit method as an HTTP endpoint: OpenAI chat completions "
                           "(the method's name as the model) and plain JSON at /v1/rag")
    serve.add_argument("--method", required=True, choices=_method_ids(), metavar="ID",
                       help="a method id (rk.registry.ids()): " + ", ".join(_method_ids()[:16]) + ", …")
    serve.add_argument("--scale", choices=sorted(SCALES), help="default: $ROBUSTKIT_SCALE, else tiny")
    serve.add_argument("--host", default="127.0.0.1", help="default: 127.0.0.1 (this machine only)")
    serve.add_argument("--port", type=_port, default=8000)
    serve.add_argument("--corpus", help="the passages the method searches: mini, or a JSONL file of {id, title?, "
                       "text} (default: the scale's corpus); the same file as audit --corpus")
    serve.add_argument("--api-key", help="answer only requests with 'Authorization: Bearer <key>' "
                       "(default: $ROBUSTKIT_API_KEY; none: any request)")
    audit = sub.add_parser("audit", help="the robustness of any RAG system (or chat model) under biased "
                           "questions: a report in Markdown and HTML, and a JSON of every call")
    audit.add_argument("--endpoint", required=True, help="the system's base URL, e.g. http://127.0.0.1:8000/v1")
    audit.add_argument("--format", default="rag", choices=["rag", "openai"], help="rag: POST <endpoint>/rag "
                       "(robustkit serve's format); openai: a chat model, closed-book or reading --corpus")
    audit.add_argument("--model", help="openai format: the served model's name")
    audit.add_argument("--questions", default="mini", help="mini (data/mini's test questions, default), "
                       "nq_open, or a JSONL file of {id, question, answers, rewrites?}")
    audit.add_argument("--n-questions", type=_count("--n-questions"), default=0,
                       help="the first n questions only (default 0: all)")
    audit.add_argument("--timeout", type=_seconds, default=300.0, help="seconds to wait for one request to the "
                       "system (default 300); a request that times out is retried, then named")
    audit.add_argument("--corpus", help="openai format: the kit's dense retrieval over this corpus feeds the "
                       "model (mini, or a JSONL file of {id, title, text}); without it the model is closed-book")
    audit.add_argument("--name", default="system", help="the system's name in the report and runs/")
    audit.add_argument("--out", help="the report's folder (default: figures/audit-<name>)")
    audit.add_argument("--scale", choices=sorted(SCALES), help="default: $ROBUSTKIT_SCALE, else tiny")
    disk = sub.add_parser("disk", help="what a scale's runs and the kit's cache hold on disk, folder by folder")
    disk.add_argument("--scale", choices=sorted(SCALES), help="default: $ROBUSTKIT_SCALE, else tiny")
    disk.add_argument("--row", metavar="WHAT", help='print instead the line of figures/run_disk.csv that records '
                      'what runs/<scale> and the cache hold now, after WHAT (e.g. "notebook 03")')
    disk.add_argument("--measured-on", default="", help="--row: where and how it was measured (the machine, "
                      "a cold run)")
    clean = sub.add_parser("clean", help="remove a scale's runs, or one method's: lists what would go, and "
                           "removes it only with --yes (what a notebook needs again, it builds again)")
    clean.add_argument("--scale", choices=sorted(SCALES), help="default: $ROBUSTKIT_SCALE, else tiny")
    clean.add_argument("--method", help="only this folder of runs/<scale>/ (e.g. alignrag, corm)")
    clean.add_argument("--yes", action="store_true", help="remove it (without: only list it)")
    args = parser.parse_args(argv)
    try:
        return _dispatch(args)
    except KIT_ERRORS as err:  # the kit's messages name the culprit: no traceback to read through
        parser.exit(2, f"{parser.prog}: error: {err}\n")


def _headtohead(scale, questions=None, corpus=None, methods=None, reference=None) -> int:
    """``run headtohead``: the scale's test questions, or the user's (``--questions``, ``--corpus``)."""
    from robustkit import headtohead

    if corpus and not questions:
        raise ValueError("--corpus needs --questions: the scale's own questions are asked over the scale's corpus")
    changes = {"reference": reference} if reference else {}
    if methods:
        changes["methods"] = [m.strip() for m in methods.split(",") if m.strip()]
    cfg = headtohead.settings(scale, **changes)
    if questions:
        headtohead.own.main(cfg, questions=questions, corpus=corpus)
    else:
        headtohead.report.main(cfg)
    return 0


def _dispatch(args) -> int:
    """Run the command; returns its exit status."""
    if args.command == "run":
        from robustkit import config
        from robustkit.models import check_models

        scale = config.with_overrides(config.get_scale(args.scale), seed=args.seed)
        check_models(scale)  # every role's model, before any work
        own = {k: getattr(args, k) for k in ("questions", "corpus", "methods", "reference") if getattr(args, k)}
        if own and args.method != "headtohead":
            raise ValueError(f"--{next(iter(own))} is for `run headtohead`, not `run {args.method}`")
        if args.method == "headtohead":
            return _headtohead(scale, **own)
        report = importlib.import_module(f"robustkit.{args.method}.report")
        if args.method == "corm":
            report.main(scale, llm_rerank=not args.no_llm_rerank)
        else:
            report.main(scale)
    elif args.command == "bench":
        from robustkit.bench import main as bench

        bench()
    elif args.command == "gap":
        _gap(args.retriever, args.split)
    elif args.command == "serve":
        from robustkit.serve import main as serve

        serve(args.method, args.scale, args.host, args.port, corpus=args.corpus, api_key=args.api_key)
    elif args.command == "audit":
        from robustkit.audit.cli import main as audit

        audit(args)
    elif args.command == "doctor":
        from robustkit.doctor import main as doctor

        return 1 if doctor(args.scale, args.only, args.dataset) else 0
    elif args.command == "disk":
        _disk(args.scale, args.row, args.measured_on)
    elif args.command == "clean":
        _clean(args.scale, args.method, args.yes)
    return 0


def _disk(scale, row: str | None, measured_on: str) -> None:
    from robustkit import disk

    if row:
        print(disk.measured_row(row, scale, measured_on))
        return
    table = disk.usage(scale)
    print(_sized(table).to_string(index=False) if len(table) else "nothing in runs/ or the cache yet")
    for part in ("runs", "cache"):
        rows = table[table["part"] == part]
        print(f"{part}: {rows['bytes'].sum() / disk.GB:.2f} GB in {rows['files'].sum()} files")


def _clean(scale, method: str | None, yes: bool) -> None:
    from robustkit import disk

    table = disk.clean(scale, method, remove=yes)
    if not len(table):
        print("nothing to remove")
        return
    print(_sized(table).to_string(index=False))
    total = f"{table['bytes'].sum() / disk.GB:.2f} GB in {table['files'].sum()} files"
    print(f"removed {total}" if yes else f"would remove {total}; nothing removed (add --yes to remove it)")


def _sized(table):
    """A size table as a reader reads it: megabytes, not bytes."""
    return table.assign(MB=(table["bytes"] / 1e6).round(1)).drop(columns="bytes")


def _method_ids() -> list[str]:
    from robustkit.registry import ids

    return ids()


def _count(what: str):
    """An argument type: an integer >= 0 (argparse names the option and the value it refused)."""
    def parse(text: str) -> int:
        if not text.strip().isdigit():
            raise argparse.ArgumentTypeError(f"{what} must be an integer >= 0, got {text!r}")
        return int(text)
    return parse


def _port(text: str) -> int:
    if not text.strip().isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"a port is an integer from 1 to 65535, got {text!r}")
    return int(text)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"a timeout is a positive number of seconds, got {text!r}")
    return value


def _gap(kind: str, split: str) -> None:
    from robustkit import resources
    from robustkit.data import mini_corpus, mini_questions, mini_rewrites
    from robustkit.gap import relevance_robustness_gap, summarize_gap
    from robustkit.retrieval import build_retriever

    corpus = mini_corpus()
    table = relevance_robustness_gap(corpus, mini_questions(None if split == "all" else split),
                                     mini_rewrites(), build_retriever(kind, corpus),
                                     resources.generator_for("tiny"))
    print(summarize_gap(table).to_string())


if __name__ == "__main__":
    sys.exit(main())
