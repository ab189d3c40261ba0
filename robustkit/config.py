"""Scales, paths, seeding, knob checks and the progress switch: what every part of the kit shares.

One switch, the *scale*, decides data sizes and models (the README's "What each scale can show").
Notebooks read it from ``ROBUSTKIT_SCALE``; without it a GPU means ``colab`` and a CPU ``tiny``.
A ``Scale`` holds only what every method shares (data, question counts, batch size, seed, the
user's model choices); each method keeps its own knobs in its folder's ``config.py`` with
per-scale defaults. Which model plays each role lives in ``models``, the device and the dtype
in ``device``.
"""
from __future__ import annotations

import math
import os
import random
import socket
from dataclasses import dataclass, fields, replace
from pathlib import Path

import numpy as np

from robustkit import memo
from robustkit.device import has_gpu

PACKAGE_DIR = Path(__file__).resolve().parent


def _checkout(package_dir: Path) -> Path | None:
    """The repository the package is imported from (a clone, or an editable install of one), or
    None for an installed wheel: a checkout has pyproject.toml and data/mini beside the package."""
    top = package_dir.parent
    return top if (top / "pyproject.toml").is_file() and (top / "data" / "mini").is_dir() else None


# A checkout keeps the repository's layout (data/mini, runs/ and figures/ at its top); an installed
# wheel carries data/mini inside the package (pyproject's force-include) and writes runs and
# figures into the user's folder (``home``), never into site-packages.
CHECKOUT: Path | None = _checkout(PACKAGE_DIR)
MINI_DIR = CHECKOUT / "data" / "mini" if CHECKOUT else PACKAGE_DIR / "_data" / "mini"

_TRUE = {"1", "true", "yes", "on"}


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


def knobs_at(config_class, defaults: dict[str, dict], scale, changes: dict, what: str):
    """A method's knobs at a scale — ``config_class`` built from ``defaults[scale name]`` with
    ``changes`` — or, when ``scale`` already is such a config, that config with ``changes``;
    an unknown knob is refused with the known ones named (``what``: the method, for messages)."""
    if isinstance(scale, config_class):
        return scale.replace(**changes) if changes else scale
    scale = get_scale(scale)
    known = {f.name for f in fields(config_class)} - {"scale"}
    if unknown := sorted(set(changes) - known):
        raise ValueError(f"unknown {what} knob(s) {unknown}; expected some of {sorted(known)}")
    return config_class(scale, **{**defaults.get(scale.name, {}), **changes})


SCALE_DATASETS = ("mini", "nq_open_oracle")  # the datasets with a corpus and training/test splits


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
    # (role, hub id or folder) pairs the user chose (``rk.start(models=...)``), sorted by role
    models: tuple[tuple[str, str], ...] = ()

    def __post_init__(self):
        if self.dataset not in SCALE_DATASETS:
            raise ValueError(f"unknown dataset {self.dataset!r} for a scale; expected one of "
                             f"{', '.join(SCALE_DATASETS)}")
        if not isinstance(self.models, tuple) or not all(
                isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(x, str) for x in pair)
                for pair in self.models):
            raise ValueError(f"models must be (role, model) pairs, got {self.models!r}; pass a dict "
                             "to with_overrides or rk.start(models=...)")
        for name in ("gen_batch_size", "max_passage_words"):
            _check_positive(name, getattr(self, name))
        for name in ("n_train_questions", "n_test_questions", "seed"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {getattr(self, name)!r}")


SCALES: dict[str, Scale] = {
    # CPU scales batch 32 prompts: decoding 32 rows at a time keeps a CPU's matmuls far busier than
    # 16 (the results page's benchmark), and 64 gains nothing more
    "tiny": Scale("tiny", "mini", n_train_questions=12, n_test_questions=42, gen_batch_size=32,
                  max_passage_words=80),
    "small": Scale("small", "nq_open_oracle", n_train_questions=100, n_test_questions=150,
                   gen_batch_size=32, max_passage_words=80),
    # colab: sized so that every notebook takes at most ~30 min on a T4 (robustkit.timings: estimated,
    # not measured); the whole split is ``paper``'s, or with_overrides(scale, n_train_questions=0, ...)
    "colab": Scale("colab", "nq_open_oracle", n_train_questions=100, n_test_questions=200,
                   gen_batch_size=32, max_passage_words=120),
    "paper": Scale("paper", "nq_open_oracle", n_train_questions=0, n_test_questions=0,
                   gen_batch_size=32, max_passage_words=200),
}


def knob_table(cfg):
    """A method's config as a notebook shows it: one row per knob and its value, the scale and its
    seed first (a pandas DataFrame indexed by knob) — rather than the config's one-line repr."""
    import pandas as pd

    rows = [("scale", cfg.scale.name), ("seed", cfg.scale.seed)]
    rows += [(f.name, getattr(cfg, f.name)) for f in fields(cfg) if f.name != "scale"]
    return pd.DataFrame(rows, columns=["knob", "value"]).set_index("knob")


def get_scale(name: str | Scale | None = None) -> Scale:
    """Return the scale called ``name``, else ``$ROBUSTKIT_SCALE``, else colab on GPU / tiny.

    A ``Scale`` passes through unchanged, so every public function accepts either.
    """
    if isinstance(name, Scale):
        return name
    name = name or os.environ.get("ROBUSTKIT_SCALE") or ("colab" if has_gpu() else "tiny")
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
    if isinstance(changes.get("models"), dict):
        changes["models"] = _model_choices(changes["models"])
    return replace(get_scale(scale), **changes)


def _model_choices(models: dict) -> tuple[tuple[str, str], ...]:
    """``{"generator": "Qwen/…"}`` as the scale's sorted (role, model) pairs; roles checked."""
    from robustkit.models import ROLE_KINDS

    for role, model in models.items():
        if role not in ROLE_KINDS:
            raise ValueError(f"unknown model role {role!r} in models; expected some of {sorted(ROLE_KINDS)}")
        if not isinstance(model, str) or not model.strip():
            raise ValueError(f"models[{role!r}] must be a hub id or a folder path, got {model!r}")
    return tuple(sorted((role, model.strip()) for role, model in models.items()))


def is_offline() -> bool:
    """True when the HF hub is switched off by env or unreachable (checked once, 1.5 s)."""
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(var, "").strip().lower() in _TRUE:
            return True
    return not _hub_reachable()


def set_seed(seed: int = 0) -> None:
    """Seed python, numpy and torch (CPU and CUDA) for deterministic runs."""
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def show_progress() -> bool:
    """The one progress-bar switch: on for interactive users, off under CI (``$CI``) or when
    ``ROBUSTKIT_PROGRESS=0``, so committed notebook outputs carry no bars."""
    value = os.environ.get("ROBUSTKIT_PROGRESS")
    if value is not None:
        return value.strip().lower() in _TRUE
    return os.environ.get("CI", "").strip().lower() not in _TRUE


def announce_long_work(what: str, done: int, total: int, seconds: float, unit: str) -> None:
    """After the first batch of a long job, print how long the rest will take at the rate just
    measured on this device — once, bars or no bars (a notebook run under CI shows it too). Jobs
    under a minute say nothing. The kit runs the longest prompts first, so this errs long."""
    left = seconds / done * (total - done)
    if left >= 60:
        print(f"[robustkit] {what}: {total:,} {unit}; the first {done} took {seconds:.1f} s on "
              f"this machine, so about {left / 60:.0f} min more")


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
    """Model conversions, the LLM call cache, embeddings and downloads: ``$ROBUSTKIT_CACHE``, else
    ``robustkit`` under ``$XDG_CACHE_HOME`` (default ``~/.cache``)."""
    chosen = os.environ.get("ROBUSTKIT_CACHE")
    path = Path(chosen) if chosen else \
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "robustkit"
    path.mkdir(parents=True, exist_ok=True)
    return path


def home() -> Path:
    """The folder ``runs/`` and ``figures/`` go in: ``$ROBUSTKIT_HOME``, else the checkout's top
    folder, else the current working folder (on Colab ``/content``) — the user's, never the
    installed package's."""
    chosen = os.environ.get("ROBUSTKIT_HOME")
    return Path(chosen) if chosen else CHECKOUT or Path.cwd()


def runs_dir(scale: Scale | str | None = None) -> Path:
    """Artifacts of one scale: ``runs/<scale>/`` under ``home()`` (``$ROBUSTKIT_RUNS`` overrides ``runs/``)."""
    path = Path(os.environ.get("ROBUSTKIT_RUNS") or home() / "runs") / get_scale(scale).name
    path.mkdir(parents=True, exist_ok=True)
    return path


def figures_dir() -> Path:
    """Where figures and their CSVs go: ``figures/`` under ``home()`` (``$ROBUSTKIT_FIGURES`` overrides)."""
    path = Path(os.environ.get("ROBUSTKIT_FIGURES") or home() / "figures")
    path.mkdir(parents=True, exist_ok=True)
    return path


@memo.cached(1)
def _hub_reachable() -> bool:
    try:
        socket.create_connection(("huggingface.co", 443), timeout=1.5).close()
        return True
    except OSError:
        return False
