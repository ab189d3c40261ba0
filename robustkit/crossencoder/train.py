"""Training the kit's ranking cross-encoder, in the kit's one training loop (``crossencoder.loop``).

AdamW (weight decay 0.01) with a cosine schedule and linear warm-up over listwise groups
(``{query, docs, labels}``: CoRM's teacher groups, ``crossencoder.groups``' alias groups; checked
first, ``check_groups``), a loss from ``crossencoder.loss``, held-out NDCG@3 / MRR each epoch, a
checkpoint per epoch that a rerun resumes from (``loop.fit``). fp32 on a CPU; on a GPU the device's mixed precision (``device.mixed_precision``:
bf16 autocast, or fp16 autocast with Accelerate's gradient scaler on a T4) over fp32 master
weights, a loss that stays non-finite stops with the fix, and a batch runs in as many passes as
the GPU's free memory needs (``pass_budget``). On N processes (GPUs, or a CPU's cores over gloo)
each trains on its share of every step's groups, as one process at N times the batch would
(``crossencoder.processes``):

    torchrun --standalone --nproc_per_node 2 -m robustkit.corm train --groups runs/colab/corm/groups.jsonl --init ... --out ...

This module imports only torch, transformers and accelerate (plus the kit's light modules).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from robustkit.artifacts import write_json
from robustkit.config import check_knob
from robustkit.crossencoder.groups import check_groups
from robustkit.crossencoder.loop import accelerator_for, fit, model_name
from robustkit.crossencoder.loss import make_loss
from robustkit.crossencoder.model import CrossEncoder, GroupDataset, group_logits
from robustkit.crossencoder.processes import announce, gathered, step_share, total, trained_on
from robustkit.data.records import write_jsonl
from robustkit.device import autocast_dtype, max_pairs_per_pass, pick_device
from robustkit.metrics import mrr, ndcg_at_k


def train(groups: Sequence[dict], val_groups: Sequence[dict], *, init: str, out_dir: str | Path,
          model_dir: str | Path | None = None, loss: str = "hybrid", tau: float = 1.0, epochs: int = 3, lr: float = 5e-5,
          batch_groups: int = 32, grad_accum: int = 1, weight_decay: float = 0.01,
          warmup: float = 0.06, max_length: int = 256, seed: int = 0, base_model: str | None = None,
          max_pairs: int | None = None, progress: bool = True) -> list[dict]:
    """Train a cross-encoder (a CoRM critic, the relevance model) with Accelerate; resumes from the last finished epoch in ``out_dir``.

    Args:
        groups, val_groups: from ``build_groups`` / ``relevance_groups`` (+ ``split_groups``).
        init: encoder to start from (a path or hub id), or a saved cross-encoder (encoder and head), such
            as the kit's relevance warm start.
        loss: ``hybrid`` (CoRM), ``pointwise`` (PA-CE, relevance CE) or ``listwise`` (rank-only).
        tau: listwise temperature τ.
        epochs, lr, batch_groups, grad_accum, weight_decay, warmup: AdamW with a cosine schedule
            and linear warm-up over ``warmup`` of the steps (paper: 3, 5e-5, 32, 0.01, 6%).
        max_pairs: run a batch above this many pairs as micro-batches of whole groups
            (``backward_in_parts``); callers pass ``config.max_pairs_per_pass()``.

    Returns the history: one row per logged step (train loss) and per epoch (val metrics). The
    final model is saved to ``model_dir`` (default ``out_dir/model``) with the history beside it
    as ``history.jsonl``; trained on several processes, with ``training.json`` too (``trained_on``:
    one process's model folder stays as it always was).

    On N processes ``batch_groups`` is each one's: a step trains on ``batch_groups`` × N groups,
    and the run trains as one process at ``batch_groups`` × N does (the same batches, losses,
    schedule and validation), up to dropout masks and the order of float sums.
    """
    from accelerate.data_loader import prepare_data_loader
    from transformers import get_cosine_schedule_with_warmup

    _check_hparams(epochs=epochs, lr=lr, batch_groups=batch_groups, grad_accum=grad_accum,
                   weight_decay=weight_decay, warmup=warmup, max_length=max_length)
    check_groups(groups, "training group")
    check_groups(val_groups, "validation group")
    if max_pairs is not None:
        check_knob("max_pairs", max_pairs, integer=True, low=1)
        print(f"[robustkit] cross-encoder training: batches above {max_pairs} pairs run as "
              "micro-batches of whole groups (ROBUSTKIT_MAX_PAIRS)")
    criterion = make_loss(loss, tau)
    model_dir = Path(model_dir or Path(out_dir) / "model")
    accelerator = accelerator_for(grad_accum, unused_parameters=True)  # the encoder's pooler is not read
    processes, index = accelerator.num_processes, accelerator.process_index
    batching = trained_on(accelerator, batch_groups, grad_accum)
    announce(accelerator, batching)
    torch.manual_seed(seed)
    if (Path(init) / "critic_config.json").exists():  # a trained cross-encoder (the warm start): head too
        model = CrossEncoder.load(init).train()
        model.config["max_length"] = max_length
    else:
        model = CrossEncoder(init, max_length=max_length, base_model=base_model)
    if index:  # dropout: one random stream on every process would drop the same units of each share
        torch.manual_seed(seed + index)
    train_data = GroupDataset(groups, model.tokenizer, max_length)
    val_data = GroupDataset(val_groups, model.tokenizer, max_length)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay,
                                  fused=accelerator.device.type == "cuda")
    steps_per_epoch = math.ceil(len(train_data) / (batch_groups * processes) / grad_accum)
    # Accelerate steps a prepared schedule once per process at each optimizer step: count in those
    scheduler = get_cosine_schedule_with_warmup(optimizer, processes * int(warmup * steps_per_epoch * epochs),
                                                processes * steps_per_epoch * epochs)

    def collate_share(step_groups: list[dict]) -> dict:
        """This process's share of a step's groups, collated. A process left without one (a short
        last step) runs a stand-in: the step's last group with every candidate masked out, which
        adds nothing to the loss, its gradients or the step's counts, but runs the forward and
        backward that DDP waits for on every process."""
        mine = step_share(step_groups, index, processes)
        if mine:
            return train_data.collate(mine)
        stand_in = train_data.collate(step_groups[-1:])
        stand_in["mask"] = torch.zeros_like(stand_in["mask"])
        return stand_in

    def batches(epoch: int):  # a fresh shuffle per epoch, seeded so a resumed run sees the same order
        steps = torch.utils.data.DataLoader(train_data, batch_size=batch_groups * processes, shuffle=True,
                                            collate_fn=collate_share, generator=torch.Generator().manual_seed(seed + epoch))
        # each process already holds its share: Accelerate must not deal the steps out again
        return prepare_data_loader(steps, accelerator.device, num_processes=1, process_index=0, put_on_device=True)

    def step(model, batch, backward):  # this process's share of the loss, over the whole step's counts
        counts = total(criterion.denominators(batch["targets"], batch["mask"]))
        return backward_in_parts(model, criterion, batch, max_pairs, backward, counts)

    model, rows = fit(accelerator, model, optimizer, scheduler, epochs=epochs, out_dir=out_dir, batches=batches,
                      step=step, what=model_name(model), max_pairs=max_pairs, progress=progress,
                      after_epoch=lambda trained, epoch: evaluate(trained, val_data, criterion,
                                                                  batch_groups * processes, accelerator))
    if accelerator.is_main_process:
        model.save(model_dir)
        write_jsonl(model_dir / "history.jsonl", rows)
        if processes > 1:
            write_json(model_dir / "training.json", batching)
    return rows


def pass_budget(init: str | None = None, max_length: int = 256) -> tuple[int | None, dict]:
    """The most pairs one forward pass of training may hold, and what a trained model's manifest
    records of it: ``$ROBUSTKIT_MAX_PAIRS``; else on a GPU as many pairs of ``max_length`` tokens
    as the free memory holds beside ``init``'s weights, gradients and AdamW states
    (``gpu_pairs_per_pass``); else None (the whole batch, nothing recorded, so a CPU's manifests
    and the artifacts they keep do not change)."""
    max_pairs = max_pairs_per_pass()
    if max_pairs is None and init is not None and pick_device().startswith("cuda"):
        max_pairs = gpu_pairs_per_pass(init, max_length)
    return max_pairs, ({"max_pairs_per_pass": max_pairs} if max_pairs else {})


def activation_bytes_per_pair(config, max_length: int) -> int:
    """Training activations of one (query, passage) pair of ``max_length`` tokens in a transformer
    encoder under 16-bit autocast: per layer s·h·(34 + 5·a·s/h) bytes (Korthikanti et al. 2022,
    no recomputation), doubled for DeBERTa's disentangled attention (its relative-position
    attention adds score matrices of the same size per head)."""
    s, h, a = max_length, config.hidden_size, config.num_attention_heads
    per_layer = s * h * (34 + 5 * a * s / h)
    return int(per_layer * config.num_hidden_layers * (2 if "deberta" in config.model_type else 1))


def gpu_pairs_per_pass(init: str, max_length: int) -> int:
    """How many pairs one training pass fits in the GPU's free memory beside the model's weights,
    gradients and AdamW states (16 bytes a parameter, fp32 master weights), keeping the memory
    plan's reserve; printed, since it changes how a batch runs (not what it computes)."""
    from transformers import AutoConfig

    from robustkit.device import GB, GPU_MEMORY, ModelDoesNotFit, gpu
    from robustkit.models import parameter_count

    encoder = Path(init) / "encoder" if (Path(init) / "critic_config.json").exists() else init
    config = AutoConfig.from_pretrained(encoder)
    state = 16 * parameter_count(config, "encoder")
    per_pair = activation_bytes_per_pair(config, max_length)
    free = torch.cuda.mem_get_info()[0] - state - GPU_MEMORY.reserve()
    pairs = int(free // per_pair)
    if pairs < 1:
        raise ModelDoesNotFit(f"training {encoder} needs {(state + per_pair) / GB:.1f} GiB on {gpu()} for one "
                              f"pair of {max_length} tokens; {torch.cuda.mem_get_info()[0] / GB:.1f} GiB are free")
    print(f"[robustkit] cross-encoder training on {gpu()}: at most {pairs} pairs per forward pass "
          f"(~{per_pair / 2**20:.0f} MiB of activations a pair of {max_length} tokens; "
          f"{free / GB:.1f} GiB free beside the model's training state)")
    return pairs


def backward_in_parts(model, criterion, batch: dict, max_pairs: int | None, backward,
                      denominators: torch.Tensor | None = None) -> torch.Tensor:
    """Backpropagate one batch's loss and return it; a batch above ``max_pairs`` pairs goes
    forward and backward in micro-batches of whole groups, each loss over the whole batch's
    denominators, so the gradients add up to the batch's (up to dropout masks and summation
    order) while only one micro-batch's activations are alive at a time. ``denominators``: the
    whole step's, when the batch is one process's share of it."""
    # a stand-in (``train``: no real candidate) is one group, with nothing to split
    parts = micro_batches(batch, max_pairs) if max_pairs and batch["mask"].any() else [batch]
    if len(parts) == 1:
        value = criterion(group_logits(model, batch), batch["targets"], batch["mask"], denominators)
        backward(value)
        return value
    if denominators is None:
        denominators = criterion.denominators(batch["targets"], batch["mask"])
    total = 0.0
    for part in parts:
        value = criterion(group_logits(model, part), part["targets"], part["mask"], denominators)
        backward(value)
        total = total + value.detach()
    return total


def micro_batches(batch: dict, max_pairs: int) -> list[dict]:
    """Split a collated batch (``GroupDataset.collate``) into runs of consecutive whole groups of
    at most ``max_pairs`` pairs, each trimmed to its own longest pair."""
    sizes = batch["mask"].sum(dim=1).tolist()
    if max(sizes) > max_pairs:
        raise ValueError(f"a group of {max(sizes)} pairs does not fit in ROBUSTKIT_MAX_PAIRS="
                         f"{max_pairs}: raise it to at least the largest group")
    spans, start, pairs = [], 0, 0
    for g, size in enumerate(sizes):
        if pairs + size > max_pairs:
            spans.append((start, g))
            start, pairs = g, 0
        pairs += size
    spans.append((start, len(sizes)))
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    parts = []
    for first, last in spans:
        rows = slice(offsets[first], offsets[last])
        width = int(batch["attention_mask"][rows].sum(dim=1).max())
        part = {k: v[rows, :width] for k, v in batch.items() if k not in ("targets", "mask", "slots")}
        part["targets"], part["mask"] = batch["targets"][first:last], batch["mask"][first:last]
        part["slots"] = part["mask"].flatten().nonzero().squeeze(1)
        parts.append(part)
    return parts


def evaluate(model: CrossEncoder, data: GroupDataset, criterion, batch_groups: int = 32,
             accelerator=None) -> dict:
    """Held-out loss (the mean of its batches'), NDCG@3 (gains = teacher utilities) and MRR of
    the first useful passage, over the whole of ``data``.

    With the ``accelerator`` of several processes each scores every N-th batch and they share
    their results: every process returns the whole set's metrics, as one process would. The
    model is left in the mode it came in: a scorer's model evaluated here must not come back
    with dropout switched on."""
    was_training = model.training
    model.eval()
    try:
        return _evaluate(model, data, criterion, batch_groups, accelerator)
    finally:
        model.train(was_training)


@torch.no_grad()
def _evaluate(model: CrossEncoder, data: GroupDataset, criterion, batch_groups: int, accelerator) -> dict:
    device = next(model.parameters()).device
    index, processes = (accelerator.process_index, accelerator.num_processes) if accelerator else (0, 1)
    starts = range(index * batch_groups, len(data), processes * batch_groups)  # every N-th batch
    # a DataLoader draws a seed from torch's random stream, which training's dropout then continues:
    # one process's runs keep the bytes they always had
    loader = torch.utils.data.DataLoader(data, collate_fn=data.collate, batch_sampler=[
        range(start, min(start + batch_groups, len(data))) for start in starts])
    scored = []  # (first group, loss, NDCG@3s, MRRs) of every batch this process scores
    for start, batch in zip(starts, loader):
        batch = {k: v.to(device) for k, v in batch.items()}
        cast = autocast_dtype(device.type)
        with torch.autocast(device.type, dtype=cast, enabled=cast is not None):
            logits = group_logits(model, batch).float()
        ndcgs, mrrs = [], []
        for z, s, m in zip(logits.cpu().numpy(), batch["targets"].cpu().numpy(),
                           batch["mask"].cpu().numpy()):
            ndcgs.append(ndcg_at_k(z[m], s[m], 3))
            mrrs.append(mrr(z[m], s[m]))
        scored.append((start, criterion(logits, batch["targets"], batch["mask"]).item(), ndcgs, mrrs))
    # every process's batches, in the order one process scores them
    _, losses, ndcgs, mrrs = zip(*sorted(gathered(scored) if processes > 1 else scored))
    return {"loss": float(np.mean(losses)), "ndcg@3": float(np.mean(np.concatenate(ndcgs))),
            "mrr": float(np.mean(np.concatenate(mrrs)))}


def _check_hparams(*, epochs, lr, batch_groups, grad_accum, weight_decay, warmup, max_length) -> None:
    for name, value in (("epochs", epochs), ("batch_groups", batch_groups),
                        ("grad_accum", grad_accum), ("max_length", max_length)):
        check_knob(name, value, integer=True, low=1)
    check_knob("lr", lr, low=0, low_open=True)
    check_knob("weight_decay", weight_decay, low=0)
    check_knob("warmup", warmup, low=0, high=1)


