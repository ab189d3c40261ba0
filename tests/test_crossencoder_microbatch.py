"""Micro-batching a cross-encoder training step (``ROBUSTKIT_MAX_PAIRS``): the same loss and
gradients as the whole batch, on the real MiniLM encoder with dropout off."""
import pytest
import torch

from robustkit.crossencoder.loss import make_loss
from robustkit.crossencoder.model import CrossEncoder, GroupDataset
from robustkit.crossencoder.train import backward_in_parts, micro_batches, pass_budget
from robustkit.device import max_pairs_per_pass
from robustkit.models import resolve_model

QUERIES = ["who wrote the origin of species", "what is the capital of australia", "when did the nile flood"]
PASSAGES = ["Charles Darwin published On the Origin of Species in 1859.",
            "Canberra is the capital city of Australia, chosen in 1908.",
            "The Nile flooded every summer until the Aswan High Dam was built.",
            "Sydney is the largest city in Australia.",
            "Alfred Russel Wallace also proposed natural selection."]


def _batch(model):
    """Groups of 5, 3 and 4 pairs; the last has no positive (out of the listwise mean)."""
    labels = ([1.0, 0.0, 0.0, 0.0, 0.5], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0])
    groups = [{"query": q, "docs": PASSAGES[:len(s)], "labels": list(s)} for q, s in zip(QUERIES, labels)]
    data = GroupDataset(groups, model.tokenizer, 64)
    return data.collate([data[i] for i in range(len(data))])


@pytest.fixture(scope="module")
def encoder():
    torch.manual_seed(0)
    return CrossEncoder(resolve_model("critic_init", "tiny", verbose=False).path, max_length=64).eval()


@pytest.mark.parametrize("loss", ["hybrid", "pointwise", "listwise"])
def test_micro_batches_give_the_whole_batchs_loss_and_gradients(encoder, loss):
    criterion, batch = make_loss(loss), _batch(encoder)

    def run(max_pairs):
        encoder.zero_grad()
        value = backward_in_parts(encoder, criterion, batch, max_pairs, torch.Tensor.backward)
        return float(value.detach()), [p.grad.clone() for p in encoder.parameters() if p.grad is not None]

    whole_loss, whole_grads = run(None)
    assert len(micro_batches(batch, 5)) == 3  # groups of 5, 3 and 4 pairs: one per part
    for max_pairs in (5, 8):
        part_loss, part_grads = run(max_pairs)
        assert part_loss == pytest.approx(whole_loss, rel=1e-5)
        assert len(part_grads) == len(whole_grads)
        for a, b in zip(part_grads, whole_grads):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_micro_batches_keep_whole_groups_and_trim_padding(encoder):
    batch = _batch(encoder)
    parts = micro_batches(batch, 8)
    assert [p["mask"].sum().item() for p in parts] == [8, 4]  # 5 + 3 | 4: consecutive, none split
    for part in parts:
        assert part["input_ids"].shape[0] == part["mask"].sum()
        assert part["attention_mask"][:, -1].any()  # no all-padding column left
    with pytest.raises(ValueError, match="a group of 5 pairs does not fit in ROBUSTKIT_MAX_PAIRS=4"):
        micro_batches(batch, 4)


@pytest.mark.parametrize("value", ["0", "-3", "many", "1.5"])
def test_a_bad_pair_budget_names_the_variable(monkeypatch, value):
    monkeypatch.setenv("ROBUSTKIT_MAX_PAIRS", value)
    with pytest.raises(ValueError, match=f"ROBUSTKIT_MAX_PAIRS={value!r}"):
        max_pairs_per_pass()
    monkeypatch.setenv("ROBUSTKIT_MAX_PAIRS", "64")
    assert max_pairs_per_pass() == 64
    assert pass_budget() == (64, {"max_pairs_per_pass": 64})  # recorded in the manifest when set
    monkeypatch.delenv("ROBUSTKIT_MAX_PAIRS")
    assert pass_budget() == (None, {})  # and absent when not: the default's manifests stay as they were
