"""``python -m robustkit run counterrefine``: Baseline-RAG, CounterRefine and its ablations on
every evaluated question — Table 3 and 4, transitions, paired tests — printed and drawn into
``figures/``."""
from __future__ import annotations

import time

import matplotlib.pyplot as plt
import pandas as pd

from robustkit.paths import figures_dir
from robustkit.counterrefine import experiments as ex
from robustkit.counterrefine import figures
from robustkit.counterrefine import readings
from robustkit.counterrefine.config import CounterRefineConfig, settings
from robustkit.counterrefine.data import describe, run_dir
from robustkit.counterrefine.pipeline import run
from robustkit.plots import figure_suffix, save_table


def main(cfg: CounterRefineConfig | str | None = None) -> pd.DataFrame:
    """Run (reusing a finished artifact), print the tables, save Table 3/4 and Fig. 2/3; returns Table 3."""
    start = time.perf_counter()
    cfg = settings(cfg)
    print(f"[robustkit] CounterRefine at scale {cfg.scale.name!r} (artifacts in {run_dir(cfg)}):")
    with pd.option_context("display.width", 160, "display.max_columns", 20, "display.max_colwidth", 60):
        print(describe(cfg).to_string(index=False), flush=True)
        results = run(cfg)
        tables, _ = save_tables(results, cfg.scale.name)
        for name in ("table3", "table4", "helped vs harmed", "validation", "cost"):
            print(tables[name].drop(columns=["CI low", "CI high"], errors="ignore").to_string(index=False))
    print(readings.findings(results))
    print(f"[robustkit] done in {(time.perf_counter() - start) / 60:.1f} min (figures in {figures_dir()})")
    return tables["table3"]


def save_tables(results: pd.DataFrame, scale: str) -> tuple[dict[str, pd.DataFrame], dict]:
    """Table 3 and 4 as CSV, Fig. 2 and 3 as PNG + CSV, under ``figures/`` (suffix ``_<scale>``
    beyond tiny); returns every table and both figures (closed: a notebook shows each where it
    discusses it) by name."""
    suffix = figure_suffix(scale)
    tables = {"table3": ex.table3(results), "table4": ex.table4(results), "transitions": ex.transitions(results),
              "helped vs harmed": ex.helped_vs_harmed(results), "validation": ex.validation_outcomes(results),
              "cost": ex.cost(results)}
    save_table(tables["table3"][["method", "dataset", "correct", "f1", "n", "source"]], f"counterrefine_table3{suffix}")
    save_table(tables["table4"].drop(columns=["CI low", "CI high"]), f"counterrefine_table4{suffix}")
    drawn = {"fig2": figures.plot_correct(tables["table3"], scale=scale, name=f"counterrefine_fig2{suffix}"),
             "fig3": figures.plot_transitions(tables["transitions"], scale=scale,
                                              name=f"counterrefine_transitions{suffix}")}
    for fig in drawn.values():
        plt.close(fig)
    return tables, drawn
