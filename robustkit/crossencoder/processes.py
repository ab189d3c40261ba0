"""Training one cross-encoder on several processes (data parallel): which launches really start
them, what each process trains on, and how their numbers add up to one process's.

``torchrun --standalone --nproc_per_node N -m robustkit.corm train …`` or ``accelerate launch
--multi_gpu --num_processes N -m robustkit.corm train …`` starts N processes: on GPUs they train
over NCCL, on a machine without one on the CPU over gloo (``loop.accelerator_for``). Each
optimizer step draws B × N groups in the seeded order one process at ``--batch-groups B×N`` draws
them, and process r trains on the r-th contiguous share (``step_share``). Its loss is its share of
the step's loss — taken over the whole step's denominators (``total``) — so the shares add up to
the step's loss and their gradients to its gradient: N processes at B groups each train as one
process at B × N, up to dropout masks and the order of float sums.

This module imports only accelerate (and the standard library).
"""
from __future__ import annotations

import os
from typing import Sequence

LAUNCH = ("torchrun --standalone --nproc_per_node {n} -m robustkit.corm train …, or accelerate launch "
          "--multi_gpu --num_processes {n} -m robustkit.corm train … (without a GPU the processes train "
          "on the CPU over gloo)")


def launched_processes() -> int:
    """How many processes the launcher started (torchrun's and ``accelerate launch``'s WORLD_SIZE): 1 without one."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def check_launch(accelerator) -> None:
    """Refuse a launch whose processes would not train together: each would train alone on all
    the groups and write the same checkpoints. Two such launches: Accelerate set up fewer
    processes than WORLD_SIZE says were started (a GPU setup it could not make), and ``accelerate
    launch --cpu --num_processes N``, which starts only one process without MPI — it leaves
    MASTER_ADDR set for the N it was asked for, and no WORLD_SIZE."""
    from accelerate.utils import parse_flag_from_env

    launched = launched_processes()
    if accelerator.num_processes < launched:
        raise ValueError(f"{launched} processes were launched (WORLD_SIZE={launched}) but Accelerate set up "
                         f"{accelerator.num_processes} ({accelerator.distributed_type}): each would train alone. "
                         f"Launch them with {LAUNCH.format(n=launched)}")
    if (accelerator.num_processes == 1 and parse_flag_from_env("ACCELERATE_USE_CPU")
            and "MASTER_ADDR" in os.environ and "WORLD_SIZE" not in os.environ):
        raise ValueError("accelerate launch --cpu was asked for several processes (--num_processes) and started "
                         f"one: it starts more only under MPI. Launch N processes with {LAUNCH.format(n='N')}; "
                         "or leave out --num_processes to train in one")


def step_share(groups: Sequence, index: int, count: int) -> list:
    """Process ``index``'s share of one step's groups: the index-th of ``count`` contiguous runs,
    whose sizes differ by at most one (the first runs the larger). Empty when the step holds
    fewer groups than processes (an epoch's short last step)."""
    size, extra = divmod(len(groups), count)
    start = index * size + min(index, extra)
    return list(groups[start:start + size + (index < extra)])


def total(tensor):
    """``tensor`` summed over the processes (itself on one)."""
    from accelerate.utils import reduce

    return reduce(tensor, "sum")


def gathered(items: list) -> list:
    """Every process's ``items``, concatenated in process order (``items`` on one)."""
    from accelerate.utils import gather_object

    return gather_object(items)


def trained_on(state, batch_groups: int, grad_accum: int) -> dict:
    """What a run records of its batch: groups per step on each process × processes × accumulated
    steps. ``state``: the run's Accelerator, or Accelerate's ``PartialState`` after it."""
    processes = state.num_processes
    return {"processes": processes, "batch_groups": batch_groups, "grad_accum": grad_accum,
            "effective_batch_groups": batch_groups * processes * grad_accum}


def announce(accelerator, batch: dict) -> None:
    """Say once, on the main process of several, how many train and the effective batch (``trained_on``)."""
    if accelerator.num_processes > 1 and accelerator.is_main_process:
        print(f"[robustkit] training on {batch['processes']} processes ({accelerator.distributed_type.value} over "
              f"{accelerator.state.backend}): an effective batch of {batch['effective_batch_groups']} groups = "
              f"{batch['batch_groups']} a step on each process × {batch['processes']} processes × "
              f"{batch['grad_accum']} accumulated step(s)")
