"""Artifacts on disk: atomic writes, resumable JSONL logs and run manifests.

Every stage writes under ``runs/<scale>/``. A manifest beside each artifact records the
fingerprints of its inputs (corpus and question files, model ids, parameters) so a stage reuses
an artifact only when it was built from the same inputs (FVA-RAG's reproducibility checklist).
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and an atomic rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600 files; give the usual permissions
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n")


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


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


def write_manifest(path: str | Path, inputs: dict, stats: dict | None = None) -> None:
    """Record beside ``path`` the inputs that determine it (and optional run statistics)."""
    write_json(manifest_path(path), {
        "inputs": json.loads(json.dumps(inputs, default=str)), "stats": stats or {},
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})


def read_manifest(path: str | Path) -> dict:
    meta = manifest_path(path)
    if not meta.exists():
        raise FileNotFoundError(f"{path}: no manifest beside it ({meta.name})")
    return read_json(meta)


def matching_artifact(path: str | Path, inputs: dict) -> bool:
    """True when ``path`` exists and its manifest records exactly these inputs."""
    path = Path(path)
    if not (path.exists() and manifest_path(path).exists()):
        return False
    return read_json(manifest_path(path)).get("inputs") == json.loads(json.dumps(inputs, default=str))


def manifest_path(path: str | Path) -> Path:
    path = Path(path)
    return path.with_name(path.name + ".manifest.json")
