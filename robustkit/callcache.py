"""The LLM call cache: every generated text keyed by (model id, dtype, rendered prompt, decoding
parameters) in an SQLite file (WAL mode: concurrent readers, and a crash loses at most the batch
in flight — each batch is committed as one transaction, so no entry is ever half-written).
``call_key`` makes the key; in-process and served generators (``llm``, ``served``) share it.
"""
from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from robustkit.paths import cache_dir
from robustkit.locks import exclusive


def call_key(model_id: str, rendered: str, params: str) -> str:
    """The cache key of one call: the model, the decoding parameters (a JSON string) and the text
    the model reads (a rendered prompt or conversation)."""
    return hashlib.sha256(f"{model_id}\x00{params}\x00{rendered}".encode()).hexdigest()


class CallCache:
    """A persistent map from call keys to generated texts (SQLite, WAL journal).

    A damaged file (a disk filled mid-write, a copy cut short) is moved beside it, as
    ``<name>.corrupt-<UTC time>``, and an empty cache replaces it, with a printed line: only cached
    calls are lost. ``recovered`` counts these recoveries."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path or cache_dir() / "llm_calls.sqlite")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.recovered, self._local = 0, threading.local()  # a connection per thread (`robustkit serve`)
        self._use(lambda db: None)  # open it now: a damaged header is found before any work

    def get_many(self, keys: Sequence[str]) -> dict[str, str]:
        def lookup(db):
            found = {}
            for start in range(0, len(keys), 500):  # SQLite caps the number of bound parameters
                chunk = list(keys[start:start + 500])
                marks = ",".join("?" * len(chunk))
                found.update(db.execute(f"SELECT key, output FROM calls WHERE key IN ({marks})",
                                        chunk).fetchall())
            return found
        return self._use(lookup)

    def put_many(self, rows: Sequence[tuple[str, str, str, str, str]]) -> None:
        """Insert (key, model, prompt, params, output) rows in one transaction."""
        def insert(db):
            with db:
                db.executemany("INSERT OR REPLACE INTO calls VALUES (?, ?, ?, ?, ?, ?)",
                               [(*row, time.time()) for row in rows])
        self._use(insert)

    def __len__(self) -> int:
        return self._use(lambda db: db.execute("SELECT COUNT(*) FROM calls").fetchone()[0])

    def _use(self, work):
        """``work(connection)``; if the file proves damaged, it is moved aside and ``work`` runs anew."""
        try:
            return work(self._connection())
        except sqlite3.DatabaseError as err:
            if not _damage(err):
                raise
            self._close()  # before the move: closing must touch none of the fresh cache's files
            with exclusive(self.path, "setting aside a damaged LLM call cache"):
                try:  # another process that found it damaged too may have set it aside already
                    return work(self._connection())
                except sqlite3.DatabaseError as again:
                    if not _damage(again):
                        raise
                    self._close()
                    self._set_aside(err)
                    return work(self._connection())

    def _connection(self) -> sqlite3.Connection:
        if getattr(self._local, "db", None) is None:
            self._local.db = _connect(self.path)
        return self._local.db

    def _close(self) -> None:
        if getattr(self._local, "db", None) is not None:
            self._local.db.close()
            self._local.db = None

    def _set_aside(self, err: Exception) -> None:
        stamp = f"{datetime.now(timezone.utc):%Y%m%dT%H%M%S.%fZ}"
        aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        for part in ("", "-wal", "-shm"):
            if Path(f"{self.path}{part}").exists():
                Path(f"{self.path}{part}").replace(f"{aside}{part}")
        self.recovered += 1
        print(f"[robustkit] the LLM call cache {self.path} is damaged ({err}): moved it to {aside} and "
              "started an empty one; only cached calls are lost (recomputed when next needed), "
              "artifacts are stored apart")


def _damage(err: sqlite3.DatabaseError) -> bool:
    """SQLite's "malformed" and "not a database" come as DatabaseError itself; a busy or locked
    file, a full disk (OperationalError) or a misuse (ProgrammingError) is no damage."""
    return type(err) is sqlite3.DatabaseError


def _connect(path: Path) -> sqlite3.Connection:
    """Open the cache, reading its header and schema: a truncated file or a garbage header fails
    here, damage deeper in when a lookup reads it. (``PRAGMA quick_check`` would find all of it
    now, but reads every page: for 50,000 calls, 47 MB, ~0.06 s from the OS's page cache, ~0.9 s
    from disk, on every open.)"""
    db = sqlite3.connect(path, timeout=60)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, model TEXT, "
                   "prompt TEXT, params TEXT, output TEXT, created REAL)")
        db.commit()
    except sqlite3.Error:
        db.close()  # nothing may hold a damaged file open once it is moved aside
        raise
    return db
