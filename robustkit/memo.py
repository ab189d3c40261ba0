"""The kit's in-process caches, with one owner: what a process keeps, and a way to let it go.

A notebook session loads models, embeds corpora, trains or loads critics and samples question
sets once, and reuses them for every later cell. Each such cache is declared here — a function
decorated with ``cached``, or a dictionary registered with ``holding`` — so that

    rk.held()    # what this process holds: each cache and how many objects it keeps
    rk.clear()   # release all of it (models, indexes, scorers, samples), and the GPU memory

work for every one of them. Clearing is what a user needs after replacing a local model folder,
after moving ``runs/`` (``ROBUSTKIT_RUNS``), or to get the GPU's memory back without restarting
the runtime. Caches of objects built from artifacts under ``runs/`` (a trained critic, a
calibrated weight) take ``per_runs_folder=True``: they are also keyed by the runs folder, so a
process that switches folders never reuses the other folder's models.

This module imports only ``paths`` (which imports nothing from the kit), so every other module,
the lowest (config, device, models, weights) included, can declare its caches here.
"""
from __future__ import annotations

import gc
import sys
from functools import lru_cache, wraps
from typing import Callable

from robustkit.paths import runs_root

_CACHES: dict[str, Callable] = {}  # "module.function" → its lru_cache
_HOLDINGS: dict[str, dict] = {}  # "module.variable" → a registered dictionary
_ON_CLEAR: list[Callable[[], None]] = []  # run after every clear (e.g. forget GPU residency)


def cached(maxsize: int, *, per_runs_folder: bool = False) -> Callable[[Callable], Callable]:
    """``functools.lru_cache(maxsize)``, owned here. With ``per_runs_folder`` the runs folder in
    force at each call is part of the key (see the module's docstring)."""
    def decorate(function: Callable) -> Callable:
        name = f"{function.__module__}.{function.__qualname__}"
        if not per_runs_folder:
            _CACHES[name] = lru_cache(maxsize)(function)
            return _CACHES[name]

        @lru_cache(maxsize)
        def keyed(runs_folder: str, *args, **kwargs):
            return function(*args, **kwargs)

        @wraps(function)
        def call(*args, **kwargs):
            return keyed(str(runs_root()), *args, **kwargs)

        call.cache_clear, call.cache_info = keyed.cache_clear, keyed.cache_info
        _CACHES[name] = call
        return call
    return decorate


def holding(name: str, store: dict) -> dict:
    """Register ``store`` (a dictionary its module fills), named ``module.variable``; returns it."""
    _HOLDINGS[name] = store
    return store


def on_clear(callback: Callable[[], None]) -> Callable[[], None]:
    """Run ``callback`` after every ``clear`` (what a cache's owner must also forget)."""
    _ON_CLEAR.append(callback)
    return callback


def held() -> dict[str, int]:
    """Every cache that holds something now, and how many objects it holds."""
    counts = {name: cache.cache_info().currsize for name, cache in _CACHES.items()}
    counts |= {name: len(store) for name, store in _HOLDINGS.items()}
    return {name: count for name, count in sorted(counts.items()) if count}


def clear(verbose: bool = True) -> dict[str, int]:
    """Release everything the kit's caches hold in this process (and, on a GPU, its cached
    memory); returns what was held, as ``held()`` said. Work staged on disk is kept: the next
    call reloads from there instead of recomputing."""
    released = held()
    for cache in _CACHES.values():
        cache.cache_clear()
    for store in _HOLDINGS.values():
        store.clear()
    for callback in _ON_CLEAR:
        callback()
    gc.collect()
    torch = sys.modules.get("torch")  # never imported for this: a process without torch has no GPU memory
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    if verbose:
        total = sum(released.values())
        print(f"[robustkit] released {total} cached object(s)" +
              (": " + ", ".join(f"{name} ({count})" for name, count in released.items()) if total else ""))
    return released


