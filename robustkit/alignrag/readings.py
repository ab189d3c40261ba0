"""What an AlignRAG run shows, as sentences computed from its tables (``alignrag.experiments``) — printed by
notebook 07 and ``python -m robustkit run alignrag``; no number in them is typed in by hand.
"""
from __future__ import annotations

import pandas as pd

from robustkit.alignrag import paper
from robustkit.alignrag.experiments import (CONTRASTS, DOMAINS, REFERENCE, check_results, final, iterations,
                                            ood_drop, significance)
from robustkit.metrics import format_p, paired_tests


def findings(results: pd.DataFrame) -> str:
    """What this run shows, in sentences computed from its numbers (nothing typed in by hand)."""
    check_results(results, "domain")
    last, lines = final(results), []
    wide = last.pivot(index=["dataset", "question_id"], columns="method", values="correct")
    datasets = last["dataset"].nunique()
    tests = [(what, a, b) for what, a, b in CONTRASTS if {a, b} <= set(wide.columns)]
    for what, a, b in tests:
        t = paired_tests(last, a, methods=[b], unit=["dataset", "question_id"]).iloc[0]
        pair = wide[[a, b]].dropna()
        diff = 100 * (pair[a].mean() - pair[b].mean())
        verdict = (f"{a} is {'better' if diff > 0 else 'worse'} at the 0.05 level (uncorrected)" if t["p"] < 0.05
                   else "no difference distinguishable from chance at this n")
        lines.append(f"{what.capitalize()}: {a} {100 * pair[a].mean():.1f}% vs {b} {100 * pair[b].mean():.1f}% "
                     f"({diff:+.1f} points; {datasets} dataset(s) pooled, n = {t['n']}; {t['only reference right']} vs "
                     f"{t['only method right']} discordant questions, exact McNemar p {format_p(t['p'], True)}): {verdict}.")
    if tests:
        lines.append(f"That is {len(tests)} pooled tests: Bonferroni at 0.05 asks p < {0.05 / len(tests):.2g} of each; "
                     f"significance() runs {len(significance(results))} per-dataset tests against {REFERENCE}.")
    if set(DOMAINS) <= set(last["domain"]):
        drop = ood_drop(results).query("source == 'kit'").set_index("method")
        kit = "; ".join(f"{m} {r['drop']:.1f} [{r['CI low']:.1f}, {r['CI high']:.1f}]" for m, r in drop.iterrows()
                        if m in paper.OOD_DROP["method"].values)
        theirs = ", ".join(f"{r['paper method']} {r['drop']:.1f}" for _, r in paper.OOD_DROP.iterrows())
        lines.append(f"In-domain − out-of-domain accuracy (points, 95% CI): {kit}. The paper's Fig. 2 (its own units): {theirs}.")
    if REFERENCE in set(results["method"]):
        steps = iterations(results, (REFERENCE,)).assign(right=lambda t: t["accuracy"] * t["n"])
        acc = steps.groupby("iteration")["right"].sum() / steps.groupby("iteration")["n"].sum()
        lines.append(f"{REFERENCE} over critique rounds (datasets pooled): " +
                     " → ".join(f"t={t} {a:.1f}%" for t, a in acc.items()) + ".")
    return "\n".join(lines)
