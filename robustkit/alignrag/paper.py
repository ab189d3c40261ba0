"""AlignRAG's published numbers (Wei et al., 2025, arXiv:2504.14858), drawn beside the kit's and
labelled as the paper's.

Only the numbers the kit has, all with Qwen2.5-7B-Instruct as the generator: Table 1's average
accuracy over the paper's benchmarks, and Fig. 2's out-of-domain drop. The paper's benchmarks,
retriever and 8B critic are not the kit's mini datasets and small critic: compare directions,
not levels. The kit has no paper numbers for Table 5 (CFT vs CPO), Fig. 3, 4 or 6, so none are
drawn there.
"""
from __future__ import annotations

import pandas as pd

GENERATOR = "Qwen2.5-7B-Instruct"
# the paper's method names → the kit's (the paper's AlignRAG critic is the fine-tuned one, CFT)
METHOD_NAMES = {"Vanilla RAG": "dense", "Self-Refine": "self-refine", "AlignRAG": "alignrag"}

# Table 1: accuracy (%) averaged over the paper's benchmarks
TABLE1 = pd.DataFrame([
    (f"average (paper, {GENERATOR})", "Vanilla RAG", 56.9),
    (f"average (paper, {GENERATOR})", "Self-Refine", 58.3),
    (f"average (paper, {GENERATOR})", "AlignRAG", 62.1)],
    columns=["dataset", "paper method", "accuracy"]).assign(
        method=lambda t: t["paper method"].map(METHOD_NAMES), source="paper")

# Fig. 2: the drop from in-domain to out-of-domain performance. As printed in the kit's design
# notes; the units are points of the paper's figure (read off it, not from a table), so they sit
# beside the kit's in − out accuracy drop as a direction to compare, not a level to match.
OOD_DROP = pd.DataFrame([("Vanilla RAG", 43.1), ("Self-Refine", 40.3), ("AlignRAG", 32.2)],
                        columns=["paper method", "drop"]).assign(
    method=lambda t: t["paper method"].map(METHOD_NAMES), source="paper")
