"""The session a notebook runs in: the first call of every notebook, and what it reports.

    scale = rk.session.start(seed=0, models={"generator": "Qwen/Qwen2.5-0.5B-Instruct"})

(``rk.start(seed=0, notebook="04")``, every notebook's first call, adds the notebook's expected
time from ``robustkit.timings``.) ``start`` settles the scale (with the user's model choices and
the one seed), checks every role's model before any work (``models.check_models``), seeds python,
numpy and torch, sets the plot style and pandas' table display, and prints the device (GPU name,
memory, compute capability), the dtype and the mixed precision, the scale's sizes and where runs
and figures go.
"""
from __future__ import annotations

import importlib.metadata
import sys

from robustkit import config, device, paths
from robustkit.models import (ROLE_KINDS, OfflineModelError, check_models, chosen_models,
                              resolve_model)

# modules a pip install under a running kernel may upgrade: loaded old, installed new, they need a restart
_WATCHED = ("numpy", "pandas", "scipy", "torch", "transformers", "matplotlib", "accelerate")


def start(seed: int = 0, scale: str | config.Scale | None = None, *,
          models: dict | None = None) -> config.Scale:
    """The scale (``$ROBUSTKIT_SCALE`` by default) carrying ``seed`` — the one seed every stage
    uses — and ``models`` (role → hub id or local folder), every model checked before any work,
    with python, numpy and torch seeded, the plot style set and figures shown inline. Prints what
    it chose (``report``)."""
    from robustkit import plots

    changes = {"seed": seed} | ({"models": models} if models else {})
    chosen = config.with_overrides(config.get_scale(scale), **changes)
    checked = check_models(chosen)
    config.set_seed(seed)
    plots.set_style(inline=True)
    set_table_display()
    print(report(chosen, checked))
    return chosen


def set_table_display() -> None:
    """Tables a student reads: two decimals (accuracies are in points, CIs from a handful of
    questions support no more), and rows wide enough that a table does not wrap at 80 characters."""
    import pandas as pd

    pd.set_option("display.precision", 2)
    pd.set_option("display.width", 120)


def report(scale: config.Scale, checked: list[dict]) -> str:
    """The lines ``start`` prints: scale and data, device and precision, your models, where
    artefacts go, and a restart warning where a pip install replaced an imported package."""
    where = device.pick_device()
    dtype, _ = device.model_dtype(where)
    card = device.gpu()
    precision = {"no": "fp32", "bf16": "bf16 autocast", "fp16": "fp16 autocast with a gradient scaler"}
    if card:
        machine = f"GPU {card}"
    else:
        cpu = device.cpu_info()
        machine = f"CPU {cpu['model']} ({cpu['isa']}, {'native' if cpu['bf16'] else 'no native'} bf16)"
    lines = [f"robustkit {_version()} · scale {scale.name} · seed {scale.seed} · {scale.dataset}: "
             f"{scale.n_train_questions or 'all'} training / {scale.n_test_questions or 'all'} test questions",
             f"  {machine} · language models in {dtype} · cross-encoders in "
             f"{precision[device.mixed_precision(where)]}",
             f"  runs → {_shown(paths.runs_root())}, figures → {_shown(paths.home() / 'figures')}"]
    chosen = chosen_models(scale)
    lines += [f"  {row['role']}: {row['model']} (your choice, {row['source']}; checked)"
              for row in checked if row["role"] in chosen]
    stale = stale_modules()
    if stale:
        lines.append(f"  RESTART the runtime: {', '.join(stale)} were upgraded after they were imported "
                     "(Colab: Runtime > Restart session), then run this cell again")
    return "\n".join(lines)


def _shown(path) -> str:
    """A path as a user reads it: relative to the working folder when it is near."""
    import os

    relative = os.path.relpath(path)
    return relative if not relative.startswith("../..") else str(path)


def stale_modules() -> list[str]:
    """Modules whose loaded version is not the installed one (a pip install under a running kernel)."""
    stale = []
    for name in _WATCHED:
        loaded = getattr(sys.modules.get(name), "__version__", None)
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if loaded and loaded != installed:
            stale.append(f"{name} {loaded} → {installed}")
    return stale


def describe_environment(scale: config.Scale | str | None = None):
    """A table of the scale, device, dtype and where each model role comes from (notebook 00)."""
    import pandas as pd

    scale = config.get_scale(scale)
    where = device.pick_device()
    dtype, why = device.model_dtype(where)
    rows = [{"item": "scale", "value": scale.name, "detail": f"data={scale.dataset}, seed={scale.seed}"},
            {"item": "device", "value": where, "detail": f"offline={config.is_offline()}"},
            {"item": "dtype", "value": dtype, "detail": why}]
    for role in ROLE_KINDS:
        try:
            spec = resolve_model(role, scale, verbose=False)
            rows.append({"item": role, "value": spec.name, "detail": spec.source})
        except OfflineModelError:
            rows.append({"item": role, "value": "-", "detail": "no model at this scale: the kit trains its own"})
    return pd.DataFrame(rows)


def _version() -> str:
    from robustkit import __version__

    return __version__
