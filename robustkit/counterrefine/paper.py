"""CounterRefine's published numbers, drawn beside the kit's (labelled as the paper's).

Only numbers printed in the paper: SimpleQA (4,326 questions, live web search) with two frontier
generators, and its outcome transitions. The kit cannot reproduce SimpleQA offline (no evidence
for its questions), so these sit beside the kit's own datasets: compare shapes, not levels.
"""
from __future__ import annotations

import pandas as pd

# Table 3: correct (%) of Baseline-RAG and CounterRefine on SimpleQA, per generator
TABLE3 = pd.DataFrame([
    ("simpleqa (paper, Claude)", "dense", 63.7), ("simpleqa (paper, Claude)", "counterrefine", 67.7),
    ("simpleqa (paper, GPT-5)", "dense", 67.3), ("simpleqa (paper, GPT-5)", "counterrefine", 73.1)],
    columns=["dataset", "method", "correct"]).assign(f1=None, n=4326, source="paper")
# Fig. 3: outcome transitions from the draft to CounterRefine's answer (%), and outputs changed
TRANSITIONS = {"stay correct": 63.5, "stay wrong": 32.1, "fixed": 4.2, "harmed": 0.2}
CHANGED = 5.6
