"""The device the kit computes on: CPU or GPU, the precision each kind of work runs in, and what
a GPU's memory holds.

    device = pick_device()              # "cuda" where torch sees a GPU, else "cpu"
    dtype, why = model_dtype(device)    # language models: fp32 on every CPU; bf16 or fp16 on a GPU
    mixed_precision(device)             # cross-encoders' training and scoring: "no", "bf16" or "fp16"
    GPU_MEMORY.admit(name, nbytes, evict)   # room for one more model, or a message saying why not

Precision follows the GPU's compute capability, not ``torch.cuda.is_bf16_supported()``, which
answers True on pre-Ampere GPUs because torch can *emulate* bf16 there (slowly). Colab's T4
(capability 7.5) therefore runs fp16: language models load in fp16, and cross-encoders train
with fp16 autocast and a gradient scaler (Accelerate's ``mixed_precision="fp16"``), keeping fp32
master weights. fp16's range (±65,504) is narrower than bf16's; DeBERTa-v3 and the Qwen2 family
are both reported to overflow in fp16 on some inputs (transformers PR #24116, Qwen issues #761 and
#868), so the kit checks what fp16 computes: a language model's probe prompt must give finite
logits (``llm``), a training loss must stay finite (``crossencoder.train``), scores must be
finite (``crossencoder.model``); each failure stops with a message naming ``ROBUSTKIT_DTYPE`` /
``ROBUSTKIT_MIXED_PRECISION`` as the fix.
"""
from __future__ import annotations

import gc
import os
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from robustkit import memo

DTYPES = ("float32", "bfloat16", "float16")
PRECISIONS = ("no", "bf16", "fp16")  # Accelerate's names for mixed precision
GB = 1024 ** 3


@dataclass(frozen=True)
class GPU:
    name: str
    total_bytes: int
    capability: tuple[int, int]

    @property
    def has_bf16(self) -> bool:
        """Native bf16 arithmetic: Ampere (8.0) and newer."""
        return self.capability >= (8, 0)

    def __str__(self) -> str:
        return (f"{self.name} ({self.total_bytes / GB:.1f} GiB, compute capability "
                f"{self.capability[0]}.{self.capability[1]})")


def has_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@memo.cached(1)
def gpu() -> GPU | None:
    """The first GPU torch sees, or None."""
    if not has_gpu():
        return None
    import torch

    props = torch.cuda.get_device_properties(0)
    return GPU(props.name, props.total_memory, (props.major, props.minor))


def pick_device(prefer: str | None = None) -> str:
    """``"cuda"`` when a GPU is present (or ``prefer`` says so and one is), else ``"cpu"``."""
    if prefer == "cuda" and not has_gpu():
        raise RuntimeError("device 'cuda' was asked for but torch sees no GPU; use device='cpu'")
    if prefer:
        return prefer
    return "cuda" if has_gpu() else "cpu"


def model_dtype(device: str, card: GPU | None = None) -> tuple[str, str]:
    """The dtype language models compute in on ``device``, and why.

    ``$ROBUSTKIT_DTYPE`` overrides (refused where the device cannot run it). Otherwise fp32 on
    *every* CPU: without native bf16 (AVX2-only CPUs) bf16 matmuls are several times slower than
    fp32, with it (AVX-512 BF16) not twice as fast, and one CPU dtype keeps a tiny run's answers the
    same whichever kind of CPU produced them (the results page's "The CPU dtype"). On a GPU: bf16
    where it is native, else fp16.
    """
    card = card or (gpu() if device.startswith("cuda") else None)
    chosen = os.environ.get("ROBUSTKIT_DTYPE", "").strip()
    if chosen:
        if chosen not in DTYPES:
            raise ValueError(f"ROBUSTKIT_DTYPE={chosen!r} is not one of {DTYPES}")
        if chosen == "bfloat16" and card and not card.has_bf16:
            raise ValueError(f"ROBUSTKIT_DTYPE=bfloat16 but the GPU {card} has no bf16 (it needs compute "
                             "capability 8.0, e.g. an L4 or A100); use float16 or float32")
        return chosen, "set by ROBUSTKIT_DTYPE"
    if card:
        if card.has_bf16:
            return "bfloat16", f"GPU {card}: native bf16"
        return "float16", f"GPU {card}: no bf16 below compute capability 8.0, so fp16"
    cpu = cpu_info()
    native = "native bf16" if cpu["bf16"] else "no native bf16"
    return "float32", f"CPU {cpu['model']} ({cpu['isa']}, {native}): fp32 on every CPU kind"


def mixed_precision(device: str, card: GPU | None = None) -> str:
    """How cross-encoders train and score on ``device``, in Accelerate's words: "no" (fp32) on a
    CPU, "bf16" autocast on a GPU with bf16, "fp16" autocast with a gradient scaler without.
    ``$ROBUSTKIT_MIXED_PRECISION`` overrides ("no" is the way out of an fp16 overflow)."""
    card = card or (gpu() if device.startswith("cuda") else None)
    chosen = os.environ.get("ROBUSTKIT_MIXED_PRECISION", "").strip()
    if chosen:
        if chosen not in PRECISIONS:
            raise ValueError(f"ROBUSTKIT_MIXED_PRECISION={chosen!r} is not one of {PRECISIONS}")
        if chosen != "no" and not card:
            raise ValueError(f"ROBUSTKIT_MIXED_PRECISION={chosen} needs a GPU; on a CPU the kit trains in fp32 ('no')")
        if chosen == "bf16" and not card.has_bf16:
            raise ValueError(f"ROBUSTKIT_MIXED_PRECISION=bf16 but the GPU {card} has no bf16; use fp16 or no")
        return chosen
    if not card:
        return "no"
    return "bf16" if card.has_bf16 else "fp16"


def autocast_dtype(device: str):
    """The torch dtype ``mixed_precision(device)`` autocasts to, or None for fp32."""
    import torch

    return {"no": None, "bf16": torch.bfloat16, "fp16": torch.float16}[mixed_precision(device)]


@memo.cached(1)
def cpu_info() -> dict:
    """The CPU's model name, widest vector ISA and whether it has native bf16 (Linux; else '?').

    An ``$ATEN_CPU_CAPABILITY`` below AVX-512 caps the answer: torch then runs AVX2 (or plain)
    kernels, which is how an AVX-512 machine stands in for an AVX2-only one (the results page,
    "The CPU dtype").
    """
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return parse_cpuinfo(text, os.environ.get("ATEN_CPU_CAPABILITY", ""))


# vector ISAs from narrowest to widest, and the one each ATEN_CPU_CAPABILITY value holds torch to
_ISAS = ("no AVX2", "AVX2", "AVX-512")
_KERNEL_CAPS = {"default": "no AVX2", "avx2": "AVX2", "avx512": "AVX-512"}


def parse_cpuinfo(text: str, kernel_cap: str = "") -> dict:
    """``cpu_info`` for the text of /proc/cpuinfo and a value of ``$ATEN_CPU_CAPABILITY``."""
    model = next((line.split(":", 1)[1].strip() for line in text.splitlines()
                  if line.startswith("model name")), "unknown CPU")
    flags = set(next((line.split(":", 1)[1].split() for line in text.splitlines()
                      if line.startswith("flags")), []))
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2" if flags else "?"
    cap = kernel_cap.strip().lower()
    capped = _KERNEL_CAPS.get(cap, isa)
    if isa in _ISAS and _ISAS.index(capped) < _ISAS.index(isa):  # a cap only ever narrows
        return {"model": f"{model} with kernels capped by ATEN_CPU_CAPABILITY={cap}",
                "isa": capped, "bf16": False}
    return {"model": model, "isa": isa, "bf16": bool(flags & {"avx512_bf16", "amx_bf16"})}


def max_pairs_per_pass() -> int | None:
    """``$ROBUSTKIT_MAX_PAIRS``: the most (query, passage) pairs a cross-encoder training step
    runs forward at once, or None (the whole batch; the default). A batch above it is trained
    in micro-batches of whole groups, with the same groups per optimiser step and the same loss;
    only the dropout masks change, so the setting is recorded in the models' manifests.
    Activations dominate CPU training memory, so a smaller budget lowers the peak (and on two
    cores runs faster too: the results page's "Training memory on a CPU")."""
    chosen = os.environ.get("ROBUSTKIT_MAX_PAIRS", "").strip()
    if not chosen:
        return None
    if not chosen.isdigit() or int(chosen) < 1:
        raise ValueError(f"ROBUSTKIT_MAX_PAIRS={chosen!r} must be a whole number of pairs >= 1")
    return int(chosen)


# --- GPU memory: which models are resident, and room for the next one ----------------------

class ModelDoesNotFit(RuntimeError):
    """A model (or a training batch) needs more GPU memory than the device has or can free."""


class GPUMemory:
    """The models the kit holds on the GPU, least recently used first.

    ``admit`` makes room for a model before it is moved to the GPU: when the free memory, less a
    reserve for activations and KV caches, is short, it evicts the least recently used *other*
    models the kit holds (each through its own ``evict``: a language model is dropped and reloaded
    from disk when next needed, a cross-encoder moves to the CPU), printing what it released; when
    even that is not enough it raises ``ModelDoesNotFit`` naming the model, the memory and the fix.
    At ``colab`` on a T4 (15 GiB) the generator (1.5B, 3.1 GB in fp16), the teacher (3B, 6.2 GB)
    and the cross-encoders (< 1 GB each) fit together, so nothing is evicted in the common case.
    """

    def __init__(self, free_bytes: Callable[[], int] | None = None,
                 total_bytes: Callable[[], int] | None = None, reserve_share: float = 0.1):
        self._free = free_bytes or _cuda_free_bytes
        self._total = total_bytes or (lambda: gpu().total_bytes)
        self.reserve_share = reserve_share
        self.resident: OrderedDict[str, tuple[int, Callable[[], None]]] = OrderedDict()
        self.evictions = 0

    def reserve(self) -> int:
        """Memory kept free for activations, KV caches and the allocator's slack."""
        return max(int(self.reserve_share * self._total()), GB)

    def admit(self, name: str, nbytes: int, evict: Callable[[], None]) -> None:
        """Make room for ``name`` (``nbytes``) and record it as resident (most recently used)."""
        check_fits(name, nbytes, self._total(), self.reserve())
        self.resident.pop(name, None)
        for other in list(self.resident):
            if self._free() - self.reserve() >= nbytes:
                break
            held, release = self.resident.pop(other)
            release()
            gc.collect()
            _empty_cuda_cache()
            self.evictions += 1
            print(f"[robustkit] released {other} ({held / GB:.1f} GiB) from the GPU to make room for "
                  f"{name} ({nbytes / GB:.1f} GiB)")
        free = self._free()
        if free - self.reserve() < nbytes:
            raise ModelDoesNotFit(
                f"{name} needs {nbytes / GB:.1f} GiB on the GPU but only {free / GB:.1f} GiB are free of "
                f"{self._total() / GB:.1f} GiB ({self.reserve() / GB:.1f} GiB kept for activations), and the "
                "kit holds nothing more it could release: another process or notebook holds the rest "
                "(restart this runtime, or close the other one), or choose a smaller model for that role "
                "(ROBUSTKIT_MODEL_<ROLE> or rk.start(models=...))")
        self.resident[name] = (nbytes, evict)

    def touch(self, name: str) -> None:
        """``name`` was just used: it becomes the last to be evicted."""
        if name in self.resident:
            self.resident.move_to_end(name)

    def forget(self, name: str) -> None:
        self.resident.pop(name, None)


def place(module, device: str, name: str):
    """``module`` moved to ``device``; onto a GPU through ``GPU_MEMORY`` (room made, recorded as
    the most recently used, and moved back to the CPU when another model needs the room)."""
    if device.startswith("cuda"):
        if next(module.parameters()).device.type != "cuda":
            nbytes = sum(p.numel() * p.element_size() for p in module.parameters())
            GPU_MEMORY.admit(name, nbytes, evict=lambda: module.to("cpu"))
        GPU_MEMORY.touch(name)
    return module.to(device)


def check_fits(name: str, nbytes: int, total_bytes: int, reserve_bytes: int, card: GPU | None = None) -> None:
    """Refuse a model that cannot fit the GPU even alone, before any work starts."""
    if nbytes + reserve_bytes > total_bytes:
        where = str(card) if card else f"a GPU of {total_bytes / GB:.1f} GiB"
        raise ModelDoesNotFit(
            f"{name} needs {nbytes / GB:.1f} GiB of weights (+ {reserve_bytes / GB:.1f} GiB for activations) "
            f"and cannot fit {where}. Choose a smaller model for that role (ROBUSTKIT_MODEL_<ROLE> or "
            "rk.start(models=...)), a GPU with more memory (Colab: Runtime > Change runtime type), or "
            "serve the model elsewhere")



def _cuda_free_bytes() -> int:
    import torch

    return torch.cuda.mem_get_info()[0]


def _empty_cuda_cache() -> None:
    if has_gpu():
        import torch

        torch.cuda.empty_cache()


GPU_MEMORY = GPUMemory()  # the one GPU the kit computes on
# once the kit's caches are cleared, what they held is no longer resident (and the eviction
# callbacks must not keep it alive)
memo.on_clear(GPU_MEMORY.resident.clear)
