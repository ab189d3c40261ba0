"""How long a notebook takes at a scale on a device: measured where the kit was run there,
estimated otherwise, and always labelled which.

    expected_time("04", "colab", rk.device.gpu())   # the line rk.start(notebook="04") prints
    estimate_minutes("02", "colab", "T4")           # the estimate alone
    python -m robustkit.timings                     # the README's table: notebooks × GPUs at colab
    python -m robustkit.timings 04 colab T4         # one notebook's estimate, row by row

An estimate turns a notebook's model work (``workload.notebook_work``: prompts, tokens, training
pairs, from the scale's knobs) into seconds on a GPU from its datasheet: 16-bit dense tensor
FLOP/s and memory bandwidth, at efficiencies the kit assumes for its own code (transformers'
eager ``generate``, the scale's ``gen_batch_size``, one stream): ``PREFILL_MFU`` of peak in prompts and scoring,
``DECODE_BANDWIDTH`` of the memory bandwidth plus a per-step launch overhead in decoding,
``TRAIN_MFU`` in training (the kit's critic loop's, on the results page). None of the
GPU numbers has been measured on that GPU; a device the kit has been timed on is listed in
the results page's ``run_times.csv`` (``MEASURED``) instead.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from robustkit.config import Scale, get_scale
from robustkit.models import SHIPPED
from robustkit.run_times import MEASURED

PREFILL_MFU = 0.30  # share of peak tensor FLOP/s a forward pass over prompts or pairs reaches (assumed)
DECODE_BANDWIDTH = 0.60  # share of memory bandwidth a decoding step streams the weights at (assumed)
STEP_OVERHEAD_S = (0.005, 0.0003)  # a decoding step's fixed cost: 5 ms + 0.3 ms a layer (launches, Python; assumed)
TRAIN_MFU = 0.25  # the kit's cross-encoder loop on a BERT-base shape (results page: critic training on an H200)
LORA_MFU = 0.20  # TRL's trainer with LoRA and gradient checkpointing (assumed)
DOWNLOAD_BYTES_S = 100e6  # a hub download into a fresh Colab session, weights then read once (assumed)


@dataclass(frozen=True)
class GPUProfile:
    name: str
    tflops: float  # dense fp16/bf16 tensor-core peak, from the datasheet
    bandwidth_gbs: float
    memory_gib: float


# The GPUs Colab lends (T4, L4, A100) and the ones the kit was developed on (H100/H200): datasheets
GPUS = {"T4": GPUProfile("Tesla T4", 65, 320, 15),
        "L4": GPUProfile("NVIDIA L4", 121, 300, 22),
        "A100 40GB": GPUProfile("NVIDIA A100 40GB", 312, 1555, 40),
        "A100 80GB": GPUProfile("NVIDIA A100 80GB", 312, 2039, 80),
        "H100": GPUProfile("NVIDIA H100 80GB", 989, 3350, 80),
        "H200": GPUProfile("NVIDIA H200", 989, 4800, 141)}

# (parameters, of which embeddings, decoder layers) of the registry's models: their model cards
SIZES = {"Qwen/Qwen2.5-1.5B-Instruct": (1.54e9, 0.23e9, 28), "Qwen/Qwen2.5-3B-Instruct": (3.09e9, 0.31e9, 36),
         "Qwen/Qwen3-8B": (8.19e9, 0.62e9, 36), "Qwen/Qwen3-14B": (14.8e9, 0.78e9, 40),
         "Qwen/Qwen3-32B": (32.8e9, 0.78e9, 64),
         "HuggingFaceTB/SmolLM2-135M-Instruct": (0.135e9, 0.028e9, 30),
         "sentence-transformers/all-MiniLM-L6-v2": (22.7e6, 11.9e6, 6),
         "BAAI/bge-small-en-v1.5": (33.4e6, 11.9e6, 12), "facebook/contriever-msmarco": (109e6, 23.4e6, 12),
         "microsoft/deberta-v3-base": (184e6, 98.4e6, 12), "microsoft/deberta-v3-large": (435e6, 131e6, 24),
         "cross-encoder/ms-marco-MiniLM-L-6-v2": (22.7e6, 11.9e6, 6),
         "cross-encoder/ms-marco-MiniLM-L-12-v2": (33.4e6, 11.9e6, 12),
         "cross-encoder/nli-deberta-v3-base": (184e6, 98.4e6, 12),
         "cross-encoder/nli-deberta-v3-large": (435e6, 131e6, 24)}


def estimate_seconds(work, gpu: GPUProfile, size: tuple[float, float, int], batch: int) -> float:
    """Seconds for one ``workload.Work`` row on ``gpu`` with a model of ``size``, decoding ``batch``
    prompts together (the scale's ``gen_batch_size``)."""
    params, embeddings, layers = size
    compute = params - embeddings  # an embedding lookup costs no FLOPs
    flops_per_s = gpu.tflops * 1e12
    prompt_tokens = work.items * (work.tokens_in - work.shared_prefix) + \
        math.ceil(work.items / max(work.share, 1)) * work.shared_prefix
    if work.kind == "forward":
        return 2 * compute * prompt_tokens / (flops_per_s * PREFILL_MFU)
    if work.kind == "train":  # forward and backward: 6 FLOPs a parameter a token
        return 6 * compute * work.items * work.tokens_in / (flops_per_s * TRAIN_MFU)
    if work.kind == "lora":  # forward, backward through frozen weights, one recomputed forward
        return 8 * compute * work.items * work.tokens_in / (flops_per_s * LORA_MFU)
    prefill = 2 * compute * prompt_tokens / (flops_per_s * PREFILL_MFU)
    steps = math.ceil(work.items / batch) * (work.budget or work.tokens_out)
    weights = 2 * params / (gpu.bandwidth_gbs * 1e9 * DECODE_BANDWIDTH)  # 16-bit weights, read once a step
    step = max(weights, 2 * compute * batch / (flops_per_s * PREFILL_MFU))
    return prefill + steps * (step + STEP_OVERHEAD_S[0] + STEP_OVERHEAD_S[1] * layers)


def model_size(role: str, scale: Scale) -> tuple[float, float, int]:
    """(parameters, embedding parameters, layers) of the model playing ``role`` at ``scale``: the
    registry's from ``SIZES`` (the kit trains its own relevance and NLI models from ``critic_init``
    where the registry has none), a chosen model's counted from its configuration."""
    from robustkit.models import ROLE_KINDS, auto_config, parameter_count, resolve_model

    if model_id(role, scale) in SIZES:
        return SIZES[model_id(role, scale)]
    config = auto_config(resolve_model(role, scale, verbose=False).path)
    return (parameter_count(config, ROLE_KINDS[role]), config.vocab_size * config.hidden_size,
            config.num_hidden_layers)


def estimate_minutes(notebook: str, scale: Scale | str | None, gpu: str) -> float:
    """The estimated minutes of ``notebook`` at ``scale`` on ``gpu`` (a key of ``GPUS``)."""
    from robustkit.workload import notebook_work

    scale = get_scale(scale)
    work = notebook_work(notebook, scale)
    compute = sum(estimate_seconds(w, GPUS[gpu], model_size(w.role, scale), scale.gen_batch_size) for w in work)
    # each hub model the notebook uses is downloaded once into a fresh session (roles may share one)
    hub = {model_id(w.role, scale): w.role for w in work if model_id(w.role, scale) in SIZES}
    download = sum(2 * model_size(role, scale)[0] for model, role in hub.items()
                   if model not in SHIPPED) / DOWNLOAD_BYTES_S
    return (compute + download) / 60


def model_id(role: str, scale: Scale) -> str:
    """Who plays ``role`` at ``scale``: the user's choice, the registry's model, or (for the
    relevance and NLI models the kit trains itself) ``critic_init``'s — without resolving it, so
    an estimate needs neither the hub nor the weights."""
    from robustkit.models import MODEL_REGISTRY, chosen_models

    return (chosen_models(scale).get(role) or MODEL_REGISTRY[role].get(scale.name)
            or MODEL_REGISTRY["critic_init"][scale.name])


def gpu_kind(name: str) -> str | None:
    """The ``GPUS`` key of a GPU called ``name`` (``torch.cuda.get_device_name``: "Tesla T4",
    "NVIDIA A100-SXM4-80GB" …), or None for a GPU the kit has no profile of."""
    words = re.split(r"[\s-]+", name.upper())
    matches = [kind for kind in GPUS if kind.split()[0] in words]
    return next((k for k in matches if k.split()[-1] in words), matches[0] if matches else None)


def expected_time(notebook: str, scale: str, card=None) -> str:
    """One line: how long ``notebook`` takes at ``scale`` on ``card`` (a ``device.GPU``, or None
    for this CPU), measured or estimated and labelled so."""
    kind = gpu_kind(card.name) if card else "CPU"
    measured = MEASURED.get((f"notebook {notebook}", scale, kind or "?"))
    if measured:
        seconds, how = measured
        return f"about {_duration(seconds)} at {scale} (measured: {how})"
    if card is None:
        return f"no measured time at {scale} on a CPU; figures/README.md lists what was measured"
    if kind is None:
        return f"no estimate for {card.name}: the kit knows {', '.join(GPUS)}"
    minutes = estimate_minutes(notebook, scale, kind)
    return (f"about {minutes:.0f} min at {scale} on this {GPUS[kind].name} (estimated from its datasheet "
            "rates and this notebook's workload, not measured; robustkit.timings says how)")


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def colab_table(scale: str = "colab") -> str:
    """A markdown table: estimated minutes per notebook and GPU at ``scale`` (the README's)."""
    kinds = ["T4", "L4", "A100 40GB", "H100"]
    lines = [f"| notebook | {' | '.join(kinds)} |", "|---|" + "---|" * len(kinds)]
    for notebook in ("00", "01", "02", "03", "04", "05", "06", "07", "08"):
        cells = [f"{estimate_minutes(notebook, scale, kind):.0f}" for kind in kinds]
        lines.append(f"| {notebook} | {' | '.join(cells)} |")
    return "\n".join(lines)


def breakdown(notebook: str, scale: Scale | str | None = "colab", gpu: str = "T4") -> str:
    """``notebook``'s estimate on ``gpu`` row by row: each ``workload.Work`` and its seconds (the total
    adds the notebook's model downloads)."""
    from robustkit.workload import stage_work

    scale = get_scale(scale)
    lines = [f"notebook {notebook} at {scale.name} on a {GPUS[gpu].name}: about "
             f"{estimate_minutes(notebook, scale, gpu):.1f} min (estimated)"]
    for stage, rows in stage_work(notebook, scale).items():
        for w in rows:
            seconds = estimate_seconds(w, GPUS[gpu], model_size(w.role, scale), scale.gen_batch_size)
            lines.append(f"  [{stage}] {w.what}: {w.role} {w.kind} {w.items:,} × {w.tokens_in} tokens"
                         + (f", {w.tokens_out} of {w.budget} out" if w.kind == "generate" else "")
                         + (f", prefix {w.shared_prefix} shared by {w.share}" if w.share > 1 else "")
                         + f": {seconds:,.1f} s")
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    print(breakdown(*sys.argv[1:]) if sys.argv[1:] else colab_table())
