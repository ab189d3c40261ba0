"""The kit's two levers for a CPU-sized critic: the relevance warm start and the retrieval prior."""
import numpy as np
import pytest

from robustkit.corm.method import PriorReranker, choose_lambda, interpolate


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


def test_without_the_warm_start_every_critic_starts_from_the_bare_bi_encoder(monkeypatch, tmp_path):
    from robustkit.corm import settings, train
    from robustkit.models import resolve_model

    monkeypatch.setenv("ROBUSTKIT_RUNS", str(tmp_path))
    init = resolve_model("critic_init", "tiny", verbose=False)
    assert train.critic_start(settings("tiny", warm_start=False)) == (init.path, init.name, init.name)
    assert not any(tmp_path.iterdir())  # nothing trained


@pytest.mark.parametrize("scale", ["tiny", "small", "colab", "paper"])
def test_corm_warm_start_is_the_scales_relevance_model_at_its_defaults(scale):
    """One model, two uses: at CoRM's defaults the warm start is the relevance cross-encoder CRAG
    grades retrieval with (same recipe, hence the same artifact); a changed knob is its own."""
    from robustkit.corm import settings, warm_start_recipe
    from robustkit.crossencoder.relevance import recipe

    assert warm_start_recipe(settings(scale)) == recipe(scale)
    changed = warm_start_recipe(settings(scale, warm_start_epochs=5))
    assert changed.epochs == 5 and changed.slug != recipe(scale).slug
