"""FVA-RAG's published numbers (TruthfulQA generation, 817 questions), drawn beside the kit's.

Only numbers printed in the paper; each figure labels them as the paper's. Accuracy is the
paper's own judged truthfulness, not the kit's deterministic rule: compare shapes, not levels.
"""
from __future__ import annotations

import pandas as pd

# Table 2: accuracy (%) and intervention rate (%) per method and cache (A base, B enriched);
# the paper reports an intervention rate for FVA-RAG only.
TABLE2 = pd.DataFrame([
    ("fva-rag", "A", 79.80, 24.5), ("fva-rag", "B", 80.05, 29.3),
    ("self-rag", "A", 71.11, None), ("self-rag", "B", 72.22, None),
    ("crag", "A", 71.36, None), ("crag", "B", 73.93, None)],
    columns=["method", "cache", "accuracy", "intervention rate"]).assign(source="paper")
TAU = 0.5
