"""``python -m robustkit run headtohead --questions FILE [--corpus FILE]``: a researcher's own
questions (and passages) through the chosen methods, and a report of them.

    paths = rk.headtohead.own.main(rk.headtohead.settings("tiny", methods=["dense", "corm"]),
                                   questions="questions.jsonl", corpus="passages.jsonl")

It says first what it must prepare — each method's trained parts that are not staged yet, with
the time the notebooks that build them took, measured — and trains them once, as the methods'
own commands would. Then it answers under load-only, so nothing trained is rebuilt while
answering, and writes ``figures/headtohead-<questions file>/``: the summary, the drop under each
bias type and the paired tests against the reference (CSV), a per-question CSV of every answer,
the cost and robustness figures, and ``report.md``, which names the reference. The files'
formats are ``robustkit.data.own``'s; questions without rewrites get the adversary's, one of each
bias type.
"""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from robustkit import registry, resources
from robustkit.artifacts import NotStaged, atomic_write_text, load_only
from robustkit.corm.config import CormConfig
from robustkit.corm.pipeline import queries_for
from robustkit.corm.train import adversary_rewrites
from robustkit.data import PERTURBATION_TYPES, Corpus
from robustkit.data.own import read_questions
from robustkit.headtohead import experiments as ex
from robustkit.headtohead import figures, readings
from robustkit.headtohead.config import HeadToHeadConfig, settings
from robustkit.headtohead.pipeline import run
from robustkit.metrics import p_as_text
from robustkit.paths import figures_dir
from robustkit.run_times import MEASURED

# the notebooks that build each paper folder's trained parts, cold and in order (run_times.csv)
BUILT_BY = {"corm": ("00", "01", "02", "03"), "fva": ("05",), "counterrefine": ("06",), "alignrag": ("07",)}
PER_QUESTION = ["method", "question_id", "query_id", "type", "query", "answers", "answer", "correct",
                "abstained", "model_calls"]


def main(cfg: HeadToHeadConfig | str | None = None, *, questions: str | Path, corpus: str | Path | None = None,
         out: str | Path | None = None) -> dict[str, Path]:
    """Prepare what is missing, answer every query of ``questions`` with every method of ``cfg``
    over ``corpus`` (a passages file or "mini"; default: the scale's corpus) and write the report;
    returns the paths written."""
    cfg = settings(cfg)
    passages, retriever = resources.own_corpus(str(corpus), cfg.scale) if corpus else (None, None)
    asked = own_queries(cfg, questions, passages)
    prepare(cfg)
    with load_only():  # answering only: a trained part found missing now is an error, not a retrain
        results = run(cfg, asked, corpus=passages, retriever=retriever)
    folder = Path(out) if out else figures_dir() / f"headtohead-{_slug(questions)}"
    paths = write(results, folder, cfg=cfg, questions=str(questions),
                  corpus=str(corpus) if corpus else f"the scale's ({cfg.scale.dataset})")
    print(f"[robustkit] report: {paths['md']}", flush=True)
    return paths


def own_queries(cfg: HeadToHeadConfig, questions: str | Path, corpus: Corpus | None = None) -> pd.DataFrame:
    """The queries table of a questions file: each question clean and in each of its rewrites,
    the adversary writing one of each bias type for a question that brings none (its distractions
    retold from ``corpus``, default the scale's)."""
    asked, rewrites = read_questions(questions)
    brought = {r.question_id for r in rewrites}
    missing = [q for q in asked if q.id not in brought]
    if missing:
        print(f"[robustkit] {len(missing)} of {len(asked)} question(s) bring no rewrites: the adversary writes "
              f"one of each bias type for them", flush=True)
        rewrites += adversary_rewrites(cfg.config_for(CormConfig), missing, k=len(PERTURBATION_TYPES),
                                       name=f"own-{_slug(questions)}", corpus=corpus)
    return queries_for(asked, rewrites)


def prepare(cfg: HeadToHeadConfig) -> list[str]:
    """Build every method's trained parts that are not staged yet, saying first which and how
    long the notebooks that build them took; returns the methods that needed it."""
    needed = {}
    for name in cfg.methods:
        try:
            with load_only():
                registry.build(name, cfg.configs)
        except NotStaged as missing:
            needed[name] = str(missing).split(" is ", 1)[0]
    if not needed:
        print("[robustkit] every method's trained parts are staged: answering only", flush=True)
        return []
    folders = sorted({registry.entry(m).folder for m in needed} & set(BUILT_BY))
    print(f"[robustkit] to prepare first, once ({cfg.scale.name}): "
          + "; ".join(f"{m} (missing {path})" for m, path in needed.items()), flush=True)
    print(f"[robustkit] {_time_to_prepare(folders, cfg.scale.name)}", flush=True)
    for name in needed:
        registry.build(name, cfg.configs)
    return list(needed)


def write(results: pd.DataFrame, folder: Path, *, cfg: HeadToHeadConfig, questions: str, corpus: str) -> dict[str, Path]:
    """The report's tables, figures and ``report.md`` under ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    table, drops = ex.summary(results), ex.robustness(results)
    tests = ex.significance(results, reference=cfg.reference)
    paths = {"summary": folder / "summary.csv", "robustness": folder / "robustness.csv",
             "tests": folder / "tests.csv", "answers": folder / "answers.csv", "md": folder / "report.md"}
    for key, frame in (("summary", table), ("robustness", drops), ("tests", tests),
                       ("answers", results[PER_QUESTION].sort_values(["question_id", "query_id", "method"]))):
        atomic_write_text(paths[key], frame.to_csv(index=False))
    for key, draw, data in (("cost", figures.plot_cost_accuracy, table), ("drops", figures.plot_drops, drops)):
        fig = draw(data, scale=cfg.scale.name, name=None)
        fig.savefig(folder / f"{key}.png")
        paths[key] = folder / f"{key}.png"
    with pd.option_context("display.width", 200, "display.max_columns", 30, "display.max_colwidth", 40):
        text = "\n\n".join([
            f"# Head to head on {questions}",
            f"{results['question_id'].nunique()} questions ({len(results) // results['method'].nunique()} queries, "
            f"clean and biased) over {corpus}, scale `{cfg.scale.name}`; every paired test against the "
            f"reference, **{cfg.reference}** (exact McNemar on questions, p uncorrected).",
            "## Findings", readings.findings(table, drops, tests),
            "## Summary", "```\n" + table.drop(columns=["method", "paper"]).to_string(index=False) + "\n```",
            f"## Paired tests against {cfg.reference}", "```\n" + p_as_text(tests).to_string(index=False) + "\n```",
            "Every answer: `answers.csv`; the figures: `cost.png`, `drops.png`."])
    atomic_write_text(paths["md"], text + "\n")
    return paths


def _time_to_prepare(folders: list[str], scale: str) -> str:
    """How long the notebooks that build these folders' trained parts took, where measured."""
    notebooks = sorted({n for f in folders for n in BUILT_BY[f]})
    times = [MEASURED.get((f"notebook {n}", scale, "CPU")) for n in notebooks]
    if not notebooks or any(t is None for t in times):
        return (f"not measured at {scale} on this kind of machine: notebooks {', '.join(notebooks)} build "
                "these parts (rk.timings estimates GPU times)")
    return (f"notebooks {', '.join(notebooks)}, which build them, took {sum(s for s, _ in times) / 60:.0f} min "
            f"cold in all ({times[0][1]}); answering then takes minutes")


def _slug(path: str | Path) -> str:
    """A file's stem as a folder name: lower-case letters, digits, '-' and '_'."""
    return re.sub(r"[^a-z0-9_-]+", "-", Path(path).stem.lower()).strip("-") or "questions"
