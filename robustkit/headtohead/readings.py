"""What a head-to-head run shows, as sentences computed from its tables (``headtohead.experiments``) — printed by
notebook 08 and ``python -m robustkit run headtohead``; no number in them is typed in by hand.
"""
from __future__ import annotations

import pandas as pd

from robustkit.headtohead.pipeline import LABELS, REFERENCE
from robustkit.metrics import extreme_names, format_p


def findings(table: pd.DataFrame, drops: pd.DataFrame, tests: pd.DataFrame) -> str:
    """The run's headline numbers as sentences: the most accurate method, the reference, the
    largest and smallest drop under bias, and which paired tests clear 0.05 before and after
    Bonferroni — with n, so a reader sees how little a small run can separate. The reference is
    the one ``tests`` name (``significance``'s, dense RAG unless another was chosen)."""
    first = table.iloc[0]
    top = table[table["accuracy"] == table["accuracy"].max()]
    reference = tests["reference"].iloc[0] if len(tests) else REFERENCE
    ref = table.set_index("method").loc[reference]
    overall = drops[drops["type"] == "all"].set_index("method")
    largest, lowest = overall["drop"].max(), overall["drop"].min()
    level = 0.05 / max(len(tests), 1)
    raw, corrected = tests[tests["p"] < 0.05], tests[tests["p"] < level]
    lines = [f"{int(first['questions'])} questions, {int(first['queries'])} queries per method "
             f"(clean and biased); accuracies pool both, 95% CIs resample questions.",
             f"Most accurate{f' ({len(top)} tied)' if len(top) > 1 else ''}: "
             + ", ".join(f"{r['label']} {r['accuracy']:.1f}% (CI {r['CI low']:.1f}–{r['CI high']:.1f})"
                         for _, r in top.iterrows())
             + f"; the reference {LABELS.get(reference, reference)}: {ref['accuracy']:.1f}% "
             f"(CI {ref['CI low']:.1f}–{ref['CI high']:.1f}).",
             f"Largest drop from clean to biased: {extreme_names(overall['drop'], 'max', LABELS)}, "
             f"{largest:+.1f} points; "
             f"smallest: {extreme_names(overall['drop'], 'min', LABELS)}, {lowest:+.1f} points"
             + (" (negative: more accurate on its biased queries than on the clean ones)." if lowest < 0 else "."),
             f"Paired tests against {LABELS.get(reference, reference)}: {len(tests)} comparisons (exact McNemar per "
             f"condition); {len(raw)} below 0.05 uncorrected, {len(corrected)} below the Bonferroni level "
             f"{level:.2g}."]
    for _, row in raw.iterrows():
        better = "better" if row["only method right"] > row["only reference right"] else "worse"
        lines.append(f"  {LABELS.get(row['method'], row['method'])} is {better} than the reference on {row['type']} "
                     f"queries (p {format_p(row['p'], relation=True)}, n = {row['n']}).")
    return "\n".join(lines)
