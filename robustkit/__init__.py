"""robustkit: a notebook-first teaching and reproduction kit for robust RAG.

    import robustkit as rk
    scale = rk.start(seed=0)            # seed, plot style, the scale; the first call of a notebook
    rk.data, rk.retrieval, rk.reader …  # the shared core
    rk.corm.labels(scale)               # a method's stages, experiments and figures

The core — config, artifacts, data, retrieval, llm, reader, crossencoder, judges, nli, methods,
baselines, adaptive, resources, metrics, truthfulqa, plots, widgets — is shared; each method lives in its own
folder (``corm/``, ``fva/``, ``counterrefine/``) and imports only the core. Submodules load on
first use, so ``import robustkit`` is cheap.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

_SUBMODULES = ("adaptive", "alignrag", "artifacts", "baselines", "bench", "config", "corm", "counterrefine",
               "crossencoder", "data", "fva", "gap",
               "judges", "llm", "methods", "metrics", "nli", "plots", "qa_sets", "reader", "resources",
               "retrieval", "truthfulqa", "widgets")
_FROM_CONFIG = ("get_scale", "with_overrides", "describe_environment", "Scale")


def start(seed: int = 0, scale: str | None = None):
    """First call of every notebook: the scale (``$ROBUSTKIT_SCALE`` by default) carrying ``seed``
    — the one seed every stage uses — with python, numpy and torch seeded, the plot style set and
    figures shown inline in a notebook. Prints what it chose."""
    from robustkit import config, plots

    chosen = config.with_overrides(config.get_scale(scale), seed=seed)
    config.set_seed(seed)
    plots.set_style(inline=True)
    device = config.pick_device()
    dtype, _ = config.model_dtype(device)
    print(f"robustkit: scale={chosen.name} device={device} dtype={dtype} seed={seed}")
    return chosen


def lazy_package(package: str, submodules: tuple[str, ...], names: dict[str, str]):
    """``__getattr__`` and ``__dir__`` for a method package whose submodules load on first use:
    ``submodules`` by name, ``names`` (attribute → submodule) from their submodule."""
    import sys

    def __getattr__(name):
        if name in submodules:
            return importlib.import_module(f"{package}.{name}")
        if name in names:
            return getattr(importlib.import_module(f"{package}.{names[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted({*vars(sys.modules[package]), *submodules, *names})

    return __getattr__, __dir__


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f"robustkit.{name}")
    if name in _FROM_CONFIG:
        return getattr(importlib.import_module("robustkit.config"), name)
    raise AttributeError(f"module 'robustkit' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_SUBMODULES, *_FROM_CONFIG})
