"""robustkit: a notebook-first teaching and reproduction kit for robust RAG.

    import robustkit as rk
    scale = rk.start(seed=0, notebook="04")   # seed, plot style, models checked, device, expected time
    rk.data, rk.retrieval, rk.reader …        # the shared core
    rk.corm.labels(scale)                     # a method's stages, experiments and figures
    method = rk.build("fva-rag", scale)       # any method by its id (rk.registry.ids()), from its config
    rk.doctor.run()                           # a self-check of every method on this machine
    rk.held(), rk.clear()                     # the models and indexes this process holds; release them
    with rk.load_only(): ...                  # read trained parts from runs/, never train them

The core — config, models, device, weights, session, artifacts, data, retrieval, llm, reader,
crossencoder, judges, nli, methods, baselines, adaptive, resources, metrics, truthfulqa, plots,
memo (the owner of every in-process cache), disk (what runs and the cache hold) — is shared;
each method lives in its own folder (``corm/``, ``fva/``, ``counterrefine/``, ``alignrag/``),
every folder the same shape, and imports only the core. On top: ``registry`` builds any method
by one id, ``headtohead/`` composes them all (notebook 08), ``serve`` exposes a kit method as an
OpenAI-compatible endpoint, ``audit`` measures any RAG system under biased questions, ``doctor``
and ``bench`` check and time every method.
``llm_client`` runs a chat LM role on an OpenAI-compatible server. ``course`` checks a notebook's
written-out core against the package (``same``) and an exercise's guess (``check``). Submodules
load on first use, so ``import robustkit`` is cheap.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

_SUBMODULES = ("adaptive", "alignrag", "artifacts", "audit", "baselines", "bench", "callcache",
               "config", "corm", "counterrefine", "course", "crossencoder", "data", "device", "disk", "doctor",
               "fva", "gap", "headtohead", "judges", "llm", "llm_client", "llm_replies", "locks", "loopback", "memo",
               "methods", "metrics", "models", "nli", "paths", "plots", "qa_sets", "reader", "registry",
               "resources", "retrieval", "run_times", "serve", "session", "timings",
               "truthfulqa", "weights", "widgets", "workload", "workload_measured",
               "workload_prompts")
_FROM_CONFIG = ("get_scale", "with_overrides", "Scale")
_FROM_MEMO = ("held", "clear")  # what this process holds in memory, and releasing it
_FROM_ARTIFACTS = ("load_only", "NotStaged")  # read staged artifacts, never build them
_FROM_REGISTRY = ("build",)  # any method by its id


def start(seed: int = 0, scale=None, *, models: dict | None = None, notebook: str | None = None):
    """First call of every notebook (``session.start``): the scale carrying ``seed`` and the user's
    ``models``, every model checked, seeds and plot style set, the device, dtype and this
    notebook's expected time printed — and a warning where its runs or cache lack the disk space
    a measured run of it needed (``disk.space_warning``)."""
    from robustkit import device, disk, session

    chosen = session.start(seed, scale, models=models)
    if notebook:
        from robustkit.timings import expected_time

        print(f"  notebook {notebook}: {expected_time(notebook, chosen.name, device.gpu())}")
        if warning := disk.space_warning(notebook, chosen):
            print(warning)
    return chosen


def lazy_package(package: str, submodules: tuple[str, ...], names: dict[str, str]):
    """``__getattr__`` and ``__dir__`` for a method package whose submodules load on first use:
    ``submodules`` by name, ``names`` (attribute → submodule) from their submodule.

    A name must not also be a module of the package: importing that module (``from pkg.run
    import x``) would bind the module over the name (``pkg.run`` would stop being the function)."""
    import sys
    from pathlib import Path

    folder = Path(sys.modules[package].__file__).parent
    if clashes := sorted(name for name in names if (folder / f"{name}.py").exists()):
        raise ImportError(f"{package}: {clashes} name both a module and an attribute of another module")

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
    if name in _FROM_MEMO:
        return getattr(importlib.import_module("robustkit.memo"), name)
    if name in _FROM_ARTIFACTS:
        return getattr(importlib.import_module("robustkit.artifacts"), name)
    if name in _FROM_REGISTRY:
        return getattr(importlib.import_module("robustkit.registry"), name)
    if name == "describe_environment":
        return importlib.import_module("robustkit.session").describe_environment
    raise AttributeError(f"module 'robustkit' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_SUBMODULES, *_FROM_CONFIG, *_FROM_MEMO, *_FROM_ARTIFACTS, *_FROM_REGISTRY,
                   "describe_environment"})
