"""Where the kit reads and writes: the package, the checkout it may sit in, and the user's folders
for runs, figures and caches — the lowest module, so that every other can ask.

    home()          runs/ and figures/ go here: $ROBUSTKIT_HOME, else the checkout, else the working folder
    runs_root()     runs/ (``$ROBUSTKIT_RUNS``); one folder per scale inside (``config.runs_dir``)
    figures_dir()   figures/ (``$ROBUSTKIT_FIGURES``)
    cache_dir()     model conversions, the call cache, embeddings, downloads (``$ROBUSTKIT_CACHE``)

A checkout keeps the repository's layout (data/mini, runs/ and figures/ at its top); an installed
wheel carries data/mini inside the package (pyproject's force-include) and writes runs and figures
into the user's folder, never into site-packages.
"""
from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def checkout(package_dir: Path) -> Path | None:
    """The repository the package is imported from (a clone, or an editable install of one), or
    None for an installed wheel: a checkout has pyproject.toml and data/mini beside the package."""
    top = package_dir.parent
    return top if (top / "pyproject.toml").is_file() and (top / "data" / "mini").is_dir() else None


CHECKOUT: Path | None = checkout(PACKAGE_DIR)
MINI_DIR = CHECKOUT / "data" / "mini" if CHECKOUT else PACKAGE_DIR / "_data" / "mini"


def home() -> Path:
    """The folder ``runs/`` and ``figures/`` go in: ``$ROBUSTKIT_HOME``, else the checkout's top
    folder, else the current working folder (on Colab ``/content``) — the user's, never the
    installed package's."""
    chosen = os.environ.get("ROBUSTKIT_HOME")
    return Path(chosen) if chosen else CHECKOUT or Path.cwd()


def runs_root() -> Path:
    """Every scale's artifacts: ``runs/`` under ``home()``, or ``$ROBUSTKIT_RUNS``."""
    return Path(os.environ.get("ROBUSTKIT_RUNS") or home() / "runs")


def figures_dir() -> Path:
    """Where figures and their CSVs go: ``figures/`` under ``home()`` (``$ROBUSTKIT_FIGURES`` overrides)."""
    path = Path(os.environ.get("ROBUSTKIT_FIGURES") or home() / "figures")
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_dir() -> Path:
    """Model conversions, the LLM call cache, embeddings and downloads: ``$ROBUSTKIT_CACHE``, else
    ``robustkit`` under ``$XDG_CACHE_HOME`` (default ``~/.cache``)."""
    chosen = os.environ.get("ROBUSTKIT_CACHE")
    path = Path(chosen) if chosen else \
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "robustkit"
    path.mkdir(parents=True, exist_ok=True)
    return path
