"""The wall times the kit measured, as the results page records them: ``figures/run_times.csv`` in a
checkout, a copy inside an installed package (pyproject's force-include).

    MEASURED[("notebook 04", "tiny", "CPU")]   # -> (seconds, where and how it was measured)

``rk.start`` prints a notebook's measured time where there is one (``timings``), and a method's
``python -m robustkit run`` its command's.
"""
from __future__ import annotations

import csv

from robustkit.paths import CHECKOUT, PACKAGE_DIR


def measured_times() -> dict[tuple[str, str, str], tuple[float, str]]:
    """(what, scale, device kind) -> (seconds, where and how), ``what`` a notebook ("notebook 04")
    or a command ("run corm --no-llm-rerank")."""
    path = CHECKOUT / "figures" / "run_times.csv" if CHECKOUT else PACKAGE_DIR / "_data" / "run_times.csv"
    with open(path, newline="", encoding="utf-8") as handle:
        return {(row["what"], row["scale"], row["device"]): (float(row["seconds"]), row["measured_on"])
                for row in csv.DictReader(handle)}


MEASURED = measured_times()
