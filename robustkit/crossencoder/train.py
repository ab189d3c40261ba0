"""Training the kit's cross-encoder with Accelerate: one loop for CPU and GPU.

AdamW (weight decay 0.01) with a cosine schedule and linear warm-up over listwise groups
(``{query, docs, labels}``: CoRM's teacher groups, ``crossencoder.groups``' alias groups), a loss
from ``crossencoder.loss``, held-out NDCG@3 / MRR each epoch, a checkpoint per epoch that a
rerun resumes from. bf16 autocast on GPU, fp32 on CPU; several GPUs unchanged:

    accelerate launch -m robustkit.corm train --groups runs/colab/corm/groups.jsonl --init ... --out ...

This module imports only torch, transformers and accelerate (plus the kit's light modules).
"""
from __future__ import annotations

import ctypes
import math
import sys
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from robustkit.artifacts import JsonlLog
from robustkit.config import check_knob, max_pairs_per_pass, show_progress
from robustkit.crossencoder.loss import make_loss
from robustkit.crossencoder.model import CrossEncoder, GroupDataset, group_logits
from robustkit.data.records import write_jsonl
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
    as ``history.jsonl``.
    """
    from accelerate import Accelerator
    from transformers import get_cosine_schedule_with_warmup

    _check_hparams(epochs=epochs, lr=lr, batch_groups=batch_groups, grad_accum=grad_accum,
                   weight_decay=weight_decay, warmup=warmup, max_length=max_length)
    if max_pairs is not None:
        check_knob("max_pairs", max_pairs, integer=True, low=1)
        print(f"[robustkit] cross-encoder training: batches above {max_pairs} pairs run as "
              "micro-batches of whole groups (ROBUSTKIT_MAX_PAIRS)")
    criterion = make_loss(loss, tau)
    out_dir = Path(out_dir)
    model_dir = Path(model_dir or out_dir / "model")
    keep_freed_memory()
    accelerator = Accelerator(mixed_precision="bf16" if torch.cuda.is_available() else "no",
                              gradient_accumulation_steps=grad_accum)
    torch.manual_seed(seed)
    if (Path(init) / "critic_config.json").exists():  # a trained cross-encoder (the warm start): head too
        model = CrossEncoder.load(init).train()
        model.config["max_length"] = max_length
    else:
        model = CrossEncoder(init, max_length=max_length, base_model=base_model)
    train_data = GroupDataset(groups, model.tokenizer, max_length)
    val_data = GroupDataset(val_groups, model.tokenizer, max_length)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay,
                                  fused=torch.cuda.is_available())
    steps_per_epoch = math.ceil(len(train_data) / batch_groups / grad_accum)
    scheduler = get_cosine_schedule_with_warmup(optimizer, int(warmup * steps_per_epoch * epochs),
                                                steps_per_epoch * epochs)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    history = JsonlLog(out_dir / "history.jsonl", key="id")
    start_epoch = _resume(accelerator, out_dir)
    for epoch in range(start_epoch, epochs):
        loader = accelerator.prepare(torch.utils.data.DataLoader(
            train_data, batch_size=batch_groups, shuffle=True, collate_fn=train_data.collate,
            generator=torch.Generator().manual_seed(seed + epoch)))
        model.train()
        rows = []
        for step, batch in enumerate(tqdm(loader, desc=f"epoch {epoch + 1}/{epochs}",
                                          disable=not (progress and show_progress() and accelerator.is_main_process))):
            with accelerator.accumulate(model):
                value = backward_in_parts(model, criterion, batch, max_pairs, accelerator.backward)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            rows.append({"id": f"train-{epoch}-{step}", "epoch": epoch + step / len(loader),
                         "split": "train", "loss": value.item()})
        val = evaluate(accelerator.unwrap_model(model), val_data, criterion, batch_groups)
        rows.append({"id": f"val-{epoch}", "epoch": epoch + 1, "split": "val", **val})
        accelerator.wait_for_everyone()
        if accelerator.is_main_process:
            history.extend(rows)
        if epoch < epochs - 1:  # the last epoch ends in the saved model: no state to resume from
            accelerator.save_state(out_dir / "checkpoints" / f"epoch-{epoch}")
            _prune_checkpoints(out_dir, keep=epoch)
    rows = [history.records[k] for k in sorted(history.records, key=_history_order)]
    if accelerator.is_main_process:
        accelerator.unwrap_model(model).save(model_dir)
        write_jsonl(model_dir / "history.jsonl", rows)
    return rows


def pass_budget() -> tuple[int | None, dict]:
    """``config.max_pairs_per_pass()`` and what a trained model's manifest records of it: nothing
    when it is unset, so the default's manifests (and the artifacts they keep) do not change."""
    max_pairs = max_pairs_per_pass()
    return max_pairs, ({"max_pairs_per_pass": max_pairs} if max_pairs else {})


def backward_in_parts(model, criterion, batch: dict, max_pairs: int | None, backward) -> torch.Tensor:
    """Backpropagate one batch's loss and return it; a batch above ``max_pairs`` pairs goes
    forward and backward in micro-batches of whole groups, each loss over the whole batch's
    denominators, so the gradients add up to the batch's (up to dropout masks and summation
    order) while only one micro-batch's activations are alive at a time."""
    parts = micro_batches(batch, max_pairs) if max_pairs else [batch]
    if len(parts) == 1:
        value = criterion(group_logits(model, batch), batch["targets"], batch["mask"])
        backward(value)
        return value
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


def evaluate(model: CrossEncoder, data: GroupDataset, criterion, batch_groups: int = 32) -> dict:
    """Held-out loss, NDCG@3 (gains = teacher utilities) and MRR of the first useful passage.

    The model is left in the mode it came in: a scorer's model evaluated here must not come
    back with dropout switched on."""
    was_training = model.training
    model.eval()
    try:
        return _evaluate(model, data, criterion, batch_groups)
    finally:
        model.train(was_training)


@torch.no_grad()
def _evaluate(model: CrossEncoder, data: GroupDataset, criterion, batch_groups: int) -> dict:
    device = next(model.parameters()).device
    losses, ndcgs, mrrs = [], [], []
    loader = torch.utils.data.DataLoader(data, batch_size=batch_groups, collate_fn=data.collate)
    for batch in loader:
        batch = {k: v.to(device) for k, v in batch.items()}
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            logits = group_logits(model, batch).float()
        losses.append(criterion(logits, batch["targets"], batch["mask"]).item())
        for z, s, m in zip(logits.cpu().numpy(), batch["targets"].cpu().numpy(),
                           batch["mask"].cpu().numpy()):
            ndcgs.append(ndcg_at_k(z[m], s[m], 3))
            mrrs.append(mrr(z[m], s[m]))
    return {"loss": float(np.mean(losses)), "ndcg@3": float(np.mean(ndcgs)),
            "mrr": float(np.mean(mrrs))}


def _resume(accelerator, out_dir: Path) -> int:
    done = sorted((out_dir / "checkpoints").glob("epoch-*"), key=lambda p: int(p.name[6:]))
    if not done:
        return 0
    accelerator.load_state(done[-1])
    return int(done[-1].name[6:]) + 1


def _prune_checkpoints(out_dir: Path, keep: int) -> None:
    import shutil

    for old in (out_dir / "checkpoints").glob("epoch-*"):
        if int(old.name[6:]) < keep:
            shutil.rmtree(old)


def _history_order(key: str) -> tuple:
    split, epoch, *step = key.split("-")
    return int(epoch), split == "val", int(step[0]) if step else 0


def _check_hparams(*, epochs, lr, batch_groups, grad_accum, weight_decay, warmup, max_length) -> None:
    for name, value in (("epochs", epochs), ("batch_groups", batch_groups),
                        ("grad_accum", grad_accum), ("max_length", max_length)):
        check_knob(name, value, integer=True, low=1)
    check_knob("lr", lr, low=0, low_open=True)
    check_knob("weight_decay", weight_decay, low=0)
    check_knob("warmup", warmup, low=0, high=1)


def keep_freed_memory() -> None:
    """Let glibc keep freed blocks under 256 MiB for reuse instead of returning them to the OS.

    CPU training allocates the same activation buffers each step; by default glibc serves blocks
    over its mmap threshold (at most 32 MiB) with fresh mmaps and trims the heap after each free,
    so every step page-faults its buffers in again (2.9× the faults of this setting). Serving
    *every* block from the heap avoids that but fragments it: dynamically padded batches change
    the buffers' sizes each step, and training the small relevance model peaked at 19.0 GiB
    against glibc's 11.9. A fixed 256 MiB threshold keeps the many mid-sized buffers in the heap
    and maps only the largest (attention probabilities of a long batch): 15.0 GiB, with 1.5× the
    first setting's faults and a step time within noise of it (measured beside another job).
    Trimming only beyond 1 GiB keeps the heap's top. A no-op off glibc.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    m_trim_threshold, m_mmap_threshold = -1, -3  # mallopt parameter numbers from <malloc.h>
    libc.mallopt(m_mmap_threshold, 256 << 20)
    libc.mallopt(m_trim_threshold, 1 << 30)
