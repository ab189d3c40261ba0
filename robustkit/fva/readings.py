"""What an FVA-RAG run shows, as sentences computed from its tables (``fva.experiments``) — printed by
notebook 05 and ``python -m robustkit run fva``; no number in them is typed in by hand.
"""
from __future__ import annotations

import pandas as pd

from robustkit.metrics import format_p


def findings(table: pd.DataFrame, tests: pd.DataFrame) -> str:
    """What this run shows, in sentences computed from its tables (nothing typed in by hand)."""
    kit = table[table["source"] == "kit"].set_index(["dataset", "cache", "method"])
    lines = []
    for (dataset, cache), part in tests.groupby(["dataset", "cache"], sort=False):
        fva, vanilla = kit.loc[(dataset, cache, "fva-rag")], kit.loc[(dataset, cache, "dense")]
        best = part.sort_values("p").iloc[0]
        significant = part[part["p"] < 0.05]
        lines.append(
            f"{dataset}, cache {cache} (n = {int(fva['n'])}): FVA-RAG falsified "
            f"{fva['intervention rate']:.1f}% of drafts; true answers {fva['accuracy']:.1f}% vs vanilla "
            f"{vanilla['accuracy']:.1f}%. Paired McNemar, {len(part)} comparisons here ({len(tests)} in all): "
            + (f"{len(significant)} below p = 0.05" if len(significant) else "none below p = 0.05")
            + f" (smallest p {format_p(best['p'])}, against {best['method']}: "
            f"{_count(best['only reference right'], 'question')} only FVA-RAG got right, "
            f"{int(best['only method right'])} only {best['method']}).")
    return "\n".join(lines)


def _count(n, noun: str) -> str:
    return f"{int(n)} {noun}{'' if int(n) == 1 else 's'}"
