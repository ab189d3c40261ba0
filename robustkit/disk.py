"""The disk the kit uses: what a scale's runs and the cache hold, whether a notebook has the room it
needs, and removing a scale's runs or one method's.

    usage("tiny")                          # one row per folder of runs/tiny/ and of the cache
    space_warning("07", "tiny")            # a line when a disk lacks the room notebook 07 needs, else None
    clean("tiny", "alignrag")              # what removing runs/tiny/alignrag/ would free; nothing removed
    clean("tiny", "alignrag", remove=True) # ... and removing it

    python -m robustkit disk --scale tiny
    python -m robustkit clean --scale tiny [--method alignrag] [--yes]

A notebook's need is measured, never guessed: ``figures/run_disk.csv`` (a copy inside an
installed package) records what runs/<scale>/ and the cache held after each notebook of
a cold run of 00→08 in order, one row each, which ``python -m robustkit disk --row "notebook 03"``
prints after that notebook. ``rk.start(notebook=...)`` subtracts what the folders hold already
and warns when a disk has less room free than the rest; a notebook without a measured row at a
scale gets no warning (it has no number to be checked against).

Sizes are the files' own sizes (``du --apparent-size``), so they are the same on every file system.
"""
from __future__ import annotations

import csv
import io
import os
import shutil
from pathlib import Path

import pandas as pd

from robustkit import memo
from robustkit.config import get_scale
from robustkit.locks import holders, is_lock_file
from robustkit.paths import CHECKOUT, PACKAGE_DIR, cache_dir, runs_root

GB = 1e9
# what each of the cache's entries is, and what removing it costs
CACHE_ENTRIES = {
    "models": "language models converted from GGUF (SmolLM2: converted again, ~15 s, when removed)",
    "llm_calls.sqlite": "every model call's reply (removed: the next run calls the models again)",
    **{f"llm_calls.sqlite-{part}": "SQLite's journal of the call cache (goes with it)" for part in ("wal", "shm")},
    "embeddings": "corpus embeddings (computed again when removed)",
    "doctor": "the self-check's own runs (emptied at each `python -m robustkit doctor`)",
    "fp16_probes.json": "which models stay finite in fp16 on which GPU (probed again when removed)",
}


class FolderInUse(RuntimeError):
    """A folder to be removed holds an artifact that a running process is building."""


def tree_size(path: Path) -> tuple[int, int]:
    """(bytes, files) of a file, or of every file under a folder but the lock files (links not followed)."""
    if path.is_file():
        return path.stat().st_size, 1
    sizes = [p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink() and not is_lock_file(p)]
    return sum(sizes), len(sizes)


def usage(scale=None) -> pd.DataFrame:
    """What runs/<scale>/ and the cache hold: one row per entry of each (columns part — "runs" or
    "cache" —, where, holds, bytes, files), largest first within each; lock files (empty, see
    ``locks``) are left out."""
    runs = runs_root() / get_scale(scale).name
    rows = []
    for part, folder, holds in (("runs", runs, {}), ("cache", cache_dir(), CACHE_ENTRIES)):
        entries = sorted(p for p in folder.iterdir() if not is_lock_file(p)) if folder.is_dir() else []
        sized = [(entry, *tree_size(entry)) for entry in entries]
        rows += [{"part": part, "where": str(entry), "holds": holds.get(entry.name, ""), "bytes": size, "files": files}
                 for entry, size, files in sorted(sized, key=lambda row: -row[1])]
    return pd.DataFrame(rows, columns=["part", "where", "holds", "bytes", "files"])


def measured_disk() -> dict[tuple[str, str], tuple[int, int, str]]:
    """(what, scale) -> (bytes in runs/<scale>/, bytes in the cache, where and how measured), after
    ``what`` ("notebook 03") in a cold run of the notebooks in order: ``figures/run_disk.csv``."""
    path = CHECKOUT / "figures" / "run_disk.csv" if CHECKOUT else PACKAGE_DIR / "_data" / "run_disk.csv"
    with open(path, newline="", encoding="utf-8") as handle:
        return {(row["what"], row["scale"]): (int(row["runs_bytes"]), int(row["cache_bytes"]), row["measured_on"])
                for row in csv.DictReader(handle)}


MEASURED_DISK = measured_disk()


def measured_row(what: str, scale=None, measured_on: str = "") -> str:
    """The run_disk.csv line for what runs/<scale>/ and the cache hold now, after ``what``."""
    runs = runs_root() / get_scale(scale).name
    held = [tree_size(folder)[0] if folder.exists() else 0 for folder in (runs, cache_dir())]
    line = io.StringIO()
    csv.writer(line, lineterminator="").writerow([what, get_scale(scale).name, *held, measured_on])
    return line.getvalue()


def space_warning(notebook: str, scale=None) -> str | None:
    """A warning when the disk of the runs folder or of the cache has less room free than notebook
    ``notebook`` needs at ``scale``: what a measured cold run held after it (``MEASURED_DISK``),
    less what the folders hold now. None when there is room, or no measured row to check against."""
    name = get_scale(scale).name
    measured = MEASURED_DISK.get((f"notebook {notebook}", name))
    if measured is None:
        return None
    *after, how = measured
    needs: dict[int, tuple[int, list[Path]]] = {}  # file system -> (bytes still needed there, its folders)
    for folder, held_after in zip((runs_root() / name, cache_dir()), after):
        held = tree_size(folder)[0] if folder.exists() else 0
        device = os.stat(_existing(folder)).st_dev
        need, folders = needs.get(device, (0, []))
        needs[device] = (need + max(0, held_after - held), [*folders, folder])
    lines = []
    for need, folders in needs.values():
        free = shutil.disk_usage(_existing(folders[0])).free
        if free < need:
            lines.append(f"  LOW DISK: {free / GB:.1f} GB free on the disk of {' and '.join(map(str, folders))}; "
                         f"notebook {notebook} at {name} needs about {need / GB:.1f} GB more there (what a "
                         f"cold run held after it — {how} — less what is there now). `python -m robustkit "
                         "disk` shows what the kit holds, `python -m robustkit clean` removes a scale's or a "
                         "method's runs; or move them (ROBUSTKIT_RUNS, ROBUSTKIT_CACHE)")
    return "\n".join(lines) or None


def clean(scale=None, method: str | None = None, *, remove: bool = False) -> pd.DataFrame:
    """What removing runs/<scale>/ (or only its ``method`` folder) frees: one row per entry (where,
    bytes, files), removed only with ``remove=True``. Everything goes but the empty lock files
    (``locks``: one deleted while another process holds it would let two processes build the same
    artifact), and the in-process caches are cleared (``memo.clear``), so that nothing loaded from
    a removed folder is served again. Refused, before anything is removed, while a process builds
    an artifact inside (``FolderInUse``)."""
    runs = runs_root() / get_scale(scale).name
    target = runs / method if method else runs
    if method is not None and not target.is_dir():
        present = sorted(p.name for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else []
        raise ValueError(f"no folder {target}: the methods with runs at {runs.name} are {present or 'none'}")
    entries = sorted(p for p in target.iterdir() if not is_lock_file(p)) if target.is_dir() else []
    table = pd.DataFrame([{"where": str(p), **dict(zip(("bytes", "files"), tree_size(p)))} for p in entries],
                         columns=["where", "bytes", "files"])
    if remove and entries:
        if busy := holders(target):
            raise FolderInUse(f"{target} is in use: {'; '.join(busy)}. Let it finish (or stop it), then clean again")
        _remove_keeping_locks(target)
        memo.clear(verbose=False)
    return table


def _remove_keeping_locks(folder: Path) -> None:
    for path in sorted(folder.rglob("*"), key=lambda p: len(p.parts), reverse=True):  # children first
        if path.is_dir() and not path.is_symlink():
            if not any(path.iterdir()):
                path.rmdir()
        elif not is_lock_file(path):
            path.unlink()


def _existing(path: Path) -> Path:
    """``path``, or its nearest folder above that exists (where it will be created)."""
    while not path.exists():
        path = path.parent
    return path
