"""Artifacts on disk: one ``stage`` mechanism, atomic writes and resumable JSONL logs.

Every stage of every method writes under ``runs/<scale>/`` through ``stage``: it reuses the
artifact when its manifest records exactly the inputs asked for (corpus checksum, question ids,
model identities, parameters, seed — FVA-RAG's reproducibility checklist) and the artifact's
bytes still match the checksum recorded there; otherwise it rebuilds it. The manifest is written
last, so a crash at any point leaves the old artifact, or none — never new bytes under an old
manifest, nor a mix of two runs. Processes sharing ``runs/`` (two notebooks, a notebook and
``make run``) build an artifact one at a time: the builder holds ``.<artifact>.lock`` (``locks``),
and a process that waited for it reuses what it built; reusing a finished artifact takes no lock.

Loading trained parts without ever training them (a trained critic, the NLI model, calibrated
thresholds) is a mode of ``stage``: inside ``with rk.load_only():`` — or with
``ROBUSTKIT_LOAD_ONLY=1`` — a trained artifact that is missing or was built from other inputs stops
with ``NotStaged`` naming it and what differs, instead of being built. Stages that answer, score or
rewrite questions (``trains=False``) run there as anywhere: load-only keeps new questions
answerable while no trained part is ever rebuilt. The block's mode belongs to the
context it runs in (a ``contextvars.ContextVar``), not to the process: see ``load_only``.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from robustkit.locks import exclusive


def stage(path: str | Path, inputs: dict, build: Callable[[Path, Path], dict | None],
          load: Callable[[Path], Any], *, trains: bool = True) -> Any:
    """Reuse the artifact at ``path`` if it was built from exactly ``inputs``; otherwise build it.

    Args:
        path: the artifact, a file or a folder.
        inputs: everything that decides the artifact's bytes (JSON-serialisable).
        build: ``build(out, scratch)`` writes the artifact to ``out`` (a path that does not exist
            yet) and returns run statistics for the manifest (or None). ``scratch`` is a folder
            reserved for these inputs where a long build keeps resumable progress: it survives a
            crash, and one left by other inputs is deleted before ``build`` runs.
        load: ``load(path)`` reads the artifact. It is used after a build too, so a fresh and a
            reused artifact give the same value.
        trains: the artifact is trained or calibrated (a model, thresholds, the labels they learn
            from): under load-only it is read, never built. False for what answers, scores or
            rewrites questions, built under load-only too.

    Returns ``load(path)``. One process at a time builds ``path``; another that asks for it
    meanwhile waits for that one (printing whom it waits for), then reuses its artifact.
    """
    path, inputs = Path(path), _canonical(inputs)
    scratch = path.with_name(path.name + ".partial")
    # Reuse reads only, so it takes no lock. Scratch beside a current artifact is cleared under
    # the lock: it is a crashed run's leftover, or the progress of a process building other inputs.
    if is_current(path, inputs) and not scratch.exists():
        return load(path)
    if trains and _loading_only():
        raise NotStaged(f"{path} is {_why_not_current(path, inputs)}, and building it is off (load-only: "
                        "rk.load_only() or ROBUSTKIT_LOAD_ONLY=1). Build it outside load-only mode, or "
                        "point ROBUSTKIT_RUNS at the runs folder that holds it.")
    with exclusive(path, f"building {path}"):
        if not is_current(path, inputs):  # checked again: the holder we waited for may have built it
            if scratch.exists() and _read_or_none(scratch / "inputs.json") != inputs:
                shutil.rmtree(scratch)  # progress of another run: resuming from it would mix the two
            scratch.mkdir(parents=True, exist_ok=True)
            write_json(scratch / "inputs.json", inputs)
            out = path.with_name(f".{path.name}.new")
            _remove(out)  # a killed builder's partial output is never used
            stats = build(out, scratch) or {}
            if not out.exists():
                raise RuntimeError(f"stage {path.name}: build finished without writing its artifact")
            manifest_path(path).unlink(missing_ok=True)  # the old manifest never vouches for new bytes
            _replace(out, path)
            write_json(manifest_path(path), {"inputs": inputs, "sha256": checksum(path), "stats": stats,
                                             "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        shutil.rmtree(scratch, ignore_errors=True)
    return load(path)


class NotStaged(FileNotFoundError):
    """Load-only mode asked for an artifact that is missing or stale (``load_only``)."""


_LOAD_ONLY: ContextVar[bool] = ContextVar("robustkit_load_only", default=False)  # the innermost block's choice


@contextmanager
def load_only(enabled: bool = True) -> Iterator[None]:
    """Within this block ``stage`` never trains: a trained artifact that is missing, or was built
    from other inputs (another corpus, seed, recipe), raises ``NotStaged`` instead of being built —
    so that loading a trained critic never silently retrains it — while answering and scoring new
    questions (stages with ``trains=False``) runs and is staged as usual. ``ROBUSTKIT_LOAD_ONLY=1`` sets
    the mode for a whole process; ``load_only(False)`` lifts it inside a block.

    The mode is a context variable, so it follows contextvars' rules: blocks nest (leaving one
    restores the mode around it); a block in one thread leaves other threads as they were; an
    asyncio task copies the mode of the code that created it; and a thread started inside a block
    starts in its own context, out of load-only mode, unless its work runs in a copy of this one
    (``contextvars.copy_context().run``). ``ROBUSTKIT_LOAD_ONLY=1`` holds in every thread."""
    token = _LOAD_ONLY.set(enabled)
    try:
        yield
    finally:
        _LOAD_ONLY.reset(token)


def _loading_only() -> bool:
    return _LOAD_ONLY.get() or os.environ.get("ROBUSTKIT_LOAD_ONLY", "").strip().lower() in ("1", "true", "yes")


def _why_not_current(path: Path, inputs: dict) -> str:
    """Why ``stage`` would build ``path``, in words: missing, built from other inputs (which), or changed."""
    manifest = _read_or_none(manifest_path(path))
    if not path.exists() or not isinstance(manifest, dict):
        return "not built yet"
    recorded = manifest.get("inputs")
    if recorded != inputs:
        recorded = recorded if isinstance(recorded, dict) else {}
        differ = sorted(k for k in {*recorded, *inputs} if recorded.get(k) != inputs.get(k))
        return f"built from other inputs (differing: {', '.join(differ)})"
    if manifest.get("sha256") != checksum(path):
        return "changed since its manifest was written (its checksum no longer matches)"
    return "being resumed from an interrupted build (a .partial folder is beside it)"


def is_current(path: str | Path, inputs: dict) -> bool:
    """True when ``path`` exists, its manifest records ``inputs`` and its bytes match the manifest."""
    path = Path(path)
    manifest = _read_or_none(manifest_path(path))
    return (path.exists() and isinstance(manifest, dict) and manifest.get("inputs") == _canonical(inputs)
            and manifest.get("sha256") == checksum(path))


def read_manifest(path: str | Path) -> dict:
    """The manifest of a finished artifact: its inputs, checksum and run statistics."""
    manifest = _read_or_none(manifest_path(path))
    if not isinstance(manifest, dict):
        raise FileNotFoundError(f"{path}: no readable manifest beside it ({manifest_path(path).name})")
    return manifest


def manifest_path(path: str | Path) -> Path:
    path = Path(path)
    return path.with_name(path.name + ".manifest.json")


def checksum(path: str | Path) -> str:
    """sha256 of a file, or of a folder's relative file names and contents."""
    path = Path(path)
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        digest.update(str(file.relative_to(path) if path.is_dir() else file.name).encode() + b"\0")
        with open(file, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def digest(rows: Any) -> str:
    """sha256 of JSON-serialisable ``rows`` (key order ignored): a stage input standing for data
    too large to keep in a manifest, such as training groups."""
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()


def atomic_write_text(path: str | Path, text: str | bytes) -> None:
    """Write ``text`` (or bytes) to ``path`` through a temporary file and an atomic rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600 files; give the usual permissions
        binary = isinstance(text, bytes)
        with os.fdopen(fd, "wb" if binary else "w", encoding=None if binary else "utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def json_ready(value: Any) -> Any:
    """``value`` with numpy scalars and arrays, tuples and sets as JSON's own types (recursively
    through dicts and lists), so that ``json.dumps`` writes numbers as numbers and lists as lists."""
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, np.ndarray)):
        return [json_ready(v) for v in value]
    return value.item() if isinstance(value, np.generic) else value


def write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n")


def read_json(path: str | Path) -> Any:
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON (line {err.lineno}: {err.msg})") from None


class JsonlLog:
    """An append-only JSONL file that survives being killed mid-write.

    Each record is written as one line and flushed to disk. On open, a torn last line (a crash
    in the middle of a write) is cut off, so a resumed job sees exactly the complete records.
    """

    def __init__(self, path: str | Path, key: str):
        self.path = Path(path)
        self.key = key
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.records: dict[str, dict] = {}
        if self.path.exists():
            self._load()

    def __contains__(self, record_key: str) -> bool:
        return record_key in self.records

    def __len__(self) -> int:
        return len(self.records)

    def extend(self, rows: Iterable[dict]) -> None:
        lines = []
        for row in rows:
            if row[self.key] in self.records:
                continue
            self.records[row[self.key]] = row
            lines.append(json.dumps(row, ensure_ascii=False) + "\n")
        if lines:
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write("".join(lines))
                handle.flush()
                os.fsync(handle.fileno())

    def _load(self) -> None:
        raw = self.path.read_bytes()
        complete = raw[: raw.rfind(b"\n") + 1]
        if len(complete) != len(raw):  # torn write: keep only whole lines
            with open(self.path, "r+b") as handle:
                handle.truncate(len(complete))
        for line in complete.decode("utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                self.records[row[self.key]] = row


def _canonical(inputs: dict) -> dict:
    """The inputs as they read back from JSON, so a fresh dict compares equal to a stored one."""
    return json.loads(json.dumps(inputs, sort_keys=True, default=str))


def _read_or_none(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _replace(new: Path, path: Path) -> None:
    """Put ``new`` where ``path`` is. A file is replaced atomically; a folder is swapped (a crash
    between the two renames leaves no artifact, which the next run rebuilds)."""
    if new.is_dir() and path.exists():
        old = path.with_name(f".{path.name}.old")
        _remove(old)
        path.rename(old)
        new.rename(path)
        _remove(old)
    else:
        os.replace(new, path)
