"""The kit's two levers for a CPU-sized critic: the relevance warm start and the retrieval prior."""
import numpy as np
import pytest

from robustkit.corm.groups import warm_start_groups
from robustkit.corm.prior import PriorReranker, choose_lambda, interpolate

TEXTS = {"g": "Paris is the capital of France.", "h": "The capital is Paris, said the guide.",
         "n1": "Lyon is a city.", "n2": "Berlin is in Germany.", "n3": "Rome is old."}
QUESTION = {"id": "q1", "text": "capital of France?", "answers": ["Paris"]}


def test_warm_start_groups_take_the_best_ranked_gold_passage_and_only_answerless_negatives():
    groups, stats = warm_start_groups([QUESTION], [["n1", "h", "g", "n2", "n3"]], TEXTS,
                                      n_negatives=2, seed=0)
    (group,) = groups
    assert group["query"] == "capital of France?" and group["type"] == "clean"
    positive = [d for d, y in zip(group["doc_ids"], group["labels"]) if y == 1.0]
    assert positive == ["h"]  # the better-ranked of the two gold-bearing candidates
    negatives = set(group["doc_ids"]) - {"h"}
    assert len(negatives) == 2 and negatives <= {"n1", "n2", "n3"}  # never the other gold one
    assert group["docs"] == [TEXTS[d] for d in group["doc_ids"]]
    assert stats == {"questions": 1, "skipped (no gold candidate)": 0, "skipped (no negative)": 0}


def test_warm_start_groups_shuffle_the_positive_and_count_skips():
    questions = [dict(QUESTION, id=f"q{i}") for i in range(40)]
    groups, _ = warm_start_groups(questions, [["g", "n1", "n2", "n3"]] * 40, TEXTS, n_negatives=3)
    positions = {g["labels"].index(1.0) for g in groups}
    assert len(positions) > 1, "the positive always sits at one position: a tie would leak the label"
    no_gold = dict(QUESTION, id="q-none", answers=["Madrid"])
    _, stats = warm_start_groups([QUESTION, no_gold, dict(QUESTION, id="q-only")],
                                 [["g", "n1"], ["g", "n1"], ["g", "h"]], TEXTS, n_negatives=1)
    assert stats["skipped (no gold candidate)"] == 1 and stats["skipped (no negative)"] == 1
    with pytest.raises(ValueError, match="no warm-start group"):
        warm_start_groups([no_gold], [["g", "n1"]], TEXTS, n_negatives=1)
    with pytest.raises(ValueError, match="2 candidate lists"):
        warm_start_groups([QUESTION], [["g"], ["g"]], TEXTS, n_negatives=1)
    with pytest.raises(ValueError, match="N"):
        warm_start_groups([QUESTION], [["g"]], TEXTS, n_negatives=0)


def test_interpolation_ends_are_the_critic_and_the_first_stage():
    critic, dense = np.array([0.9, 0.2, 0.5]), np.array([0.1, 0.8, 0.3])
    assert list(np.argsort(-interpolate(critic, dense, 0.0))) == [0, 2, 1]
    assert list(np.argsort(-interpolate(critic, dense, 1.0))) == [1, 2, 0]
    # constant inputs carry no order and must not divide by zero
    assert np.all(np.isfinite(interpolate(np.full(3, 0.5), np.full(3, 0.3), 0.5)))


def test_lambda_follows_whichever_score_finds_the_relevant_passage():
    critic = [np.array([0.9, 0.5, 0.5])] * 4
    dense = [np.array([0.1, 0.9, 0.5])] * 4  # at equal weights the dense favourite wins
    lam, rows = choose_lambda(critic, dense, [[True, False, False]] * 4)
    assert lam == 0.4 and rows[0]["mrr"] == 1.0 and rows[-1]["mrr"] == pytest.approx(1 / 3)
    lam, rows = choose_lambda(critic, dense, [[False, True, False]] * 4)
    assert lam == 0.5 and rows[0]["mrr"] == pytest.approx((1 / 2 + 1 / 3) / 2) and rows[-1]["mrr"] == 1.0
    # both put it first: every λ ties, and the tie goes to equal weights
    lam, rows = choose_lambda(critic, [np.array([0.9, 0.1, 0.2])] * 4, [[True, False, False]] * 4)
    assert lam == 0.5 and len(rows) == 11 and all(r["n"] == 4 for r in rows)
    with pytest.raises(ValueError, match="no query with a relevant candidate"):
        choose_lambda(critic, dense, [[False] * 3] * 4)


def test_prior_reranker_refuses_a_weight_outside_0_1():
    with pytest.raises(ValueError, match="prior weight"):
        PriorReranker("corm-prior", scorer=None, lam=1.5)


@pytest.mark.parametrize("knob, value, message", [("warm_start", 1, "True or False"),
                                                   ("warm_start_m", 1, ">= 2"),
                                                   ("warm_start_questions", -1, "warm_start_questions"),
                                                   ("warm_start_epochs", 0, "warm_start_epochs")])
def test_warm_start_knobs_are_checked(knob, value, message):
    from robustkit.corm import settings

    with pytest.raises(ValueError, match=message):
        settings("tiny", **{knob: value})


def test_training_from_a_saved_critic_starts_from_its_head(tmp_path):
    """A variant trained from the warm start keeps the warm start's head, not a fresh one."""
    import torch

    from robustkit.config import resolve_model
    from robustkit.corm.critic import EvidenceCritic
    from robustkit.corm.train import train

    init = resolve_model("critic_init", "tiny")
    start = EvidenceCritic(init.path, base_model=init.name)
    with torch.no_grad():
        start.head.bias.fill_(3.0)
    start.save(tmp_path / "start")
    group = {"query": "capital of France?", "docs": [TEXTS["g"], TEXTS["n1"]], "labels": [1.0, 0.0]}
    train([group] * 2, [group], init=str(tmp_path / "start"), out_dir=tmp_path / "run",
          epochs=1, lr=1e-9, batch_groups=2, max_length=32, progress=False)
    trained = EvidenceCritic.load(tmp_path / "run" / "model")
    assert trained.config["base_model"] == init.name
    assert abs(trained.head.bias.item() - 3.0) < 1e-3


def test_without_the_warm_start_every_critic_starts_from_the_bare_bi_encoder(monkeypatch, tmp_path):
    from robustkit.config import resolve_model
    from robustkit.corm import pipeline, settings

    monkeypatch.setenv("ROBUSTKIT_RUNS", str(tmp_path))
    init = resolve_model("critic_init", "tiny", verbose=False)
    assert pipeline.critic_start(settings("tiny", warm_start=False)) == (init.path, init.name, init.name)
    assert not any(tmp_path.iterdir())  # nothing trained
