"""``python -m robustkit run headtohead``: every method on the same queries — the summary, the
robustness table and the paired tests printed, the cost–accuracy and robustness figures drawn,
every table written into ``figures/`` (``headtohead_summary``, ``headtohead_robustness``,
``headtohead_tests``, ``headtohead_cost``, ``headtohead_sets``, with a ``_<scale>`` suffix above
tiny). The sets each method was built for are read from FVA-RAG's, CounterRefine's and AlignRAG's
own runs (``run fva``, ``run counterrefine``, ``run alignrag``), which run first where not staged."""
from __future__ import annotations

import time

import pandas as pd

from robustkit.headtohead import experiments as ex
from robustkit.headtohead import figures
from robustkit.headtohead import readings
from robustkit.headtohead.config import HeadToHeadConfig, settings
from robustkit.headtohead.pipeline import built_for, run, run_dir
from robustkit.metrics import show_p
from robustkit.plots import figure_suffix, save_table


def main(cfg: HeadToHeadConfig | str | None = None) -> pd.DataFrame:
    """Run (reusing finished methods), print and save the tables, draw the figures; returns the summary."""
    start = time.perf_counter()
    cfg = settings(cfg)
    print(f"[robustkit] head to head at scale {cfg.scale.name!r} (artifacts in {run_dir(cfg)}): {cfg!r}", flush=True)
    results = run(cfg)
    table, drops = ex.summary(results), ex.robustness(results)
    tests = ex.significance(results, reference=cfg.reference)
    with pd.option_context("display.width", 200, "display.max_columns", 30, "display.max_colwidth", 40):
        print(table.drop(columns=["method", "paper"]).to_string(index=False))
        print(drops[drops["type"] == "all"].drop(columns=["method", "type"]).to_string(index=False))
        print(show_p(tests).to_string(index=False))
    print(readings.findings(table, drops, tests))
    print("[robustkit] head to head: each method on the sets it was built for (FVA-RAG's, CounterRefine's and "
          "AlignRAG's own runs: read where staged, run now where not)", flush=True)
    sets = ex.by_set(built_for(cfg), cfg.methods)
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(show_p(sets[sets["not run"].isna()].drop(columns=["method", "not run"])).to_string(index=False))
    suffix = figure_suffix(cfg.scale.name)
    figures.plot_cost_accuracy(table, scale=cfg.scale.name, name=f"headtohead_cost{suffix}")
    figures.plot_drops(drops, scale=cfg.scale.name, name=f"headtohead_robustness{suffix}")
    save_table(table, f"headtohead_summary{suffix}")
    save_table(tests, f"headtohead_tests{suffix}")
    save_table(sets, f"headtohead_sets{suffix}")
    print(f"[robustkit] done in {(time.perf_counter() - start) / 60:.1f} min (figures/headtohead_cost{suffix}.png, "
          f"headtohead_robustness{suffix}.png, headtohead_{{summary,tests,sets}}{suffix}.csv)")
    return table
