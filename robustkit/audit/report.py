"""The audit's report: Markdown and HTML (the figure inline), a PNG and CSV of what it plots, and a
JSON of every call (question, answer, verdict, passages, trace); each file written whole or not at all."""
from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from robustkit.artifacts import atomic_write_text, json_ready
from robustkit.metrics import format_p, p_as_text
from robustkit.plots import KIT, set_style


def plot_accuracy(accuracy: pd.DataFrame, drops: pd.DataFrame, tests: pd.DataFrame, *, system: str, scale: str):
    """Left, accuracy per condition (the clean row first); right, the paired drop from clean per
    bias type with its exact McNemar p. Both with 95% CIs over questions: two unpaired intervals
    can overlap while the paired drop clears zero, which only the right panel shows."""
    set_style()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 3.2), width_ratios=[1, 1], layout="constrained")
    y = np.arange(len(accuracy))
    left.errorbar(accuracy["accuracy"], y, fmt="o", color=KIT, capsize=3,
                  xerr=[accuracy["accuracy"] - accuracy["CI low"], accuracy["CI high"] - accuracy["accuracy"]])
    left.set_yticks(y, [f"{c} (n = {n})" for c, n in zip(accuracy["condition"], accuracy["queries"])])
    left.invert_yaxis()
    left.set(xlabel="accuracy (%)", xlim=(-2, 102), title="accuracy per condition")
    paired = tests[["type", "p"]].merge(drops, on="type")  # the left's order
    y = np.arange(len(paired))
    right.errorbar(paired["drop"], y, fmt="o", color=KIT, capsize=3,
                   xerr=[paired["drop"] - paired["drop CI low"], paired["drop CI high"] - paired["drop"]])
    right.axvline(0, color="black", lw=0.8)
    right.set_yticks(y, [f"{t}\n(p {format_p(p)})" for t, p in zip(paired["type"], paired["p"])], fontsize=8)
    right.invert_yaxis()
    right.set(xlabel="clean − biased accuracy, paired by question (points)",
              title=f"paired drop from clean (exact McNemar; {len(tests)} tests)")
    fig.suptitle(f"Robustness audit of {system}, scale {scale}: {int(accuracy['questions'].max())} questions, "
                 "95% bootstrap CIs over questions", fontsize=10)
    return fig


def plotted(tables: dict) -> pd.DataFrame:
    """What ``plot_accuracy`` draws, one row per point, ``panel`` naming its panel."""
    drops = tables["drops"][tables["drops"]["type"] != "all"]
    return pd.concat([tables["accuracy"].assign(panel="accuracy"), drops.assign(panel="paired drop")],
                     ignore_index=True)


def findings(tables: dict) -> str:
    """The report's opening sentences, from the tables (no number typed)."""
    acc, tests = tables["accuracy"].set_index("condition"), tables["tests"]
    under = ", ".join(f"{t.replace('_', ' ')} {acc.loc[t, 'accuracy']:.1f}%" for t in acc.index if t != "clean")
    text = f"Accuracy {acc.loc['clean', 'accuracy']:.1f}% on clean questions; under bias: {under}. "
    significant = [f"{row['type'].replace('_', ' ')} (p {format_p(row['p'])})"
                   for _, row in tests.iterrows() if row["p"] < 0.05 / len(tests)]
    n = int(tests["n"].max())
    if significant:
        return text + (f"Significant after Bonferroni over {len(tests)} comparisons (exact McNemar, {n} "
                       f"questions): {', '.join(significant)}.")
    return text + (f"No change from clean is significant after Bonferroni over {len(tests)} comparisons "
                   f"(exact McNemar, {n} questions).")


def write(results: pd.DataFrame, tables: dict, out: Path, *, system: str, endpoint: str, scale: str,
          source: str) -> dict[str, Path]:
    """``audit.md``, ``audit.html``, ``audit.png`` + ``audit.csv`` (what the figure plots) and
    ``audit.json`` (every call) under ``out``."""
    out = Path(out)
    fig = plot_accuracy(tables["accuracy"], tables["drops"], tables["tests"], system=system, scale=scale)
    png = io.BytesIO()
    fig.savefig(png, format="png")
    plt.close(fig)
    paths = {kind: out / f"audit.{kind}" for kind in ("md", "html", "png", "csv", "json")}
    atomic_write_text(paths["png"], png.getvalue())
    atomic_write_text(paths["csv"], plotted(tables).to_csv(index=False))
    sections = _sections(results, tables, system=system, endpoint=endpoint, scale=scale, source=source)
    atomic_write_text(paths["md"], _markdown(sections))
    atomic_write_text(paths["html"], _html(sections, base64.b64encode(png.getvalue()).decode()))
    calls = results[["query_id", "question_id", "type", "query", "answers", "answer", "correct", "abstained",
                     "latency_s", "trace"]]
    report = {"system": system, "endpoint": endpoint, "scale": scale, "questions": source,
              "calls": json_ready(calls.to_dict("records"))}
    atomic_write_text(paths["json"], json.dumps(report, indent=1, ensure_ascii=False))
    return paths


def _sections(results, tables, *, system, endpoint, scale, source) -> list[tuple[str, str | pd.DataFrame]]:
    """(heading, prose or table) pairs that both formats render."""
    n_flips = int(tables["flip counts"]["flips"].sum()) if len(tables["flip counts"]) else 0
    syc = tables["sycophancy"]
    return [
        ("", f"System **{system}** at `{endpoint}`, asked {results['question_id'].nunique()} questions "
             f"({source}) clean and under each bias type: {len(results)} queries, scored by the kit's "
             f"normalised match (an abstention is never correct). Scale `{scale}`."),
        ("Findings", findings(tables)),
        ("Accuracy per condition (95% CIs over questions)", tables["accuracy"]),
        ("Drop from clean, per bias type (points; each question's clean and biased answer paired)", tables["drops"]),
        ("Paired tests: clean vs each bias type (exact McNemar on questions, p uncorrected)",
         p_as_text(tables["tests"].drop(columns=["reference"]))),
        (f"Flips: right when clean, wrong when biased ({n_flips} in all; the first of each type by question id)",
         tables["flips"] if n_flips else "None."),
        ("Retrieval sycophancy (CoRM-RAG's diagnosis): what the top passage held", syc if len(syc) else
         "The system returned no passages, so what it read cannot be examined."),
        ("What else the kit's methods would diagnose", "Not computed by this audit: FVA-RAG's falsification "
         "rate (counter-evidence and an NLI adjudicator over each answer), CounterRefine's answer-conditioned "
         "check and AlignRAG's critique need the system's answers run through those methods' own models "
         "(notebooks 05–07)."),
    ]


def _markdown(sections) -> str:
    lines = ["# Robustness audit", ""]
    for heading, body in sections:
        if heading:
            lines += [f"## {heading}", ""]
        lines += [_markdown_table(body) if isinstance(body, pd.DataFrame) else body, ""]
    return "\n".join(lines)


def _markdown_table(table: pd.DataFrame) -> str:
    cell = lambda v: str(v).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    rows = ["| " + " | ".join(map(cell, table.columns)) + " |", "|" + "---|" * len(table.columns)]
    return "\n".join(rows + ["| " + " | ".join(map(cell, r)) + " |" for r in table.itertuples(index=False)])


def _html(sections, png_base64: str) -> str:
    parts = ["<!doctype html><meta charset='utf-8'><title>Robustness audit</title>",
             "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}table{border-collapse:collapse;"
             "font-size:90%}td,th{border:1px solid #ccc;padding:2px 6px}</style><h1>Robustness audit</h1>"]
    for i, (heading, body) in enumerate(sections):
        if heading:
            parts.append(f"<h2>{html.escape(heading)}</h2>")
        parts.append(body.to_html(index=False) if isinstance(body, pd.DataFrame)
                     else f"<p>{html.escape(body).replace('**', '')}</p>")
        if i == 1:  # the figure right after the findings
            parts.append(f"<img alt='accuracy per condition' src='data:image/png;base64,{png_base64}'>")
    return "\n".join(parts)
