"""``python -m robustkit audit``: build the system under test from the command line's arguments,
ask it, analyse, write the report."""
from __future__ import annotations

import re
from pathlib import Path

from robustkit.config import get_scale, with_overrides
from robustkit.paths import figures_dir


def system_under_test(args, scale):
    """The endpoint as a kit ``Method``: a RAG endpoint, or a served chat model — closed-book, or
    the kit's dense RAG over ``--corpus`` with that model as its reader."""
    from robustkit.audit.endpoints import ClosedBook, RAGEndpoint

    if args.format == "rag":
        if args.model or args.corpus:
            raise ValueError("--model and --corpus are for --format openai; a RAG endpoint retrieves and "
                             "answers itself (serve a kit method over your passages with robustkit serve "
                             "--method ID --corpus FILE)")
        return RAGEndpoint(args.endpoint, name=args.name, timeout=args.timeout)
    if not args.model:
        raise ValueError("--format openai needs --model, the served model's name (GET <endpoint>/models lists them)")
    served = with_overrides(scale, models={"generator": f"openai:{args.model}@{args.endpoint}"})
    if not args.corpus:
        from robustkit.llm_client import make_generator

        return ClosedBook(make_generator("generator", served, timeout=args.timeout), name=args.name)
    from robustkit import registry, resources

    corpus, retriever = resources.own_corpus(args.corpus, served)
    return registry.build("dense", served, corpus=corpus, retriever=retriever)


def main(args) -> None:
    from robustkit.audit import analyse, audit_set, run, write_report

    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", args.name):
        raise ValueError(f"--name {args.name!r} names folders: use lower-case letters, digits, '-' and '_'")
    scale = get_scale(args.scale)
    system = system_under_test(args, scale)
    questions, rewrites = audit_set(args.questions, scale, n_questions=args.n_questions)
    print(f"[robustkit] audit of {args.endpoint} ({args.format}): {len(questions)} questions, "
          f"{len(rewrites)} biased rewrites")
    results = run(system, questions, rewrites, name=args.name, scale=scale)
    tables = analyse(results)
    out = Path(args.out) if args.out else figures_dir() / f"audit-{args.name}"
    paths = write_report(results, tables, out, system=args.name, endpoint=args.endpoint, scale=scale.name,
                         source=str(args.questions))
    from robustkit.audit.report import findings

    print(findings(tables))
    print("[robustkit] report: " + ", ".join(str(p) for p in paths.values()))
