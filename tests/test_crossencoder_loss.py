import math

import pytest
import torch

from robustkit.crossencoder.loss import HybridListwiseLoss, make_loss

ALL = torch.ones(1, 3, dtype=torch.bool)


def _hand(z, s, tau):
    """The formula written out for one group."""
    total = sum(s)
    log_z = math.log(sum(math.exp(v / tau) for v in z))
    listwise = -sum((si / total) * (zi / tau - log_z) for zi, si in zip(z, s)) if total else 0.0
    sig = [1 / (1 + math.exp(-v)) for v in z]
    bce = -sum(si * math.log(p) + (1 - si) * math.log(1 - p) for si, p in zip(s, sig)) / len(z)
    return listwise, bce


@pytest.mark.parametrize("tau", [1.0, 0.1, 3.0])
def test_hybrid_loss_matches_hand_computation(tau):
    z, s = [2.0, 0.0, -1.0], [1.0, 0.5, 0.0]
    listwise, bce = _hand(z, s, tau)
    got = HybridListwiseLoss(tau)(torch.tensor([z]), torch.tensor([s]), ALL)
    assert float(got) == pytest.approx(listwise + bce, rel=1e-5)


def test_docstring_example_value():
    got = HybridListwiseLoss()(torch.tensor([[2.0, 0.0, -1.0]]), torch.tensor([[1.0, 0.0, 0.0]]), ALL)
    assert float(got) == pytest.approx(0.1698 + 0.3779, abs=1e-3)


def test_zero_sum_group_is_masked_from_listwise_term():
    z = torch.tensor([[2.0, 0.0, -1.0], [0.5, 0.1, 0.3]])
    s = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    mask = torch.ones_like(s, dtype=torch.bool)
    listwise_only = make_loss("listwise")(z, s, mask)
    assert float(listwise_only) == pytest.approx(_hand([2.0, 0.0, -1.0], [1, 0, 0], 1.0)[0], rel=1e-5)
    pointwise = make_loss("pointwise")(z, s, mask)
    expected = (_hand([2.0, 0.0, -1.0], [1, 0, 0], 1)[1] + _hand([0.5, 0.1, 0.3], [0, 0, 0], 1)[1]) / 2
    assert float(pointwise) == pytest.approx(expected, rel=1e-5)


def test_padding_is_ignored():
    z = torch.tensor([[2.0, 0.0, 99.0]])
    s = torch.tensor([[1.0, 0.0, 1.0]])
    mask = torch.tensor([[True, True, False]])
    listwise, bce = _hand([2.0, 0.0], [1.0, 0.0], 1.0)
    assert float(HybridListwiseLoss()(z, s, mask)) == pytest.approx(listwise + bce, rel=1e-5)


def test_empty_batch_is_zero_and_bad_arguments_rejected():
    empty = torch.zeros(0, 3)
    assert float(HybridListwiseLoss()(empty, empty, empty.bool())) == 0.0
    with pytest.raises(ValueError, match="tau must be > 0"):
        HybridListwiseLoss(tau=0)
    with pytest.raises(ValueError, match="same shape"):
        HybridListwiseLoss()(torch.zeros(1, 3), torch.zeros(1, 2), torch.ones(1, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="unknown loss"):
        make_loss("contrastive")
