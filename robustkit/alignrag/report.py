"""``python -m robustkit run alignrag``: train the critics (or reuse them), run every method on
every evaluated question and round — Table 1 and 5, the OOD drop, rounds, informative vs noisy
retrieval, the ablation, training curves — printed and drawn into ``figures/``."""
from __future__ import annotations

import time

import matplotlib.pyplot as plt
import pandas as pd

from robustkit.alignrag import experiments as ex
from robustkit.alignrag import figures
from robustkit.alignrag import readings
from robustkit.alignrag.config import AlignRAGConfig, settings
from robustkit.alignrag.data import describe
from robustkit.alignrag.pipeline import run
from robustkit.alignrag.train import run_dir, training_curves
from robustkit.paths import figures_dir
from robustkit.plots import figure_suffix, save_table


def main(cfg: AlignRAGConfig | str | None = None) -> pd.DataFrame:
    """Run (reusing finished artifacts), print the tables, save the figures; returns Table 1."""
    start = time.perf_counter()
    cfg = settings(cfg)
    print(f"[robustkit] AlignRAG at scale {cfg.scale.name!r} (artifacts in {run_dir(cfg)}):")
    with pd.option_context("display.width", 160, "display.max_columns", 20, "display.max_colwidth", 60):
        print(describe(cfg).to_string(index=False), flush=True)
        results = run(cfg)
        tables, _ = save_tables(results, training_curves(cfg), cfg.scale.name)
        for name in ("table1", "table5", "ood drop", "ablation", "significance"):
            print(tables[name].drop(columns=["CI low", "CI high"], errors="ignore").to_string(index=False))
    print(readings.findings(results))
    print(f"[robustkit] done in {(time.perf_counter() - start) / 60:.1f} min (figures in {figures_dir()})")
    return tables["table1"]


def save_tables(results: pd.DataFrame, curves: pd.DataFrame, scale: str) -> tuple[dict[str, pd.DataFrame], dict]:
    """Table 1 and 5 as CSV, Fig. 2, 3, 4, 6 and the training curves as PNG + CSV, under
    ``figures/`` (suffix ``_<scale>`` beyond tiny); returns every table and figure (closed: a
    notebook shows each where it discusses it) by name."""
    suffix = figure_suffix(scale)
    tables = {"table1": ex.table1(results), "table5": ex.table5(results), "significance": ex.significance(results),
              "ood drop": ex.ood_drop(results), "iterations": ex.iterations(results),
              "informative": ex.informative_vs_noisy(results), "ablation": ex.ablation(results),
              "transitions": ex.transitions(results), "curves": curves}
    save_table(tables["table5"], f"alignrag_table5{suffix}")
    drawn = {"table1": figures.plot_table1(tables["table1"], scale, name=f"alignrag_table1{suffix}"),
             "fig2": figures.plot_ood_drop(tables["ood drop"], scale, name=f"alignrag_fig2_ood{suffix}"),
             "fig3": figures.plot_iterations(tables["iterations"], scale, name=f"alignrag_fig3_iterations{suffix}"),
             "fig4": figures.plot_informative(tables["informative"], scale, name=f"alignrag_fig4_informative{suffix}"),
             "fig6": figures.plot_ablation(tables["ablation"], scale, name=f"alignrag_fig6_ablation{suffix}"),
             "training": figures.plot_training_curves(curves, scale, name=f"alignrag_training{suffix}")}
    for fig in drawn.values():
        plt.close(fig)
    return tables, drawn
