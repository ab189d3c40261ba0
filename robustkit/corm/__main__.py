"""``python -m robustkit.corm {train,bench}``: train a critic from exported groups, or time the
training loop (also on several processes under ``torchrun`` or ``accelerate launch``, where
``--batch-groups`` is each process's; needs only torch, transformers, accelerate)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from robustkit.artifacts import atomic_write_text
from robustkit.crossencoder.groups import check_groups, split_groups


def main(argv=None) -> None:
    try:
        _main(argv)
    except (ValueError, TypeError, FileNotFoundError) as err:  # DataError is a ValueError
        # a bad argument or input file: status 2, as argparse's own refusals and ``python -m robustkit``
        print(f"python -m robustkit.corm: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None


def _main(argv) -> None:
    parser = argparse.ArgumentParser(prog="python -m robustkit.corm")
    sub = parser.add_subparsers(dest="command", required=True)
    tr = sub.add_parser("train", help="train a critic from a groups JSONL")
    tr.add_argument("--groups", required=True)
    tr.add_argument("--val-groups")
    tr.add_argument("--init", required=True, help="encoder path or hub id")
    tr.add_argument("--out", required=True)
    tr.add_argument("--loss", default="hybrid", choices=["hybrid", "pointwise", "listwise"])
    tr.add_argument("--tau", type=float, default=1.0)
    tr.add_argument("--epochs", type=int, default=3)
    tr.add_argument("--lr", type=float, default=5e-5)
    tr.add_argument("--batch-groups", type=int, default=32, help="groups a step, on each process")
    tr.add_argument("--grad-accum", type=int, default=1)
    tr.add_argument("--max-length", type=int, default=256)
    tr.add_argument("--seed", type=int, default=0)
    be = sub.add_parser("bench", help="training throughput of the kit's loop (GPU or CPU)")
    be.add_argument("--groups", required=True)
    be.add_argument("--init", required=True)
    be.add_argument("--shapes", default="minilm", help="comma-separated: minilm,base,large")
    be.add_argument("--batch-pairs", type=int, default=352)
    be.add_argument("--steps", type=int, default=30)
    be.add_argument("--pad-to", type=int)
    be.add_argument("--compile", action="store_true")
    be.add_argument("--out")
    args = parser.parse_args(argv)
    groups = _read_groups(args.groups)
    if args.command == "bench":
        from robustkit.corm.throughput import benchmark

        results = [benchmark(groups, init=args.init, shape=shape, batch_pairs=args.batch_pairs,
                             steps=args.steps, pad_to=args.pad_to, compile_model=args.compile)
                   for shape in args.shapes.split(",")]
        for result in results:
            print(json.dumps(result))
        if args.out:
            atomic_write_text(args.out, json.dumps(results, indent=2))
        return
    val = _read_groups(args.val_groups) if args.val_groups else None
    for path, checked, what in ((args.groups, groups, "training group"),
                                (args.val_groups, val, "validation group")):
        try:
            if checked is not None:
                check_groups(checked, what, by_question=val is None)
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None
    if val is None:
        groups, val = split_groups(groups, seed=args.seed)
    from accelerate import PartialState

    from robustkit.crossencoder.processes import trained_on
    from robustkit.crossencoder.train import pass_budget, train  # torch, once the groups are known good

    start = time.perf_counter()
    history = train(groups, val, init=args.init, out_dir=args.out, loss=args.loss, tau=args.tau,
                    epochs=args.epochs, lr=args.lr, batch_groups=args.batch_groups,
                    grad_accum=args.grad_accum, max_length=args.max_length, seed=args.seed,
                    max_pairs=pass_budget(args.init, args.max_length)[0])
    processes = PartialState()  # the one training set up
    if processes.is_main_process:
        last = [h for h in history if h["split"] == "val"][-1]
        atomic_write_text(Path(args.out) / "summary.json", json.dumps(
            {"seconds": time.perf_counter() - start, **last,
             **trained_on(processes, args.batch_groups, args.grad_accum)}, indent=2))
        print(json.dumps(last))


def _read_groups(path: str) -> list[dict]:
    from robustkit.data.records import read_jsonl

    return read_jsonl(path, ("query", "docs", "labels"))


if __name__ == "__main__":
    main()
