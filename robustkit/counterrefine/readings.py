"""What a CounterRefine run shows, as sentences computed from its tables (``counterrefine.experiments``) — printed by
notebook 06 and ``python -m robustkit run counterrefine``; no number in them is typed in by hand.
"""
from __future__ import annotations

import pandas as pd

from robustkit.counterrefine.experiments import REFERENCE, helped_vs_harmed, table3
from robustkit.counterrefine.pipeline import BASELINE


def findings(results: pd.DataFrame) -> str:
    """What this run shows, in sentences computed from its tables (nothing typed in by hand)."""
    t3 = table3(results).query("source == 'kit'").set_index(["dataset", "method"])
    hh = helped_vs_harmed(results).set_index("dataset")
    lines = []
    for dataset in results["dataset"].unique():
        b, c, h = t3.loc[(dataset, BASELINE)], t3.loc[(dataset, REFERENCE)], hh.loc[dataset]
        lines.append(f"{dataset} (n = {int(c['n'])}): correct {b['correct']:.1f}% → {c['correct']:.1f}% "
                     f"(F1 {b['f1']:.1f} → {c['f1']:.1f}); {int(h['changed'])} outputs changed "
                     f"({h['changed %']:.1f}%), {int(h['fixed'])} fixed vs {int(h['harmed'])} harmed, "
                     f"exact McNemar p {h['p (exact McNemar)']}.")
    return "\n".join(lines)
