"""``python -m robustkit run corm``: CoRM-RAG end to end at a scale — perturb, label, distil the
critics, evaluate (Table 1, Fig. 3, Fig. 4) — printed, and drawn into ``figures/``.

The evaluation on the test questions waits for every upstream stage, which ``run_methods``
builds (or reuses) on demand.
"""
from __future__ import annotations

import time

import pandas as pd

from robustkit.corm import experiments as ex
from robustkit.corm import figures
from robustkit.corm import readings
from robustkit.corm.config import CormConfig, settings
from robustkit.corm import pipeline
from robustkit.corm.data import run_dir, train_questions
from robustkit.corm.train import CRITIC_VARIANTS
from robustkit.device import cpu_info
from robustkit.metrics import format_p
from robustkit.plots import figure_suffix
from robustkit.run_times import MEASURED



def main(cfg: CormConfig | str | None = None, *, llm_rerank: bool = True) -> pd.DataFrame:
    """Run every stage (reusing finished artifacts), print the tables and draw the figures;
    returns Table 1."""
    start = time.perf_counter()
    cfg = settings(cfg)
    names = [n for n in ex.METHOD_LABELS if llm_rerank or n != "llm-rerank"]
    queries = pipeline.test_queries(cfg)
    measured = MEASURED.get((f"run corm{'' if llm_rerank else ' --no-llm-rerank'}", cfg.scale.name, "CPU"))
    print(f"[robustkit] CoRM-RAG at scale {cfg.scale.name!r} (artifacts in {run_dir(cfg)}):\n"
          f"  perturb {len(train_questions(cfg))} training questions (K={cfg.k_perturbations}), label "
          f"their candidates (M={cfg.m_candidates}) with the teacher, train the warm start and "
          f"{sum(n in CRITIC_VARIANTS for n in names)} critics, then answer "
          f"{len(queries)} test queries with {len(names)} methods (M={cfg.m_inference}, "
          f"C={cfg.context_size}){'' if llm_rerank else '; LLM-rerank left out'}.\n  "
          + (f"About {measured[0] / 60:.0f} min measured on {measured[1]} (this CPU: {cpu_info()['model']}, "
             f"{cpu_info()['isa']}); finished stages are reused." if measured else "Finished stages are reused."),
          flush=True)
    results = pipeline.run_methods(cfg, names, queries)  # staged per method under runs/<scale>/corm/results/
    table = ex.table1(results, pipeline.rerank_latency(cfg, names, list(queries["query"][:4])))
    curves, coverage = ex.risk_coverage_table(results)
    recall = ex.recall_table(results)
    pairs, shares = ex.paired_ranks(results)
    tests = ex.significance(results)
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(table.drop(columns=["key", "source"]).to_string(index=False))
        print(tests.assign(p=tests["p"].map(format_p)).to_string(index=False))
        print(coverage.to_string(index=False))
        print(recall[recall["k"].isin([1, 3, 5, 10, 20, 50, 100])].pivot(
            index="k", columns="method", values="recall").round(3))
    print(readings.findings(table, tests, coverage, shares))
    suffix = figure_suffix(cfg.scale.name)
    figures.plot_table1(table, scale=cfg.scale.name, name=f"corm_table1{suffix}")
    figures.plot_risk_coverage(curves, coverage, scale=cfg.scale.name,
                               name=f"corm_fig3_risk_coverage{suffix}")
    figures.plot_recall_and_ranks(recall, pairs, shares, scale=cfg.scale.name,
                                  name=f"corm_fig4_recall_ranks{suffix}")
    print(f"[robustkit] done in {(time.perf_counter() - start) / 60:.1f} min "
          f"(figures/corm_*{suffix}.png)")
    return table
