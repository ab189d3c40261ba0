"""``python -m robustkit run fva``: FVA-RAG and its baselines on every evaluated question × cache
A and B — Table 2 and 3, McNemar, adjudicator agreement, cost — printed; Table 2 and accuracy at
every τ drawn (``fva_tau``: each kept draft's revision written once, so the curve is exact); every
table written into ``figures/`` (``fva_table2``, ``fva_table3``, ``fva_mcnemar``,
``fva_adjudicators``, ``fva_cost``, ``fva_diagnostics``, with a ``_<scale>`` suffix above tiny)."""
from __future__ import annotations

import time

import pandas as pd

from robustkit.fva import experiments as ex
from robustkit.fva import figures
from robustkit.fva import readings
from robustkit.fva.config import FVAConfig, settings
from robustkit.fva.data import describe, run_dir
from robustkit.fva.pipeline import revisions_at_any_tau, run, run_log
from robustkit.fva.train import adjudicator, crag_evaluator
from robustkit.plots import figure_suffix, save_table


def main(cfg: FVAConfig | str | None = None) -> pd.DataFrame:
    """Run (reusing a finished artifact), print the tables, draw Table 2; returns Table 2."""
    start = time.perf_counter()
    cfg = settings(cfg)
    judge = adjudicator(cfg)  # what the run needs trained, before the run log reads it
    crag_evaluator(cfg)
    print(f"[robustkit] FVA-RAG at scale {cfg.scale.name!r} (artifacts in {run_dir(cfg)}):")
    with pd.option_context("display.width", 160, "display.max_columns", 20, "display.max_colwidth", 60):
        print(describe(cfg).to_string(index=False))
        log = run_log(cfg, judge)
        print({k: v for k, v in log.items() if k != "datasets"}, flush=True)
        results = run(cfg, judge=judge)
        table = ex.table2(results)
        tests = ex.significance(results)
        tables = {"table3": ex.table3(results), "mcnemar": tests,
                  "adjudicators": ex.adjudicator_agreement(results, cfg.tau), "cost": ex.cost(results)}
        print(table.drop(columns=["CI low", "CI high"]).to_string(index=False))
        for frame in tables.values():
            print(frame.to_string(index=False))
    print(readings.findings(table, tests))
    suffix = figure_suffix(cfg.scale.name)
    figures.plot_table2(table, scale=cfg.scale.name, name=f"fva_table2{suffix}")
    revisions = revisions_at_any_tau(cfg, results, judge=judge)
    curve = ex.tau_sweep(results, revisions)
    tables["diagnostics"] = ex.adjudicator_diagnostics(revisions, cfg.tau)
    print(tables["diagnostics"].to_string(index=False))
    print(curve.pivot_table(index="tau", columns=["dataset", "cache"],
                            values=["intervention rate", "accuracy"]).iloc[::4].round(1).to_string())
    figures.plot_tau_curve(curve, scale=cfg.scale.name, tau=cfg.tau, name=f"fva_tau{suffix}")
    for key, frame in tables.items():
        save_table(frame, f"fva_{key}{suffix}")
    print(f"[robustkit] done in {(time.perf_counter() - start) / 60:.1f} min (figures/fva_table2{suffix}.png, "
          f"fva_tau{suffix}.png "
          f"and fva_{{{','.join(tables)}}}{suffix}.csv)")
    return table
