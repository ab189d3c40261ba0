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
from typing import ClassVar

import numpy as np

from robustkit import memo
from robustkit.device import has_gpu
from robustkit.paths import runs_root


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


class MethodConfig:
    """The base of every method's knobs (``corm``, ``fva``, ``counterrefine``, ``alignrag``,
    ``headtohead``): a frozen dataclass whose first field is the ``Scale`` (so the seed, data and
    models come along) and whose other fields are the method's knobs, with per-scale defaults in
    ``DEFAULTS`` (scale name → knob → value; a knob missing there takes its field default).

        cfg = rk.fva.settings(scale, tau=0.7)   # FVAConfig.settings: the defaults, one knob changed
        cfg.replace(k=5)                          # another config; every knob checked again
        cfg.knobs()                               # {knob: value}, the scale left out
        cfg.table()                               # as a notebook shows it

    A subclass is declared ``@dataclass(frozen=True, repr=False)`` (this class's repr names the
    scale and seed, not the whole ``Scale``) with its name in messages and its defaults —
    ``class FVAConfig(MethodConfig, what="FVA", defaults=DEFAULTS)`` — and checks its knobs in
    ``__post_init__``.
    """

    WHAT: ClassVar[str]
    DEFAULTS: ClassVar[dict[str, dict]]

    def __init_subclass__(cls, *, what: str, defaults: dict[str, dict], **kwargs):
        super().__init_subclass__(**kwargs)
        cls.WHAT, cls.DEFAULTS = what, defaults

    @classmethod
    def settings(cls, scale=None, **changes):
        """The knobs at a scale (a ``Scale``, its name, or None for ``get_scale()``) — its
        ``DEFAULTS`` with ``changes`` — or, when ``scale`` already is such a config, that config
        with ``changes``; an unknown knob is refused with the known ones named."""
        if isinstance(scale, cls):
            return scale.replace(**changes) if changes else scale
        if isinstance(scale, MethodConfig):
            raise TypeError(f"{cls.WHAT}'s settings take a scale or a {cls.__name__}, got a "
                            f"{type(scale).__name__}")
        scale = get_scale(scale)
        known = {f.name for f in fields(cls)} - {"scale"}
        if unknown := sorted(set(changes) - known):
            raise ValueError(f"unknown {cls.WHAT} knob(s) {unknown}; expected some of {sorted(known)}")
        if scale.name not in cls.DEFAULTS:
            raise ValueError(f"no {cls.WHAT} defaults for scale {scale.name!r}; expected one of "
                             f"{sorted(cls.DEFAULTS)}")
        return cls(scale, **{**cls.DEFAULTS[scale.name], **changes})

    @classmethod
    def require(cls, cfg):
        """``cfg`` itself when it is this paper's config, else a TypeError naming the call that makes
        one: the functions below a paper's entry points take the config their caller normalised
        (``settings``) rather than normalising it again."""
        if not isinstance(cfg, cls):
            raise TypeError(f"expected a {cls.__name__} ({cls.WHAT}'s settings at a scale), got "
                            f"{type(cfg).__name__}")
        return cfg

    @classmethod
    def check_build(cls, name: str, ids, cfg) -> None:
        """Refuse, before anything is built, a method ``name`` this paper does not define (``ids``)
        or a config that is not this paper's: what a folder's ``build`` checks first."""
        if name not in ids:
            raise ValueError(f"unknown {cls.WHAT} method {name!r}; expected one of {list(ids)}")
        if not isinstance(cfg, cls):
            raise TypeError(f"{cls.WHAT}'s build takes a {cls.__name__} (its settings at a scale), got "
                            f"{type(cfg).__name__}")

    def knobs(self) -> dict:
        """Every knob and its value (the scale left out), in declaration order."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "scale"}

    def replace(self, **changes):
        """This config with ``changes``, checked as ``settings`` checks them."""
        return self.settings(self.scale, **{**self.knobs(), **changes})

    def table(self):
        """The config as a notebook shows it: one row per knob (``knob_table``)."""
        return knob_table(self)

    def __repr__(self) -> str:
        knobs = ", ".join(f"{k}={v!r}" for k, v in self.knobs().items())
        return f"{type(self).__name__}(scale={self.scale.name!r}, seed={self.scale.seed}, {knobs})"


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


# the model roles and what each role's model must be (``models.check_model`` checks it); here,
# the lowest module that reads them, since a scale's model choices name their roles
ROLE_KINDS = {"generator": "chat LM", "teacher": "chat LM", "adversary": "chat LM",
              "embedder": "encoder", "critic_init": "encoder",
              "relevance_ce": "relevance cross-encoder", "nli": "NLI classifier"}


def _model_choices(models: dict) -> tuple[tuple[str, str], ...]:
    """``{"generator": "Qwen/…"}`` as the scale's sorted (role, model) pairs; roles checked."""
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


def runs_dir(scale: Scale | str | None = None) -> Path:
    """Artifacts of one scale: ``runs/<scale>/`` (``paths.runs_root``)."""
    path = runs_root() / get_scale(scale).name
    path.mkdir(parents=True, exist_ok=True)
    return path


@memo.cached(1)
def _hub_reachable() -> bool:
    try:
        socket.create_connection(("huggingface.co", 443), timeout=1.5).close()
        return True
    except OSError:
        return False
