"""The kit's one training loop, for every cross-encoder it trains: the rankers (CoRM's critics,
the relevance model: ``crossencoder.train``) and the NLI classifier (``nli.train``).

``fit`` runs the epochs under Accelerate — one code path for a CPU, a GPU in mixed precision and
several processes (``torchrun`` or ``accelerate launch``: ``crossencoder.processes``) — and owns
what every training run needs the same way: each step backpropagates through Accelerate, then the
optimizer and scheduler step; a loss that stays non-finite stops with the fix; a GPU
out-of-memory error names the model and the knob; a progress bar per epoch and a time estimate
after three steps; a checkpoint after every epoch but the last (written to scratch, renamed into
place once whole, checked before it is loaded) that a rerun on as many processes resumes from,
random streams included, to the weights of an uninterrupted run.
What differs between models — their batches, their loss, a held-out evaluation per epoch — the
caller passes in.

This module imports only torch and accelerate (plus the kit's light modules).
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
from typing import Callable, Iterable, Sized

import torch
from tqdm.auto import tqdm

from robustkit.artifacts import JsonlLog, read_json, write_json
from robustkit.config import announce_long_work, show_progress
from robustkit.crossencoder.processes import LAUNCH, check_launch, launched_processes
from robustkit.device import mixed_precision, pick_device


def accelerator_for(grad_accum: int = 1, *, unused_parameters: bool = False):
    """The Accelerator every kit training run uses: the device's mixed precision (bf16 autocast,
    fp16 with a gradient scaler on a T4, none on a CPU). Created before the model, as ``fit``
    expects; glibc is told to keep freed training buffers (``keep_freed_memory``).

    Several processes launched on a machine without a GPU train on the CPU over gloo: Accelerate
    sets that up only when told ``cpu``, and would otherwise leave each process training alone. A
    launch that starts fewer processes than it says is refused (``processes.check_launch``).
    ``unused_parameters``: the model has parameters its loss never reaches (the cross-encoder's
    encoder pooler), whose gradients DDP must not wait for."""
    from accelerate import Accelerator
    from accelerate.utils import DistributedDataParallelKwargs

    keep_freed_memory()
    device = pick_device()
    accelerator = Accelerator(mixed_precision=mixed_precision(device), gradient_accumulation_steps=grad_accum,
                              cpu=device == "cpu" and launched_processes() > 1,
                              kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=unused_parameters)])
    check_launch(accelerator)
    return accelerator


def fit(accelerator, model, optimizer, scheduler, *, epochs: int, out_dir: str | Path,
        batches: Callable[[int], Iterable[dict] | Sized], step: Callable[..., torch.Tensor], what: str,
        after_epoch: Callable[[object, int], dict] | None = None, on_epoch: Callable[[int], None] | None = None,
        max_pairs: int | None = None, progress: bool = True) -> tuple[object, list[dict]]:
    """Train ``model`` for ``epochs``, resuming from the last whole checkpoint in ``out_dir``.

    Args:
        accelerator: from ``accelerator_for``; ``fit`` prepares the model, optimizer and scheduler.
        batches: ``batches(epoch)``, that epoch's batches in order (a list, or a DataLoader that
            Accelerate has prepared), each a dict of tensors on the accelerator's device; on
            several processes, this process's.
        step: ``step(model, batch, backward)`` computes this process's share of the step's loss
            (on several processes, each its own batch: the shares add up to the step's loss),
            backpropagates it with ``backward`` and returns it. ``backward`` is Accelerate's, times
            the number of processes: DDP averages the processes' gradients, and the step's
            gradient is their sum.
        what: the model, for messages ("training <what>").
        after_epoch: ``after_epoch(model, epoch)``, held-out metrics logged as that epoch's
            ``val`` row (the unwrapped model).
        on_epoch: called with each epoch's index before its first step (e.g. to seed it).
        max_pairs: the pairs per pass, named when a GPU runs out of memory.

    Returns the unwrapped model and the history: one ``train`` row per step (its loss, the shares
    summed over the processes) and one ``val`` row per epoch, in training order, also kept as
    ``out_dir/history.jsonl`` (by the main process).
    """
    out_dir = Path(out_dir)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    history = JsonlLog(out_dir / "history.jsonl", key="id")
    start_epoch = _resume(accelerator, out_dir)
    started = time.perf_counter()
    for epoch in range(start_epoch, epochs):
        if on_epoch is not None:
            on_epoch(epoch)
        loader = batches(epoch)
        model.train()
        rows = []
        for number, batch in enumerate(tqdm(loader, desc=f"{what}: epoch {epoch + 1}/{epochs}", unit="step",
                                            disable=not (progress and show_progress() and accelerator.is_main_process))):
            with accelerator.accumulate(model), _named_out_of_memory(model, batch, max_pairs):
                value = step(model, batch, lambda loss: accelerator.backward(loss * accelerator.num_processes))
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            rows.append({"id": f"train-{epoch}-{number}", "epoch": epoch + number / len(loader),
                         "split": "train", "loss": accelerator.reduce(value.detach(), "sum").item()})
            _check_finite([row["loss"] for row in rows], accelerator.mixed_precision)
            if epoch == start_epoch and number == 2 and accelerator.is_main_process:
                announce_long_work(f"training {what}", 3, len(loader) * (epochs - start_epoch),
                                   time.perf_counter() - started, "steps")
        if after_epoch is not None:
            rows.append({"id": f"val-{epoch}", "epoch": epoch + 1, "split": "val",
                         **after_epoch(accelerator.unwrap_model(model), epoch)})
        accelerator.wait_for_everyone()
        if accelerator.is_main_process:
            history.extend(rows)
        if epoch < epochs - 1:  # the last epoch ends in the saved model: no state to resume from
            _save_checkpoint(accelerator, out_dir, epoch)
    rows = [history.records[k] for k in sorted(history.records, key=_history_order)]
    return accelerator.unwrap_model(model), rows


def _history_order(key: str) -> tuple:
    split, epoch, *step = key.split("-")
    return int(epoch), split == "val", int(step[0]) if step else 0


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


CHECKPOINT = re.compile(r"epoch-(\d+)")  # a whole epoch's state; "epoch-3.partial", "epoch-3.torn-1" are not
PROCESSES = "processes.json"  # how many processes saved a checkpoint; absent: one (saved before it was written)


def _checkpoints(out_dir: Path) -> list[tuple[int, Path]]:
    """The epoch checkpoints in ``out_dir``, oldest first."""
    folders = (out_dir / "checkpoints").glob("epoch-*")
    return sorted((int(match[1]), folder) for folder in folders if (match := CHECKPOINT.fullmatch(folder.name)))


def _save_checkpoint(accelerator, out_dir: Path, epoch: int) -> None:
    """Save the training state after ``epoch`` into a scratch folder and rename it into place
    once every process has written its part (its random state; the main process the weights,
    optimizer, schedule and how many processes saved it): a run killed while saving leaves the
    scratch folder (cleared by the next save), never a torn ``epoch-N`` that every resume would
    fail to load. The rename is atomic on one filesystem; the state of the epoch before goes
    once this one is in place."""
    folder = out_dir / "checkpoints" / f"epoch-{epoch}"
    scratch = folder.with_name(f"{folder.name}.partial")
    if accelerator.is_main_process and scratch.exists():
        shutil.rmtree(scratch)
    accelerator.wait_for_everyone()
    accelerator.save_state(scratch)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        write_json(scratch / PROCESSES, {"processes": accelerator.num_processes})
        scratch.rename(folder)
        for older, path in _checkpoints(out_dir):
            if older < epoch:
                shutil.rmtree(path)
    accelerator.wait_for_everyone()


def _resume(accelerator, out_dir: Path) -> int:
    """Load the last whole checkpoint and return the epoch after it (0: none). A torn one (an
    older version saved in place, and a run killed midway left it; or a file was lost since) is
    set aside as ``epoch-N.torn-M`` with a message, kept to inspect, and the one before it tried.
    One saved by another number of processes is refused: which groups each process trains on,
    and its random state, depend on how many there are."""
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
    saved = _saved_processes(folder)
    if saved != accelerator.num_processes:
        raise ValueError(f"{folder} was saved by {saved} process(es) and this run has {accelerator.num_processes}: "
                         f"a run resumes only on as many processes as it started on. Rerun it on {saved} ("
                         + ("without a launcher" if saved == 1 else LAUNCH.format(n=saved))
                         + f"), or train afresh: into another folder, or after deleting {folder.parent}")
    accelerator.load_state(folder)
    return epoch + 1


def _saved_processes(folder: Path) -> int:
    """How many processes saved the checkpoint ``folder`` (``PROCESSES``)."""
    path = folder / PROCESSES
    return read_json(path)["processes"] if path.exists() else 1


def _torn(folder: Path, accelerator) -> str | None:
    """What keeps ``folder`` from being a whole checkpoint of this run, or None: every file
    ``accelerator.load_state`` reads must be there and written to its end (it skips a missing
    random state without a word, and the resumed run would then differ from an unbroken one),
    the random states of as many processes as saved it."""
    from accelerate.utils import (OPTIMIZER_NAME, RNG_STATE_NAME, SAFE_WEIGHTS_NAME, SCALER_NAME,
                                  SCHEDULER_NAME, WEIGHTS_NAME)
    from safetensors import SafetensorError, safe_open

    weights = [folder / name for name in (SAFE_WEIGHTS_NAME, WEIGHTS_NAME) if (folder / name).exists()]
    if not weights:
        return f"no model weights: neither {SAFE_WEIGHTS_NAME} nor {WEIGHTS_NAME}"
    files = [weights[0], folder / f"{OPTIMIZER_NAME}.bin", folder / f"{SCHEDULER_NAME}.bin",
             *(folder / f"{RNG_STATE_NAME}_{i}.pkl" for i in range(_saved_processes(folder))),
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
