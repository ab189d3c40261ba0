"""Training the kit's cross-encoder with Accelerate: one loop for CPU and GPU.

AdamW (weight decay 0.01) with a cosine schedule and linear warm-up over listwise groups
(``{query, docs, labels}``: CoRM's teacher groups, ``crossencoder.groups``' alias groups; checked
first, ``check_groups``), a loss from ``crossencoder.loss``, held-out NDCG@3 / MRR each epoch, a
checkpoint per epoch that a rerun resumes from (renamed into place once whole, checked before it
is loaded). fp32 on a CPU; on a GPU the device's mixed precision (``device.mixed_precision``:
bf16 autocast, or fp16 autocast with Accelerate's gradient scaler on a T4) over fp32 master
weights, a loss that stays non-finite stops with the fix, and a batch runs in as many passes as
the GPU's free memory needs (``pass_budget``); several GPUs unchanged:

    accelerate launch -m robustkit.corm train --groups runs/colab/corm/groups.jsonl --init ... --out ...

This module imports only torch, transformers and accelerate (plus the kit's light modules).
"""
from __future__ import annotations

import ctypes
import itertools
import math
import re
import shutil
import sys
import time
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from robustkit.artifacts import JsonlLog
from robustkit.config import announce_long_work, check_knob, show_progress
from robustkit.crossencoder.groups import check_groups
from robustkit.crossencoder.loss import make_loss
from robustkit.crossencoder.model import CrossEncoder, GroupDataset, group_logits
from robustkit.data.records import write_jsonl
from robustkit.device import autocast_dtype, max_pairs_per_pass, mixed_precision, pick_device
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
    check_groups(groups, "training group")
    check_groups(val_groups, "validation group")
    if max_pairs is not None:
        check_knob("max_pairs", max_pairs, integer=True, low=1)
        print(f"[robustkit] cross-encoder training: batches above {max_pairs} pairs run as "
              "micro-batches of whole groups (ROBUSTKIT_MAX_PAIRS)")
    criterion = make_loss(loss, tau)
    out_dir = Path(out_dir)
    model_dir = Path(model_dir or out_dir / "model")
    keep_freed_memory()
    accelerator = Accelerator(mixed_precision=mixed_precision(pick_device()),
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
                                  fused=accelerator.device.type == "cuda")
    steps_per_epoch = math.ceil(len(train_data) / batch_groups / grad_accum)
    scheduler = get_cosine_schedule_with_warmup(optimizer, int(warmup * steps_per_epoch * epochs),
                                                steps_per_epoch * epochs)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    history = JsonlLog(out_dir / "history.jsonl", key="id")
    start_epoch = _resume(accelerator, out_dir)
    started = time.perf_counter()
    for epoch in range(start_epoch, epochs):
        loader = accelerator.prepare(torch.utils.data.DataLoader(
            train_data, batch_size=batch_groups, shuffle=True, collate_fn=train_data.collate,
            generator=torch.Generator().manual_seed(seed + epoch)))
        model.train()
        rows = []
        for step, batch in enumerate(tqdm(loader, desc=f"epoch {epoch + 1}/{epochs}",
                                          disable=not (progress and show_progress() and accelerator.is_main_process))):
            with accelerator.accumulate(model), _named_out_of_memory(model, batch, max_pairs):
                value = backward_in_parts(model, criterion, batch, max_pairs, accelerator.backward)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            rows.append({"id": f"train-{epoch}-{step}", "epoch": epoch + step / len(loader),
                         "split": "train", "loss": value.item()})
            _check_finite([row["loss"] for row in rows], accelerator.mixed_precision)
            if epoch == start_epoch and step == 2 and accelerator.is_main_process:
                announce_long_work(f"training {model_name(model)}", 3, len(loader) * (epochs - start_epoch),
                                   time.perf_counter() - started, "steps")
        val = evaluate(accelerator.unwrap_model(model), val_data, criterion, batch_groups)
        rows.append({"id": f"val-{epoch}", "epoch": epoch + 1, "split": "val", **val})
        accelerator.wait_for_everyone()
        if accelerator.is_main_process:
            history.extend(rows)
        if epoch < epochs - 1:  # the last epoch ends in the saved model: no state to resume from
            _save_checkpoint(accelerator, out_dir, epoch)
    rows = [history.records[k] for k in sorted(history.records, key=_history_order)]
    if accelerator.is_main_process:
        accelerator.unwrap_model(model).save(model_dir)
        write_jsonl(model_dir / "history.jsonl", rows)
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


def model_name(model) -> str:
    """A cross-encoder's base model, for messages (through Accelerate's wrapper if there is one)."""
    inner = getattr(model, "module", model)
    return inner.config.get("base_model", type(inner).__name__) if isinstance(inner.config, dict) \
        else type(inner).__name__


def _check_finite(losses: list[float], precision: str) -> None:
    """Stop when the last three training losses are not finite: fp16's gradient scaler skips a
    step whose gradients overflow, but a loss that stays NaN or inf is a forward pass that
    overflows (DeBERTa-v3 has been reported to, in fp16), and training would learn nothing."""
    if len(losses) >= 3 and not any(math.isfinite(x) for x in losses[-3:]):
        raise FloatingPointError(
            f"the training loss has not been finite for 3 steps in mixed precision '{precision}'"
            + (": an fp16 overflow; train in fp32 with ROBUSTKIT_MIXED_PRECISION=no" if precision == "fp16"
               else ": lower the learning rate, or check the groups' labels"))


@contextmanager
def _named_out_of_memory(model, batch: dict, max_pairs: int | None):
    """A GPU out-of-memory error in a training step, said in the kit's words: which model, how
    many pairs, and the knob that makes a pass smaller."""
    try:
        yield
    except torch.cuda.OutOfMemoryError:
        from robustkit.device import ModelDoesNotFit, gpu

        raise ModelDoesNotFit(
            f"training {model_name(model)} ran out of GPU memory on {gpu()} with {len(batch['input_ids'])} pairs in a "
            f"batch ({max_pairs or 'all'} per pass); set ROBUSTKIT_MAX_PAIRS to a smaller number of "
            "pairs per pass (at least the largest group), or lower batch_groups") from None


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
        cast = autocast_dtype(device.type)
        with torch.autocast(device.type, dtype=cast, enabled=cast is not None):
            logits = group_logits(model, batch).float()
        losses.append(criterion(logits, batch["targets"], batch["mask"]).item())
        for z, s, m in zip(logits.cpu().numpy(), batch["targets"].cpu().numpy(),
                           batch["mask"].cpu().numpy()):
            ndcgs.append(ndcg_at_k(z[m], s[m], 3))
            mrrs.append(mrr(z[m], s[m]))
    return {"loss": float(np.mean(losses)), "ndcg@3": float(np.mean(ndcgs)),
            "mrr": float(np.mean(mrrs))}


CHECKPOINT = re.compile(r"epoch-(\d+)")  # a whole epoch's state; "epoch-3.partial", "epoch-3.torn-1" are not


def _checkpoints(out_dir: Path) -> list[tuple[int, Path]]:
    """The epoch checkpoints in ``out_dir``, oldest first."""
    folders = (out_dir / "checkpoints").glob("epoch-*")
    return sorted((int(match[1]), folder) for folder in folders if (match := CHECKPOINT.fullmatch(folder.name)))


def _save_checkpoint(accelerator, out_dir: Path, epoch: int) -> None:
    """Save the training state after ``epoch`` into a scratch folder and rename it into place
    once every process has written its part: a run killed while saving leaves the scratch
    folder (cleared by the next save), never a torn ``epoch-N`` that every resume would fail
    to load. The rename is atomic on one filesystem; the state of the epoch before goes once
    this one is in place."""
    folder = out_dir / "checkpoints" / f"epoch-{epoch}"
    scratch = folder.with_name(f"{folder.name}.partial")
    if accelerator.is_main_process and scratch.exists():
        shutil.rmtree(scratch)
    accelerator.wait_for_everyone()
    accelerator.save_state(scratch)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        scratch.rename(folder)
        for older, path in _checkpoints(out_dir):
            if older < epoch:
                shutil.rmtree(path)
    accelerator.wait_for_everyone()


def _resume(accelerator, out_dir: Path) -> int:
    """Load the last whole checkpoint and return the epoch after it (0: none). A torn one (an
    older version saved in place, and a run killed midway left it; or a file was lost since) is
    set aside as ``epoch-N.torn-M`` with a message, kept to inspect, and the one before it tried."""
    if accelerator.is_main_process:
        for _, folder in reversed(_checkpoints(out_dir)):
            problem = _torn(folder, accelerator)
            if problem is None:
                break
            aside = next(path for n in itertools.count(1)
                         if not (path := folder.with_name(f"{folder.name}.torn-{n}")).exists())
            folder.rename(aside)
            print(f"[robustkit] {folder}: an incomplete checkpoint ({problem}), set aside as {aside.name}; "
                  "training resumes from the last complete checkpoint, or from the start. Delete "
                  f"{aside.name} once done with it")
    accelerator.wait_for_everyone()
    done = _checkpoints(out_dir)
    if not done:
        return 0
    epoch, folder = done[-1]
    accelerator.load_state(folder)
    return epoch + 1


def _torn(folder: Path, accelerator) -> str | None:
    """What keeps ``folder`` from being a whole checkpoint of this run, or None: every file
    ``accelerator.load_state`` reads must be there and written to its end (it skips a missing
    random state without a word, and the resumed run would then differ from an unbroken one)."""
    from accelerate.utils import (OPTIMIZER_NAME, RNG_STATE_NAME, SAFE_WEIGHTS_NAME, SCALER_NAME,
                                  SCHEDULER_NAME, WEIGHTS_NAME)
    from safetensors import SafetensorError, safe_open

    weights = [folder / name for name in (SAFE_WEIGHTS_NAME, WEIGHTS_NAME) if (folder / name).exists()]
    if not weights:
        return f"no model weights: neither {SAFE_WEIGHTS_NAME} nor {WEIGHTS_NAME}"
    files = [weights[0], folder / f"{OPTIMIZER_NAME}.bin", folder / f"{SCHEDULER_NAME}.bin",
             *(folder / f"{RNG_STATE_NAME}_{i}.pkl" for i in range(accelerator.num_processes)),
             *([folder / SCALER_NAME] if accelerator.scaler is not None else [])]
    for path in files:
        if not path.exists():
            return f"no {path.name}"
        try:  # no tensor is read: a safetensors header gives its data's length, torch.save's zip ends in its index
            if path.suffix == ".safetensors":
                with safe_open(path, "pt"):
                    pass
            else:
                zipfile.ZipFile(path).close()
        except (SafetensorError, zipfile.BadZipFile):
            return f"{path.name} is cut short"
    return None


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
