"""CoRM-RAG's published numbers (Biased-NQ), drawn beside the kit's in every figure.

Only numbers printed in the paper; each figure labels them as the paper's.
"""
from __future__ import annotations

import pandas as pd

# Table 1: biased accuracy (%) per method; the paper reports no clean accuracy column. ``key`` is
# the kit's counterpart (None: a system the kit does not run).
TABLE1 = pd.DataFrame([
    ("BM25", "bm25", 28.0), ("Contriever (dense)", "dense", 39.5),
    ("Cross-encoder", "relevance-ce", 40.9), ("PA-CE", "pa-ce", 48.0),
    ("LLM-rerank", "llm-rerank", 51.0), ("Self-RAG", None, 46.5), ("CalibRAG", None, 48.0),
    ("CoRM-RAG", "corm", 52.6)],
    columns=["method", "key", "biased accuracy"]).assign(source="paper")
ROBUSTNESS_GAP = 1.3  # CoRM-RAG, points
# Fig. 3: selective accuracy at (coverage, accuracy); forced generation at full coverage.
RISK_COVERAGE = [(0.8, 0.620), (0.5, 0.780)]
FULL_COVERAGE = 0.526
# Fig. 4: Recall@k of gold, relevance CE vs the critic; paired first-gold ranks.
RECALL = {"relevance-ce": {1: 0.365, 5: 0.668}, "corm": {1: 0.483, 5: 0.778}}
PAIRED = {"critic better": 0.457, "CE better": 0.271, "tie": 0.272}
# Fig. 5: type-specific accuracy when that type is dropped from training (all types → dropped).
ABLATION = {"false_premise": (50.2, 45.4), "confirmation_bias": (53.5, 45.2)}
# Fig. 6: gains flatten beyond K = 5; τ = 1 best (0.1 and 3.0 worse); M 10 → 100 adds this much.
SENSITIVITY_M_GAIN = 8.7
# Fig. 7: reranking latency per query (ms).
LATENCY_MS = {"corm": 215, "llm-rerank": 20000}
