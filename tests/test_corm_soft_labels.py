"""The soft utility s_soft beside the paper's 0/1 label: likelihood records, groups, separation."""
import math

import pytest

from robustkit.corm.groups import build_groups, soft_groups
from robustkit.corm.teacher import answer_likelihoods
from robustkit.data.records import DataError, Passage, Question

CORPUS = {"g": Passage("g", "", "Paris is the capital of France."), "n": Passage("n", "", "Lyon is a city.")}
QUESTION = Question("q1", "capital of France?", ("Paris",), gold_ids=("g",))
PERTURBATIONS = [{"question_id": "q1", "k": k, "type": "false_premise", "text": f"rewrite {k}?"}
                 for k in (1, 0)]  # out of order: answer_likelihoods sorts by k


class TeacherForcing:
    """Records what it is asked and answers log P = −(prompt index + 1)·ln 2, so each record's
    likelihoods can be traced back to the (candidate, k) prompt that produced them."""

    def __init__(self):
        self.asked = []

    def continuation_logprobs(self, prompts, continuations, **_):
        self.asked += list(zip(prompts, continuations))
        return [-(i + 1) * math.log(2) for i in range(len(prompts))]


def _label(doc: str, clean: bool, perturbed_k: list[int], outcomes: list[int]) -> dict:
    return {"key": f"q1|{doc}", "question_id": "q1", "doc_id": doc, "in_clean_pool": clean,
            "perturbed_k": perturbed_k, "outcomes": outcomes, "s": sum(outcomes) / len(outcomes)}


def test_answer_likelihoods_ask_for_the_gold_answer_per_candidate_and_rewrite_in_order():
    labels = [_label("g", True, [0], [0, 0]), _label("n", False, [0, 1], [0, 0])]
    teacher = TeacherForcing()
    records = answer_likelihoods(labels, [QUESTION], PERTURBATIONS, CORPUS, teacher, progress=False)
    # candidate g with rewrites 0 and 1, then n with 0 and 1; the gold alias is the whole reply
    assert [c for _, c in teacher.asked] == ["Paris"] * 4
    assert [p.split("\n\n")[0] for p, _ in teacher.asked] == [CORPUS["g"].content] * 2 + [CORPUS["n"].content] * 2
    assert [p.endswith(f"rewrite {k}?") for (p, _), k in zip(teacher.asked, [0, 1, 0, 1])] == [True] * 4
    assert [r["key"] for r in records] == ["q1|g", "q1|n"]
    assert records[0]["likelihoods"] == pytest.approx([1 / 2, 1 / 4])
    assert records[1]["s_soft"] == pytest.approx((1 / 8 + 1 / 16) / 2)
    with pytest.raises(DataError, match="not among the questions"):
        answer_likelihoods([dict(labels[0], question_id="q9")], [QUESTION], PERTURBATIONS, CORPUS,
                           teacher, progress=False)


def test_soft_groups_keep_the_slots_the_01_label_skips():
    labels = [_label("g", True, [0], [0, 0]), _label("h", True, [], [0, 0]),
              _label("n", False, [0, 1], [0, 0]), _label("m", False, [1], [0, 0])]
    soft = [{"key": k, "s_soft": v} for k, v in (("q1|g", 0.6), ("q1|h", 0.3), ("q1|n", 0.01), ("q1|m", 0.7))]
    texts = {d: d.upper() for d in "ghnm"}
    hard, hard_stats = build_groups(labels, PERTURBATIONS, texts, n_negatives=2)
    assert hard == [] and hard_stats["skipped (no positive)"] == 2  # every outcome 0: no positive
    groups, stats = soft_groups(labels, soft, PERTURBATIONS, texts, n_negatives=2)
    by_k = {g["k"]: g for g in groups}
    # the clean pool's best (g, 0.6) is the positive; negatives: x̃ₖ's pool with a lower s_soft
    assert by_k[0]["doc_ids"] == ["g", "n"] and by_k[0]["labels"] == [0.6, 0.01]
    assert by_k[1]["doc_ids"] == ["g", "n"]  # m (0.7) is above the positive: not a negative
    assert by_k[1]["docs"] == ["G", "N"]
    assert stats == {"slots": 2, "skipped (no negative)": 0, "short of N negatives": 2}
    with pytest.raises(ValueError, match="has no soft label"):
        soft_groups(labels, soft[:3], PERTURBATIONS, texts, n_negatives=2)


def test_label_separation_counts_auc_and_gold_first(monkeypatch):
    from robustkit.corm import kinds

    monkeypatch.setattr(kinds, "passage_kinds", lambda cfg: lambda q, d: "gold" if d == "g" else "distractor")
    labels = [_label("g", True, [0], [0, 0]), _label("n", False, [0], [0, 0]),
              _label("m", False, [0], [1, 0])]
    soft = [{"key": "q1|g", "s_soft": 0.5}, {"key": "q1|n", "s_soft": 0.5}, {"key": "q1|m", "s_soft": 0.1}]
    table = kinds.label_separation(None, labels, soft)
    # s: gold 0 vs others {0, 0.5} → U = 0.5 (a tie) of 2 pairs; s_soft: 0.5 vs {0.5, 0.1} → 1.5 of 2
    assert table.loc["s", "AUC gold vs other"] == pytest.approx(0.25)
    assert table.loc["s_soft", "AUC gold vs other"] == pytest.approx(0.75)
    # first by s is m (not gold); by s_soft g and n tie: half a question
    assert table["gold ranked first (questions)"].tolist() == [0.0, 0.5]
    assert table["questions with a positive"].tolist() == [1, 1]
