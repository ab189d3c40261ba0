"""``python -m robustkit run fva``: FVA-RAG and its baselines on every evaluated question × cache
A and B — Table 2 and 3, McNemar, adjudicator agreement — printed and drawn into ``figures/``."""
from __future__ import annotations

import time

import pandas as pd

from robustkit.fva import experiments as ex
from robustkit.fva import figures
from robustkit.fva.config import FVAConfig, settings
from robustkit.fva.pipeline import adjudicator, describe, run, run_dir, run_log


def main(cfg: FVAConfig | str | None = None) -> pd.DataFrame:
    """Run (reusing a finished artifact), print the tables, draw Table 2; returns Table 2."""
    start = time.perf_counter()
    cfg = settings(cfg)
    judge = adjudicator(cfg)
    print(f"[robustkit] FVA-RAG at scale {cfg.scale.name!r} (artifacts in {run_dir(cfg)}):")
    with pd.option_context("display.width", 160, "display.max_columns", 20, "display.max_colwidth", 60):
        print(describe(cfg).to_string(index=False))
        log = run_log(cfg, judge)
        print({k: v for k, v in log.items() if k != "datasets"}, flush=True)
        results = run(cfg, judge=judge)
        table = ex.table2(results)
        tests = ex.significance(results)
        print(table.drop(columns=["CI low", "CI high"]).to_string(index=False))
        print(tests.drop(columns=["p"]).to_string(index=False))
        print(ex.table3(results).to_string(index=False))
        print(ex.adjudicator_agreement(results, cfg.tau).to_string(index=False))
        print(ex.cost(results).to_string(index=False))
    print(ex.findings(table, tests))
    suffix = "" if cfg.scale.name == "tiny" else f"_{cfg.scale.name}"
    figures.plot_table2(table, scale=cfg.scale.name, name=f"fva_table2{suffix}")
    print(f"[robustkit] done in {(time.perf_counter() - start) / 60:.1f} min (figures/fva_table2{suffix}.png)")
    return table
